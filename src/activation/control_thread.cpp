#include "activation/control_thread.h"

#include <dirent.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

#include "activation/flight_recorder.h"
#include "alloc/sampler.h"
#include "common/compat.h"
#include "config/config_store.h"
#include "emit/cycle_clock.h"
#include "emit/emitter.h"

namespace pinsight {

namespace control {
namespace {

sem_t wakeup;
std::once_flag init_once;
std::atomic<bool> running{false};
pid_t running_pid = 0;  // a forked child has no control thread: start anew
std::atomic<bool> stopping{false};
// Never destroyed: a program whose atexit callbacks fail (CPython's
// test_exceptions runs one out of memory) exits without stop(), and a joinable
// std::thread destroyed at exit calls std::terminate (SIGABRT).
std::thread &worker = *new std::thread();
std::atomic<void (*)()> signal_handler{nullptr};
struct sigaction previous_action;

// The control thread's Python thread state, kept for the thread's whole life.
// A state made per reload (PyGILState_Ensure) would be inserted at the head of
// the interpreter's thread list at any moment, where the setprofile backend
// finds the state of a thread being started (profile_hook.cpp): that thread
// would stay untraced. Made while the activating thread holds the GIL, so no
// thread start can be under way then. Under tracemalloc, whose hook on the new
// thread's allocation takes the GIL, start() lets the GIL go while it waits:
// with the setprofile backend, a thread started by another thread in those
// microseconds may stay untraced. Set on the control thread only.
thread_local PyThreadState *python_state = nullptr;
std::mutex state_mutex;
std::condition_variable state_made;
bool state_ready = false;

// Why the control thread was woken (each post of the semaphore, one wake): a
// signal counts a reload of its own, so that a wake for an exit or a timer never
// reloads and every signal does.
std::atomic<int> reload_requests{0};
std::atomic<bool> thread_exited{false};
// set_timer's (CLOCK_MONOTONIC ns, 0: none) and what it calls.
std::atomic<uint64_t> timer_deadline_ns{0};
std::atomic<void (*)()> timer_fire{nullptr};
// run_soon's jobs, each in one slot at most.
constexpr int kJobSlots = 4;
std::atomic<void (*)()> pending_jobs[kJobSlots] = {};

// The jobs waiting, each taken from its slot and run once.
void run_pending_jobs() {
  for (auto &slot : pending_jobs) {
    if (auto job = slot.exchange(nullptr)) job();
  }
}
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler counts requests");

// Async-signal-safe: wakes the control thread, then lets a handler installed
// before ours (libpinsight.so installs one) see the signal too.
void on_sigusr1(int signo, siginfo_t *info, void *context) {
  int saved_errno = errno;
  reload_requests.fetch_add(1);
  sem_post(&wakeup);
  errno = saved_errno;
  if (previous_action.sa_flags & SA_SIGINFO) {
    if (previous_action.sa_sigaction) previous_action.sa_sigaction(signo, info, context);
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN &&
             previous_action.sa_handler != nullptr) {
    previous_action.sa_handler(signo);
  }
}

void install_handler() {
  struct sigaction current = {};
  if (sigaction(SIGUSR1, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigusr1) return;
  // The handler to chain to is recorded before ours is in place, so a signal
  // arriving meanwhile never sees a half-written previous_action.
  previous_action = current;
  struct sigaction action = {};
  action.sa_sigaction = on_sigusr1;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGUSR1, &action, nullptr);
}

// How often the control thread checks that SIGUSR1 still reaches us, and
// that the program still has a thread, and advances the naming epoch of the
// compact payload (emitter.h).
constexpr long kCheckNanoseconds = 1000000000L;
// Under the batched payload: how often it looks for idle threads' blocks.
constexpr long kBlockCheckNanoseconds = 100000000L;
// After a program thread exits: how often, and how many times, to look
// whether it was the last one (it is still finishing when it tells us).
constexpr long kExitWatchNanoseconds = 5000000L;
constexpr int kExitWatchChecks = 200;

pid_t control_tid = 0;

// Threads that are not the program's: LTTng-UST's listeners (named
// "<process>-ust" by liblttng-ust), this control thread and a flight
// recorder's thread.
bool is_helper_thread(pid_t tid) {
  if (tid == control_tid || tid == flight_recorder::thread_tid()) return true;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", static_cast<int>(tid));
  FILE *f = std::fopen(path, "r");
  if (!f) return true;  // gone
  char name[32] = {};
  bool helper = std::fgets(name, sizeof name, f) != nullptr;
  std::fclose(f);
  if (!helper) return false;
  size_t n = std::strcspn(name, "\n");
  return n >= 4 && std::memcmp(name + n - 4, "-ust", 4) == 0;
}

bool is_exited_thread(pid_t tid) {
  // A thread group's leader that called pthread_exit stays a zombie until the
  // whole process ends; other threads vanish.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", static_cast<int>(tid));
  FILE *f = std::fopen(path, "r");
  if (!f) return true;
  char buffer[512] = {};
  size_t got = std::fread(buffer, 1, sizeof buffer - 1, f);
  std::fclose(f);
  buffer[got] = '\0';
  const char *after_name = std::strrchr(buffer, ')');
  return after_name && (after_name[2] == 'Z' || after_name[2] == 'X');
}

// Whether every thread of the program has exited, leaving only ours and
// LTTng-UST's. False when /proc cannot tell.
bool program_threads_gone() {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return false;
  bool gone = true;
  while (dirent *entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (!is_helper_thread(tid) && !is_exited_thread(tid)) {
      gone = false;
      break;
    }
  }
  closedir(dir);
  return gone;
}

// A process ends when its last thread exits: glibc then calls exit(0). Our
// thread and LTTng-UST's would keep it alive (a child forked from a thread
// whose only thread returns): end it as its last thread would have.
void end_if_program_gone() {
  if (!program_threads_gone()) return;
  worker.detach();  // a joinable std::thread must not be destroyed at exit
  std::exit(0);
}

void make_python_state(PyInterpreterState *interpreter) {
  // PyThreadState_New needs no GIL; it binds the state to this thread.
  python_state = PyThreadState_New(interpreter);
  std::lock_guard<std::mutex> lock(state_mutex);
  state_ready = true;
  state_made.notify_all();
}

void delete_python_state() {
  PyThreadState *state = python_state;
  python_state = nullptr;
  // After finalization began the interpreter frees it; taking the GIL then
  // would end this thread.
  if (!state || compat::is_finalizing()) return;
  PyEval_RestoreThread(state);
  PyThreadState_Clear(state);
  PyThreadState_DeleteCurrent();
}

// Calls the timer's `fire` once its deadline has passed; else the nanoseconds
// left (0: none armed).
uint64_t fire_timer_if_due() {
  uint64_t due = timer_deadline_ns.load();
  if (due == 0) return 0;
  uint64_t now = emitter::cycle_clock::monotonic_ns();
  if (now < due) return due - now;
  // Unless set_timer replaced it meanwhile: then the new one stands.
  if (timer_deadline_ns.compare_exchange_strong(due, 0)) {
    if (auto fire = timer_fire.load()) fire();
  }
  return 0;
}

// sem_timedwait's deadline (CLOCK_REALTIME) `wait_ns` (< 1 s) from now.
timespec realtime_in(long wait_ns) {
  timespec deadline = {};
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_nsec += wait_ns;
  deadline.tv_sec += deadline.tv_nsec / 1000000000L;
  deadline.tv_nsec %= 1000000000L;
  return deadline;
}

void run(PyInterpreterState *interpreter) {
  control_tid = static_cast<pid_t>(syscall(SYS_gettid));
  alloc::ignore_calling_thread();  // its thread state, parses and reloads are ours
  make_python_state(interpreter);
  int exit_checks = 0;
  time_t epoch_second = 0;
  // Any thread may take SIGUSR1; the handler only posts the semaphore, and
  // the reload happens here, outside the signal context.
  while (!stopping.load()) {
    long wait_ns = exit_checks > 0                        ? kExitWatchNanoseconds
                   : emitter::blocks::idle_flush_wanted() ? kBlockCheckNanoseconds
                                                          : kCheckNanoseconds;
    if (uint64_t left = fire_timer_if_due(); left > 0 && left < static_cast<uint64_t>(wait_ns)) {
      wait_ns = static_cast<long>(left);
    }
    const timespec deadline = realtime_in(wait_ns);
    if (sem_timedwait(&wakeup, &deadline) != 0) {
      if (errno != ETIMEDOUT || stopping.load()) continue;
      if (emitter::blocks::idle_flush_wanted() && emitter::blocks::any_idle() &&
          !compat::is_finalizing()) {
        // A thread blocked outside Python (or running no traced code) would
        // hold its records, and readers every other thread's, indefinitely.
        // Under the GIL no thread is writing a record.
        ScopedGil gil;
        emitter::blocks::flush_idle();
      }
      timespec now = {};
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec == epoch_second && exit_checks == 0) continue;  // batched: 100 ms ticks
      if (now.tv_sec != epoch_second) {
        epoch_second = now.tv_sec;
        emitter::advance_naming_epoch();
      }
      if (exit_checks > 0) {
        --exit_checks;
      } else {
        // A library loaded later (libpinsight.so through OMP_TOOL_LIBRARIES or
        // dlopen) may have replaced our handler without chaining to it: put
        // ours back, chained to theirs, so that both see every signal.
        install_handler();
      }
      end_if_program_gone();
      continue;
    }
    if (stopping.load()) break;
    // First: a pause of the job's consumes the wakes of the exits and signals
    // looked at below.
    run_pending_jobs();
    if (thread_exited.exchange(false)) exit_checks = kExitWatchChecks;
    // One reload per signal, as before timers and exits shared the semaphore.
    if (reload_requests.load() > 0) {
      reload_requests.fetch_sub(1);
      if (auto handler = signal_handler.load()) handler();
    }
    // A timer set meanwhile: the next wait counts it.
  }
  config_store::forget_thread();
  delete_python_state();
}

// Whether tracemalloc traces allocations now (GIL held). Its public probe:
// PyTraceMalloc_Untrack answers -2 when tracemalloc is off, and untracking an
// address never tracked changes nothing.
bool tracemalloc_tracing() {
  static const char probe = 0;
  constexpr unsigned int kNoDomain = 0x70797069;  // a domain nobody tracks in
  return pinsight_tracemalloc_untrack(kNoDomain, reinterpret_cast<uintptr_t>(&probe)) != -2;
}

}  // namespace

void start(void (*on_signal)()) {
  signal_handler.store(on_signal);
  std::call_once(init_once, [] { sem_init(&wakeup, 0, 0); });
  install_handler();
  if (running_pid != getpid()) {
    // In a forked child the parent's control thread does not exist: forget
    // its handle without touching it.
    running.store(false);
    new (&worker) std::thread();
  }
  if (running.exchange(true)) return;
  running_pid = getpid();
  stopping.store(false);
  // Created with every signal blocked: process-directed signals go to the
  // program's threads, as untraced (a thread that blocks a signal must find
  // it pending, not handled here).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  state_ready = false;
  bool gil_needed = tracemalloc_tracing();
  worker = std::thread(run, compat::interpreter_of(PyThreadState_Get()));
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  auto wait_for_state = [] {
    std::unique_lock<std::mutex> lock(state_mutex);
    state_made.wait(lock, [] { return state_ready; });
  };
  if (gil_needed) {
    // tracemalloc traces raw allocations under the GIL (PyGILState_Ensure in
    // its hook): the new thread's PyThreadState_New needs it from us.
    Py_BEGIN_ALLOW_THREADS wait_for_state();
    Py_END_ALLOW_THREADS
  } else {
    wait_for_state();  // with the GIL held on purpose (see python_state)
  }
  // Named by its creator, before anything can fork: pinsight_python's fork hook
  // tells this thread (and LTTng-UST's "<name>-ust" listeners) from the program's.
  pthread_setname_np(worker.native_handle(), "pinsight-ctl");
}

void set_timer(uint64_t deadline_ns, void (*fire)()) {
  timer_deadline_ns.store(0);  // never the new deadline with the old call
  timer_fire.store(fire);
  timer_deadline_ns.store(deadline_ns);
  if (running.load()) sem_post(&wakeup);
}

bool run_soon(void (*job)()) {
  bool placed = false;
  for (auto &slot : pending_jobs) {
    if (slot.load() == job) {
      placed = true;
      break;
    }
  }
  for (auto &slot : pending_jobs) {
    if (placed) break;
    void (*free_slot)() = nullptr;
    placed = slot.compare_exchange_strong(free_slot, job) || free_slot == job;
  }
  if (placed && running.load()) sem_post(&wakeup);
  return placed;
}

bool thread_running() { return running.load() && running_pid == getpid(); }

bool wait_for_signal(double seconds) {
  const bool endless = seconds < 0 || seconds > kLongestWaitS;
  const uint64_t end =
      endless ? 0 : emitter::cycle_clock::monotonic_ns() + static_cast<uint64_t>(seconds * 1e9);
  while (!stopping.load()) {
    if (reload_requests.load() > 0) return true;
    long wait_ns = kCheckNanoseconds;
    if (!endless) {
      const uint64_t now = emitter::cycle_clock::monotonic_ns();
      if (now >= end) return false;
      if (end - now < static_cast<uint64_t>(wait_ns)) wait_ns = static_cast<long>(end - now);
    }
    const timespec deadline = realtime_in(wait_ns);
    sem_timedwait(&wakeup, &deadline);  // whatever woke it, the loop looks again
  }
  return false;
}

bool on_control_thread() { return python_state != nullptr; }

void program_thread_exiting() {
  if (!running.load()) return;
  thread_exited.store(true);
  sem_post(&wakeup);
}

void stop(bool hand_back_sigusr1) {
  if (!running.exchange(false)) return;
  stopping.store(true);
  sem_post(&wakeup);
  if (worker.joinable()) worker.join();
  if (!hand_back_sigusr1) return;
  // Hand SIGUSR1 back to whoever had it before us (often SIG_DFL): a process
  // we were attached to and detached from must react to it as it did before.
  struct sigaction current = {};
  if (sigaction(SIGUSR1, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
      current.sa_sigaction == on_sigusr1) {
    sigaction(SIGUSR1, &previous_action, nullptr);
  }
}

ScopedGil::ScopedGil() {
  if (python_state) {
    own_state_ = python_state;
    PyEval_RestoreThread(own_state_);
  } else {
    gilstate_ = PyGILState_Ensure();
  }
}

ScopedGil::~ScopedGil() {
  if (own_state_) {
    PyEval_SaveThread();
  } else {
    PyGILState_Release(gilstate_);
  }
}

}  // namespace control
}  // namespace pinsight
