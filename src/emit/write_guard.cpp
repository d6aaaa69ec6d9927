#include "emit/write_guard.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <mutex>

namespace pinsight::emitter::write_guard {

std::atomic<int> writers{0};
__thread int depth __attribute__((tls_model("initial-exec"))) = 0;
__thread volatile sig_atomic_t deferred __attribute__((tls_model("initial-exec"))) = 0;

namespace {

// Default action: end the process. Not SIGUSR1 (PInsight's reload signal, and
// ours), nor SIGUSR2 (pinsight-python trace forwards it only to the processes
// that handle it: /proc's SigCgt), nor the faults (a crash in a write is no
// kill from outside).
constexpr int kTerminating[] = {SIGTERM, SIGHUP,  SIGINT,  SIGQUIT,   SIGALRM,
                                SIGPIPE, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF};
// How long a signal waits for other threads' writes: one is a few microseconds;
// only a writer stopped (SIGSTOP, a debugger) takes longer, and then the signal
// ends the process anyway.
constexpr int kWaitSteps = 2000;  // of 1 ms

[[noreturn]] void end_by(int signo) {
  bool closed = false;
  for (int i = 0; i < kWaitSteps && !closed; ++i) {
    // Tried often first: a thread that writes without pause is between two
    // events most of the time.
    for (int j = 0; j < 1000 && !closed; ++j) {
      int none = 0;
      closed = writers.compare_exchange_weak(none, kClosed, std::memory_order_acq_rel);
    }
    struct timespec step = {0, 1000000};
    if (!closed) nanosleep(&step, nullptr);
  }
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signo, &fallback, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signo);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  raise(signo);
  // A signal the default action does not end the process with (never for the
  // list above): end it as that signal would have.
  _exit(128 + signo);
}

void on_terminating_signal(int signo) {
  if (depth > 0) {
    deferred = signo;  // delivered when this thread's write ends
    return;
  }
  end_by(signo);
}

}  // namespace

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signo : kTerminating) {
      struct sigaction current = {};
      if (sigaction(signo, nullptr, &current) != 0) continue;
      // Only the default action: a handler or SIG_IGN is the program's choice.
      if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue;
      struct sigaction action = {};
      action.sa_handler = on_terminating_signal;
      // SA_RESTART: the program's system calls, interrupted while the signal
      // waits for a write, go on as without us.
      action.sa_flags = SA_RESTART;
      sigemptyset(&action.sa_mask);
      sigaction(signo, &action, nullptr);
    }
  });
}

void after_fork_child() {
  writers.store(0, std::memory_order_relaxed);
  depth = 0;
  deferred = 0;
}

void deliver_deferred() {
  int signo = deferred;
  deferred = 0;
  end_by(signo);
}

}  // namespace pinsight::emitter::write_guard
