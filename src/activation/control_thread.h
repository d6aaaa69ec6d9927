// The control thread: SIGUSR1 wakes it, and it calls activation's reload
// (which parses the file, publishes it in the configuration store, then takes
// the GIL through ScopedGil to apply CPython-level changes). Between signals it
// watches that the program still has a thread, advances the compact payload's
// naming epoch, fires activation's timer (window_timeout) and runs the jobs
// asked of it (an INTROSPECT window end).
#pragma once

#include <cstdint>

#include "common/compat.h"

namespace pinsight {

namespace control {
// Longer waits (about 285 years) are without end: their nanoseconds would not
// fit in 64 bits.
constexpr double kLongestWaitS = 9e9;
// Starts the control thread and installs the SIGUSR1 handler, once per
// process (again in a forked child). The thread calls on_signal (GIL not held)
// for each SIGUSR1.
void start(void (*on_signal)());
// The last thread that ran Python code is exiting: the control thread then
// looks whether the program has any thread left, and ends the process if not.
void program_thread_exiting();
// Arms the control thread's one timer: `fire` is called once (GIL not held)
// when CLOCK_MONOTONIC reaches `deadline_ns`. A later call replaces it;
// deadline_ns 0 disarms it. Any thread.
void set_timer(uint64_t deadline_ns, void (*fire)());
// Has the control thread call `job` (GIL not held) once, soon. Each job waits
// at most once: asked again before it ran, it runs once. A few distinct jobs
// may wait together (an INTROSPECT window end's, a flight recorder's dump).
// Any thread; false if every slot is taken by other jobs.
bool run_soon(void (*job)());
// Whether the control thread runs in this process.
bool thread_running();
// For a job, on the control thread: waits until `seconds` have passed (< 0:
// without end), a SIGUSR1 arrives (true; the thread makes its reload after the
// job) or the thread is stopping. Wakes for timers and thread exits are left
// to the thread's loop.
bool wait_for_signal(double seconds);
// Whether the calling thread is the control thread.
bool on_control_thread();
// Stops the control thread (atexit, before the interpreter finalizes; detach).
// hand_back_sigusr1: SIGUSR1 goes back to the handler it had before start()
// (detach: the program runs on). At exit ours stays, a no-op from then on: put
// back to its default, a SIGUSR1 that a job script or trace's forwarding sends
// during the interpreter's finalization would end the program, whose exit
// status would then be the signal's.
void stop(bool hand_back_sigusr1);

// Holds the GIL for its scope, on a thread that did not hold it: the control
// thread with the Python thread state it keeps (control_thread.cpp says why), any
// other thread through PyGILState_Ensure.
class ScopedGil {
 public:
  ScopedGil();
  ~ScopedGil();
  ScopedGil(const ScopedGil &) = delete;
  ScopedGil &operator=(const ScopedGil &) = delete;

 private:
  PyThreadState *own_state_ = nullptr;
  PyGILState_STATE gilstate_{};
};
}  // namespace control

}  // namespace pinsight
