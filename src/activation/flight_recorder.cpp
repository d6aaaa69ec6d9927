#include "activation/flight_recorder.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "activation/activation.h"
#include "activation/control_thread.h"
#include "common/compat.h"
#include "common/signal_chain.h"
#include "emit/cycle_clock.h"
#include "emit/emitter.h"
#include "tracer/thread_state.h"
#include "tracer/tracer.h"

namespace pinsight::flight_recorder {
namespace {

// How long a flush waits for the control thread to take the GIL: a thread that
// holds it in native code for ever must not hold up the dump (the keeper waits
// for every process's answer, itself bounded).
constexpr auto kGilWait = std::chrono::milliseconds(1000);
// The longest a dump holds this process's blocks back (emitter::blocks::hold_blocks)
// when the keeper's "resume" does not come: its wait for the flushes and the
// snapshot's copy, with room for a loaded node.
constexpr uint64_t kHoldMaxNs = 10ull * 1000 * 1000 * 1000;
// How long a fatal signal's handler or the exit waits for the keeper's dump.
constexpr int kLastWordsWaitMs = 30000;
// A thread's open frames written at a dump: the outermost and the innermost,
// with the depths of the frames left out missing in between (a deep recursion
// would otherwise fill the ring with its frames).
constexpr uint32_t kMaxFramesPerThread = 256;
constexpr uint32_t kOuterFrames = 64;
// Our descriptors above the program's usual range (as LTTng-UST's: emitter.cpp).
constexpr int kFirstDescriptor = 64;
// The signals whose default action ends the process with a core: a dump first.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr size_t kFatalCount = sizeof kFatalSignals / sizeof kFatalSignals[0];

// process_info's fields, ready to be written from a signal's handler.
struct Identity {
  int pid = 0, mpi_rank = -1, mpi_size = -1;
  std::string hostname, argv, python_version, backend, procname;
};
Identity &identity = *new Identity();

// The run's keeper and this process's connections to it. Set under the GIL
// (start, fork, stop); the recorder thread and the handlers read them.
std::string &socket_path = *new std::string();
double stall_s = 0;
std::atomic<pid_t> owner_pid{0};     // the process whose recorder runs (fork: not the child)
std::atomic<int> conn_fd{-1};        // the recorder thread reads it; writes under write_mutex
std::atomic<int> last_words_fd{-1};  // a fatal signal's or the exit's one request
int wake_r = -1, wake_w = -1;        // stops the recorder thread's poll
pthread_t thread{};
bool thread_started = false;
std::atomic<bool> stopping{false};
std::atomic<int> recorder_tid{0};
// This process's end was dumped already (an exception's exit, a fatal signal).
std::atomic<bool> end_dumped{false};
// The ids of this process's dumps (open_frame's and dump_marker's dump_id).
std::atomic<uint32_t> local_dumps{0};
std::string &exit_exception = *new std::string();
bool handlers_installed = false;
bool exit_hook_registered = false;
struct sigaction previous_actions[kFatalCount];

// Placement-new'ed again in a forked child, where another thread may have
// held them.
std::mutex *write_mutex = new std::mutex();    // writes to conn_fd
std::mutex *request_mutex = new std::mutex();  // one dump() at a time
std::mutex *answer_mutex = new std::mutex();
std::condition_variable *answer_cv = new std::condition_variable();
uint64_t awaited_tag = 0;  // the request dump() waits for; under answer_mutex
std::string &answer_line = *new std::string();
bool answered = false;
std::atomic<uint64_t> request_tags{0};

// The keeper's flush, done by the control thread under the GIL.
std::mutex *job_mutex = new std::mutex();
std::condition_variable *job_cv = new std::condition_variable();
uint32_t job_wanted = 0, job_done = 0;  // local dump ids; under job_mutex
struct Written {
  uint32_t threads = 0;
  uint32_t frames = 0;
  bool whole = true;  // every thread's stack written (the registry was free)
};
Written job_written;

uint64_t now_ns() { return emitter::cycle_clock::monotonic_ns(); }

// LTTng-UST's descriptor tracker (liblttng-ust-common, loaded with the
// provider): a descriptor in it survives the program closing every descriptor
// it does not own (trace preloads the guard that asks the tracker), where a
// number closed under us could be reused by the program, and we would write
// into its file. Found by name: the extension does not link liblttng-ust.
struct FdTracker {
  void (*lock)() = nullptr;
  void (*unlock)() = nullptr;
  int (*add)(int) = nullptr;
  void (*remove)(int) = nullptr;
  bool found() const { return lock && unlock && add && remove; }
};
FdTracker fd_tracker() {
  FdTracker t;
  t.lock = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "lttng_ust_lock_fd_tracker"));
  t.unlock = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "lttng_ust_unlock_fd_tracker"));
  t.add = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "lttng_ust_add_fd_to_tracker"));
  t.remove =
      reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "lttng_ust_delete_fd_from_tracker"));
  return t;
}

// A new descriptor moved above the program's range and into the tracker.
int keep(int fd) {
  rlimit limit = {};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur >= 4 * kFirstDescriptor) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, kFirstDescriptor);
    if (high >= 0) {
      close(fd);
      fd = high;
    }
  }
  FdTracker t = fd_tracker();
  if (!t.found()) return fd;
  t.lock();
  int tracked = t.add(fd);
  t.unlock();
  return tracked >= 0 ? tracked : fd;
}

// Closes one of ours: out of the tracker first (holding its lock lets the guard
// close it). `shutdown`: the peer sees the end (never in a forked child: the
// parent's connection is the same socket).
void drop(int fd, bool shutdown_it) {
  if (fd < 0) return;
  if (shutdown_it) shutdown(fd, SHUT_RDWR);
  FdTracker t = fd_tracker();
  if (t.found()) {
    t.lock();
    t.remove(fd);
    close(fd);
    t.unlock();
  } else {
    close(fd);
  }
}

// Whole lines, or false (async-signal-safe).
bool send_all(int fd, const char *text, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, text, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool send_line(const std::string &line) {
  std::lock_guard<std::mutex> lock(*write_mutex);
  int fd = conn_fd.load();
  return fd >= 0 && send_all(fd, line.data(), line.size());
}

int connect_to(const std::string &path, const char *hello, std::string *error) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    *error = "the keeper's socket path is too long: " + path;
    return -1;
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  if (connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
    *error = "cannot reach the run's keeper at " + path + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  char line[64];
  int n = std::snprintf(line, sizeof line, "%s %d\n", hello, static_cast<int>(getpid()));
  if (!send_all(fd, line, static_cast<size_t>(n))) {
    *error = "the run's keeper closed the connection";
    close(fd);
    return -1;
  }
  return keep(fd);
}

// A reason as one word of the keeper's protocol and of a folder's name.
std::string word(const std::string &text, const char *otherwise) {
  std::string out;
  for (char c : text) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
    if (plain) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= 48) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? otherwise : out;
}

// Free text on one line of the protocol.
std::string one_line(const std::string &text) {
  std::string out;
  for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
  return out.size() > 512 ? out.substr(0, 512) : out;
}

// Whether the calling thread holds the GIL (async-signal-safe): its thread
// state is the one running (3.12+: the thread's own attached state; before: the
// runtime's current one).
bool holds_gil() {
  PyThreadState *running = compat::thread_state();
  return running != nullptr && running == PyGILState_GetThisThreadState();
}

// ---------------------------------------------------------------------------
// What a dump writes (GIL held, or a fatal signal's thread holding it).

struct StackWrite {
  uint32_t id;
  emitter::cycle_clock::Anchor now;
  Written written;
};

void write_frame(StackWrite &w, const ThreadState &t, uint32_t depth, const FrameRecord &r) {
  if (r.code == nullptr || r.code->names.qualname().empty()) return;  // its code died
  const bool native = r.kind == RecordKind::CCall;
  const uint64_t begin =
      r.begin_ticks != 0 ? emitter::cycle_clock::ns_at(r.begin_ticks, w.now) : uint64_t{0};
  emitter::open_frame(w.id, t.tid, t.python_thread_id, depth, *r.code,
                      native ? r.callee_name : nullptr, native ? r.line : r.code->lineno, begin);
  ++w.written.frames;
}

void write_thread(ThreadState &t, void *context) {
  auto &w = *static_cast<StackWrite *>(context);
  ++w.written.threads;
  const auto size = static_cast<uint32_t>(t.stack.size());
  for (uint32_t depth = 0; depth < size; ++depth) {
    // A deep stack: its outermost frames and its innermost.
    if (size > kMaxFramesPerThread && depth == kOuterFrames) {
      depth = size - (kMaxFramesPerThread - kOuterFrames);
    }
    write_frame(w, t, depth, t.stack[depth]);
  }
}

// The names of the code and callables that ran in the last kNamesEpochs
// naming epochs (about a second each): the ring holds their records, but the
// code_info and callable_info written at their first use in an epoch may be
// overwritten already (a busy loop fills a small ring in a fraction of one).
constexpr uint32_t kNamesEpochs = 30;

void write_recent_names() {
  const uint32_t now = emitter::naming_epoch.load(std::memory_order_relaxed);
  const uint32_t since = now - kNamesEpochs;
  for (CodeInfo *code = code_registry::first(); code != nullptr; code = code->next) {
    if (code->named_epoch != 0 && code->named_epoch - since <= kNamesEpochs) {
      emitter::code_info_again(*code);
    }
  }
  emitter::callable_names_since(since);
}

void write_process_info() {
  const Identity &i = identity;
  emitter::process_info_ready(i.pid, i.mpi_rank, i.mpi_size, i.hostname.c_str(), i.argv.c_str(),
                              i.python_version.c_str(), i.backend.c_str(), i.procname.c_str());
}

// The process's part of dump `id` (GIL held): its records staged so far, its
// identity (the ring no longer holds the first process_info) and every
// thread's open frames. From a signal's handler, nothing that waits or allocates.
Written write_contents(uint32_t id, bool from_signal) {
  if (emitter::batched_payload) {
    if (from_signal) {
      emitter::blocks::flush_from_signal(true);
    } else {
      emitter::flush_blocks(/*last=*/false);
    }
  }
  write_process_info();
  write_recent_names();
  // Rate control's counts so far (they are written at exit otherwise): the dump's
  // report shows what the configuration capped.
  if (!from_signal) activation::emit_lexgion_counts();
  StackWrite w{id, emitter::cycle_clock::anchor(), {}};
  if (from_signal) {
    w.written.whole = thread_states::try_for_each(&write_thread, &w);
  } else {
    thread_states::for_each([&](ThreadState &t) { write_thread(t, &w); });
  }
  return w.written;
}

// ---------------------------------------------------------------------------
// The keeper's flush.

// The control thread's job: dump job_wanted's contents under the GIL.
void flush_job() {
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(*job_mutex);
    id = job_wanted;
    if (id == job_done) return;
  }
  Written written;
  if (!compat::is_finalizing() && Tracer::instance().active()) {
    control::ScopedGil gil;
    written = write_contents(id, false);
  }
  {
    std::lock_guard<std::mutex> lock(*job_mutex);
    job_done = id;
    job_written = written;
  }
  job_cv->notify_all();
}

// "flush N REASON": this process's part of the keeper's dump N, then the
// answer, within kGilWait and the time the records take to write.
void answer_flush(const std::string &n, const std::string &reason) {
  // What needs no GIL first: the encoded records and the closed segments.
  if (emitter::batched_payload) emitter::blocks::flush_encoded();
  const uint32_t id = local_dumps.fetch_add(1) + 1;
  Written written;
  int status = 0;
  bool done = false;
  if (control::thread_running() && Tracer::instance().active()) {
    std::unique_lock<std::mutex> lock(*job_mutex);
    job_wanted = id;
    lock.unlock();
    if (control::run_soon(&flush_job)) {
      lock.lock();
      done = job_cv->wait_for(lock, kGilWait, [&] { return job_done == id; });
      if (done) written = job_written;
    }
  }
  if (!done) {
    // The GIL did not come: the threads' open segments stay unwritten.
    status |= PINSIGHT_DUMP_NO_GIL;
    write_process_info();
  } else if (!written.whole) {
    status |= PINSIGHT_DUMP_BUSY;
  }
  emitter::dump_marker(id, reason.c_str(), written.threads, written.frames, status);
  emitter::blocks::hold_blocks(kHoldMaxNs);  // until the snapshot: "resume"
  send_line("flushed " + n + " " + std::to_string(status) + "\n");
}

// ---------------------------------------------------------------------------
// The recorder thread.

void deliver_answer(uint64_t tag, const std::string &line) {
  std::lock_guard<std::mutex> lock(*answer_mutex);
  if (tag == 0 || tag != awaited_tag) return;  // the stall watch's, or a request given up
  answer_line = line;
  answered = true;
  answer_cv->notify_all();
}

// One line from the keeper.
void on_line(const std::string &line) {
  // "flush N REASON" | "resume N" | "dumped TAG N WHERE" | "failed TAG WHY"
  size_t space = line.find(' ');
  std::string verb = line.substr(0, space);
  std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
  if (verb == "resume") {  // the dump's snapshot is recorded (or failed)
    emitter::blocks::resume_blocks();
  } else if (verb == "flush") {
    size_t cut = rest.find(' ');
    answer_flush(rest.substr(0, cut), cut == std::string::npos ? "dump" : rest.substr(cut + 1));
  } else if (verb == "dumped" || verb == "failed") {
    size_t cut = rest.find(' ');
    uint64_t tag = std::strtoull(rest.substr(0, cut).c_str(), nullptr, 10);
    deliver_answer(tag, line);
  }
}

// The stall watch: no function event for stall_s while tracing.
struct StallWatch {
  uint64_t count = 0;
  uint64_t since_ns = 0;
  bool reported = false;

  void check() {
    const Tracer &tracer = Tracer::instance();
    const uint64_t now = now_ns();
    const uint64_t seen = tracer.events_emitted_now();
    const bool tracing =
        tracer.active() && !tracer.stepped_aside() && tracer.mode() == TraceMode::Tracing;
    if (!tracing || seen != count || since_ns == 0) {
      count = seen;
      since_ns = now;
      reported = false;  // a new stall only after progress
      return;
    }
    if (reported || static_cast<double>(now - since_ns) < stall_s * 1e9) return;
    reported = true;
    char detail[96];
    std::snprintf(detail, sizeof detail, "no function event for %.0f s",
                  static_cast<double>(now - since_ns) / 1e9);
    // Not waited for: the keeper asks this thread to flush meanwhile.
    send_line("dump 0 stall - " + std::string(detail) + "\n");
  }
};

void *recorder_main(void *) {
  recorder_tid.store(static_cast<int>(syscall(SYS_gettid)));
  prctl(PR_SET_NAME, "pinsight-rec", 0, 0, 0);
  StallWatch stalls;
  std::string pending;
  const int period_ms =
      stall_s > 0 ? static_cast<int>(std::min(1000.0, std::max(50.0, stall_s * 250.0))) : -1;
  while (!stopping.load()) {
    pollfd fds[2] = {{conn_fd.load(), POLLIN, 0}, {wake_r, POLLIN, 0}};
    int ready = poll(fds, 2, period_ms);
    if (ready < 0 && errno != EINTR) break;
    if (stopping.load()) break;
    if (ready > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      char chunk[4096];
      ssize_t n = recv(fds[0].fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the run ended (trace is done): no more dumps
      pending.append(chunk, static_cast<size_t>(n));
      size_t end;
      while ((end = pending.find('\n')) != std::string::npos) {
        std::string line = pending.substr(0, end);
        pending.erase(0, end + 1);
        on_line(line);
      }
    }
    if (stall_s > 0) stalls.check();
  }
  // A request still waiting gets no answer now.
  deliver_answer(awaited_tag, "failed 0 the run's keeper is gone");
  return nullptr;
}

// ---------------------------------------------------------------------------
// Last words: a fatal signal, the exit.

// One request on the connection made for it, and its answer, waited for at
// most kLastWordsWaitMs. Async-signal-safe.
void last_words(const char *reason, const char *detail) {
  int fd = last_words_fd.exchange(-1);
  if (fd < 0) return;
  char line[768];
  int n = std::snprintf(line, sizeof line, "dump 1 %s flushed %s\n", reason, detail);
  if (n <= 0) return;
  if (!send_all(fd, line, std::min(static_cast<size_t>(n), sizeof line - 1))) return;
  pollfd p = {fd, POLLIN, 0};
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(kLastWordsWaitMs) * 1000000u;
  char answer[256];
  for (;;) {
    uint64_t now = now_ns();
    if (now >= deadline) return;
    int r = poll(&p, 1, static_cast<int>((deadline - now) / 1000000u) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    ssize_t got = recv(fd, answer, sizeof answer, 0);
    if (got < 0 && errno == EINTR) continue;
    return;  // answered, or the keeper went away
  }
}

const char *signal_reason(int signo) {
  switch (signo) {
    case SIGSEGV:
      return "signal-SIGSEGV";
    case SIGBUS:
      return "signal-SIGBUS";
    case SIGFPE:
      return "signal-SIGFPE";
    case SIGILL:
      return "signal-SIGILL";
    default:
      return "signal-SIGABRT";
  }
}

void on_fatal_signal(int signo, siginfo_t *info, void *context) {
  const int saved_errno = errno;
  if (owner_pid.load() == getpid() && last_words_fd.load() >= 0 && !end_dumped.exchange(true)) {
    const uint32_t id = local_dumps.fetch_add(1) + 1;
    Written written;
    int status = 0;
    if (holds_gil()) {
      // No other thread runs Python: every thread's stack and records hold still.
      written = write_contents(id, true);
      if (!written.whole) status |= PINSIGHT_DUMP_BUSY;
    } else {
      // A thread outside Python (or one that let the GIL go): its records only.
      emitter::blocks::flush_from_signal(false);
      write_process_info();
      status |= PINSIGHT_DUMP_SIGNAL_NO_GIL;
    }
    const char *reason = signal_reason(signo);
    emitter::dump_marker(id, reason, written.threads, written.frames, status);
    emitter::blocks::hold_blocks(kHoldMaxNs);
    last_words(reason, "-");
  }
  errno = saved_errno;
  for (size_t i = 0; i < kFatalCount; ++i) {
    if (kFatalSignals[i] != signo) continue;
    chain_signal(signo, previous_actions[i], info, context);
    return;
  }
}

void install_signal_handlers() {
  if (handlers_installed) return;
  handlers_installed = true;
  for (size_t i = 0; i < kFatalCount; ++i) {
    chain_in(kFatalSignals[i], on_fatal_signal, &previous_actions[i]);
  }
}

void remove_signal_handlers() {
  if (!handlers_installed) return;
  handlers_installed = false;
  for (size_t i = 0; i < kFatalCount; ++i) {
    struct sigaction current = {};
    if (sigaction(kFatalSignals[i], nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
        current.sa_sigaction == on_fatal_signal) {
      sigaction(kFatalSignals[i], &previous_actions[i], nullptr);
    }
  }
}

// exit()'s status (glibc's on_exit): a non-zero one is a bad end. Python has
// finalized: no thread runs Python now, and the stacks are empty.
void on_process_exit(int status, void *) {
  if (status == 0 || owner_pid.load() != getpid() || last_words_fd.load() < 0 ||
      end_dumped.exchange(true)) {
    return;
  }
  if (emitter::batched_payload) emitter::flush_blocks(/*last=*/true);
  write_process_info();
  std::string reason = exit_exception.empty() ? "exit-" + std::to_string(status) : "exception";
  std::string detail = exit_exception.empty() ? "-" : one_line(exit_exception);
  emitter::dump_marker(local_dumps.fetch_add(1) + 1, reason.c_str(), 0, 0, 0);
  last_words(reason.c_str(), detail.c_str());
}

void start_thread() {
  stopping.store(false);
  recorder_tid.store(0);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) == 0) {
    wake_r = keep(pipe_fds[0]);
    wake_w = keep(pipe_fds[1]);
  }
  // Every signal blocked: process-directed signals go to the program's threads.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  thread_started = pthread_create(&thread, nullptr, recorder_main, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  // Its tid known before anything can fork (the fork hook counts our threads).
  while (thread_started && recorder_tid.load() == 0) sched_yield();
}

void stop_thread() {
  if (!thread_started) return;
  stopping.store(true);
  if (wake_w >= 0) {
    char x = 'x';
    ssize_t ignored = write(wake_w, &x, 1);
    (void)ignored;
  }
  pthread_join(thread, nullptr);
  thread_started = false;
  recorder_tid.store(0);
}

bool connect_all(std::string *error) {
  int conn = connect_to(socket_path, "recorder", error);
  if (conn < 0) return false;
  int words = connect_to(socket_path, "last-words", error);
  if (words < 0) {
    drop(conn, true);
    return false;
  }
  conn_fd.store(conn);
  last_words_fd.store(words);
  return true;
}

}  // namespace

bool start(const std::string &path, double stall_seconds, std::string *error) {
  if (running()) return true;
  socket_path = path;
  stall_s = stall_seconds;
  if (!connect_all(error)) return false;
  owner_pid.store(getpid());
  end_dumped.store(false);
  install_signal_handlers();
  if (!exit_hook_registered) {
    exit_hook_registered = true;
    on_exit(on_process_exit, nullptr);
  }
  start_thread();
  return true;
}

bool running() { return owner_pid.load() == getpid() && conn_fd.load() >= 0; }

int thread_tid() { return owner_pid.load() == getpid() ? recorder_tid.load() : 0; }

void after_fork_child() {
  if (socket_path.empty() || owner_pid.load() == getpid()) return;
  // The parent's: its thread is not here, its connections stay open there.
  write_mutex = new (write_mutex) std::mutex();
  request_mutex = new (request_mutex) std::mutex();
  answer_mutex = new (answer_mutex) std::mutex();
  answer_cv = new (answer_cv) std::condition_variable();
  job_mutex = new (job_mutex) std::mutex();
  job_cv = new (job_cv) std::condition_variable();
  job_wanted = job_done = 0;
  awaited_tag = 0;
  thread_started = false;
  recorder_tid.store(0);
  drop(conn_fd.exchange(-1), false);
  drop(last_words_fd.exchange(-1), false);
  drop(wake_r, false);
  drop(wake_w, false);
  wake_r = wake_w = -1;
  exit_exception.clear();
  std::string error;
  if (!connect_all(&error)) {
    std::fprintf(stderr, "pinsight-python: process %d: the flight recorder is off: %s\n",
                 static_cast<int>(getpid()), error.c_str());
    return;
  }
  owner_pid.store(getpid());
  end_dumped.store(false);
  start_thread();
}

void stop() {
  if (owner_pid.load() != getpid()) return;
  stop_thread();
  remove_signal_handlers();
  drop(last_words_fd.exchange(-1), true);
  drop(conn_fd.exchange(-1), true);
  drop(wake_r, true);
  drop(wake_w, true);
  wake_r = wake_w = -1;
  owner_pid.store(0);
}

std::string dump(const std::string &reason, const std::string &detail, double timeout_s,
                 std::string *error) {
  if (!running()) {
    *error =
        "this process is not in a flight-recorder run (pinsight-python trace "
        "--flight-recorder)";
    return std::string();
  }
  const std::string name = word(reason, "requested");
  const uint32_t id = local_dumps.fetch_add(1) + 1;
  Written written = write_contents(id, false);
  emitter::dump_marker(id, name.c_str(), written.threads, written.frames, 0);
  emitter::blocks::hold_blocks(kHoldMaxNs);
  std::string answer;
  Py_BEGIN_ALLOW_THREADS;
  {
    // Waited for without the GIL: the program's other threads run on.
    std::lock_guard<std::mutex> one_at_a_time(*request_mutex);
    const uint64_t tag = request_tags.fetch_add(1) + 1;
    {
      std::lock_guard<std::mutex> lock(*answer_mutex);
      awaited_tag = tag;
      answered = false;
    }
    const std::string text = detail.empty() ? "-" : one_line(detail);
    if (send_line("dump " + std::to_string(tag) + " " + name + " flushed " + text + "\n")) {
      std::unique_lock<std::mutex> lock(*answer_mutex);
      answer_cv->wait_for(lock, std::chrono::duration<double>(timeout_s), [] { return answered; });
      if (answered) answer = answer_line;
      awaited_tag = 0;
    }
  }
  Py_END_ALLOW_THREADS;
  // "dumped TAG N WHERE" | "failed TAG WHY"
  if (answer.rfind("dumped ", 0) == 0) {
    size_t where = answer.find(' ', answer.find(' ', 7) + 1);
    return where == std::string::npos ? std::string() : answer.substr(where + 1);
  }
  if (answer.empty()) {
    *error = "no answer from the run's keeper within " + std::to_string(timeout_s) + " s";
  } else {
    size_t why = answer.find(' ', 7);
    *error = why == std::string::npos ? answer : answer.substr(why + 1);
  }
  return std::string();
}

void note_exit_exception(const std::string &text) { exit_exception = text; }

void remember_process_info(int pid, int mpi_rank, int mpi_size, const std::string &hostname,
                           const std::string &argv, const std::string &python_version,
                           const char *backend, const std::string &procname) {
  identity.pid = pid;
  identity.mpi_rank = mpi_rank;
  identity.mpi_size = mpi_size;
  identity.hostname = hostname;
  identity.argv = emitter::process_info_argv(argv);
  identity.python_version = python_version;
  identity.backend = backend ? backend : "none";
  identity.procname = procname;
}

}  // namespace pinsight::flight_recorder
