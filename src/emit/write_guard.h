// Every event of ours is written inside a WriteGuard: a signal whose default
// action ends the process (SIGTERM from multiprocessing's terminate(), SIGHUP,
// SIGINT where the program left it at the default...) never ends it while one
// of its threads is half-way through an event.
//
// Why: the session's buffers are LTTng-UST's per-user buffers, shared by every
// process of the run. A process killed between reserving an event's space and
// committing it leaves that sub-buffer incomplete for ever: the consumer daemon
// reads a CPU's sub-buffers in order, so every later event of every process on
// that CPU is lost, without a word (measured: a program whose children were
// ended by SIGTERM while they traced kept no event after the first such kill).
//
// How: where such a signal is at its default action when the provider loads,
// a handler of ours takes it. On a thread that is writing, it only notes the
// signal; the write ends, then the signal is delivered. On any thread, it waits
// until no thread is writing and closes the writes (later ones are dropped: the
// process is ending), puts the default action back and raises the signal again:
// the process ends by it, with the status it would have had untraced. SIGKILL
// cannot be taken: docs/activation.md says what it costs.
#pragma once

#include <signal.h>

#include <atomic>
#include <climits>

namespace pinsight::emitter::write_guard {

// Events being written by all threads, or below zero once closed.
extern std::atomic<int> writers;
inline constexpr int kClosed = INT_MIN / 2;
// This thread's writes in progress (nested: a signal handler of ours writing a
// batched block), and a signal that came meanwhile.
extern __thread int depth __attribute__((tls_model("initial-exec")));
extern __thread volatile sig_atomic_t deferred __attribute__((tls_model("initial-exec")));

// Takes the terminating signals left at their default action (once).
void install();
// In a forked child: the parent's other threads, writing or not, are not here.
void after_fork_child();
// The deferred signal, once this thread's write is done.
void deliver_deferred();

struct WriteGuard {
  bool open;
  WriteGuard() {
    ++depth;
    open = writers.fetch_add(1, std::memory_order_acquire) >= 0;
  }
  ~WriteGuard() {
    writers.fetch_sub(1, std::memory_order_release);
    if (--depth == 0 && deferred != 0) deliver_deferred();
  }
  WriteGuard(const WriteGuard &) = delete;
  WriteGuard &operator=(const WriteGuard &) = delete;
};

}  // namespace pinsight::emitter::write_guard

// lttng_ust_tracepoint() of our provider, inside a WriteGuard (only when the
// event is enabled: a disabled one costs what it did).
#define PINSIGHT_TRACEPOINT(name, ...)                                         \
  do {                                                                         \
    if (lttng_ust_tracepoint_enabled(python_pinsight_lttng_ust, name)) {       \
      ::pinsight::emitter::write_guard::WriteGuard pinsight_guard_;            \
      if (pinsight_guard_.open)                                                \
        lttng_ust_do_tracepoint(python_pinsight_lttng_ust, name, __VA_ARGS__); \
    }                                                                          \
  } while (0)
