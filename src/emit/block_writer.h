// The batched payload's writer thread: it encodes the closed segments of every
// thread's block (emit/block_state.h) and writes their blocks, so that a traced
// thread only stages. Without it (not started, a forked child before Python's
// after-fork hook, creation failed) every thread encodes its own. block_buffer.h's
// start_writer / stop_writer / writer_tid are its interface to the emitter.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace pinsight::emitter::blocks {

struct Writer {
  std::atomic<bool> running{false};
  pid_t pid = 0;
  pthread_t thread{};
  std::atomic<bool> stopping{false};
  std::atomic<uint32_t> wake{0};    // futex word
  std::atomic<bool> dozing{false};  // in a long sleep: a thread whose segments pile up wakes it
  std::atomic<int> tid{0};          // set by the thread itself
};
extern Writer writer;

// A thread whose closed segments pile up wakes a dozing writer (one FUTEX_WAKE).
void nudge_writer();
// Started in this process (idempotent; a forked child starts its own), stopped
// and joined.
void start_writer_thread();
void stop_writer_thread();

}  // namespace pinsight::emitter::blocks
