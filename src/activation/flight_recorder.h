// A flight-recorder run's side in a traced process (`pinsight-python trace
// --flight-recorder`, docs/flight_recorder.md). The run's LTTng session keeps
// the last events in memory and writes them out only at a dump; the run's
// keeper (recording/run/keeper.py) takes the dumps. Here:
//
// - the recorder thread, connected to the keeper: before every dump the keeper
//   asks each process to flush, and it answers within a bound: the batched
//   payload's encoded records go out at once (no GIL needed), then the control
//   thread, under the GIL (waited for at most kGilWait), writes what the
//   threads were staging and every thread's open frames (open_frame events:
//   the ring no longer holds the outer frames' begins), and the thread writes
//   a dump_marker saying what it could not;
// - the stall watch, on the same thread: no function event for `stall` seconds
//   while tracing (the tracer's own count of events, which the hot path
//   advances anyway) asks for one dump, and a new one only after progress;
// - the process's own dumps: pinsight_python.dump(), and its bad ends: a fatal
//   signal's handler (async-signal-safe: a second connection made in advance,
//   one write, a bounded poll for the answer, then the signal's own action) and
//   a non-zero exit status (an uncaught exception's among them).
#pragma once

#include <string>

namespace pinsight::flight_recorder {

// Starts the recorder in this process (GIL held): connects to the keeper's
// socket twice, installs the fatal signals' and the exit's handlers, starts the
// thread; `stall_s` > 0 watches for stalls. Idempotent. False with *error when
// the keeper cannot be reached.
bool start(const std::string &socket_path, double stall_s, std::string *error);
// Whether it runs in this process.
bool running();
// The recorder thread's tid (0: none): not one of the program's threads.
int thread_tid();
// In a forked child (GIL held), once it joined the run: the parent's
// connections are dropped (closed, never shut down: they stay the parent's)
// and the child's own are made.
void after_fork_child();
// Detach: the thread ends, the connections close, the handlers go.
void stop();
// A dump asked by the program now (GIL held, released while waiting at most
// `timeout_s` for the keeper's answer): this process's pending records and
// open frames go into the buffers first. The dump's folder, as the keeper
// names it; empty with *error when this process is in no flight-recorder run
// or the dump failed.
std::string dump(const std::string &reason, const std::string &detail, double timeout_s,
                 std::string *error);
// The uncaught exception that ends the program (Python's atexit, from
// sys.last_exc): the exit's dump is named after it.
void note_exit_exception(const std::string &text);
// process_info's fields, kept to write the event again at every dump (a fatal
// signal's handler cannot make strings); activation calls it whenever it
// writes process_info.
void remember_process_info(int pid, int mpi_rank, int mpi_size, const std::string &hostname,
                           const std::string &argv, const std::string &python_version,
                           const char *backend, const std::string &procname);

}  // namespace pinsight::flight_recorder
