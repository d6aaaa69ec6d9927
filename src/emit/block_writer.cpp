#include "emit/block_writer.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "emit/block_state.h"

namespace pinsight::emitter::blocks {

Writer writer;

namespace {

// Between passes the writer sleeps for about as long as the fastest thread
// takes to close a third of its segments (halved or doubled after each pass),
// within these bounds; past kDozeNs a thread half out of segments wakes it.
constexpr uint64_t kShortestSleepNs = 100000;
constexpr uint64_t kLongestSleepNs = 20000000;
constexpr uint64_t kDozeNs = 1000000;

inline void futex_wake(std::atomic<uint32_t> &word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
}

// One pass over the registry: every block's closed segments (unless its own
// thread is encoding them). The most closed segments one thread had.
uint32_t writer_pass() {
  std::lock_guard<std::mutex> lock(*registry_mutex);
  int tid = my_tid();
  uint32_t fullest = 0;
  for (Block *b = registry; b; b = b->next) {
    uint32_t waiting = b->closed.size();
    if (waiting == 0) continue;
    fullest = std::max(fullest, waiting);
    if (!try_lock_encoder(*b, tid)) continue;
    drain(*b);
    unlock_encoder(*b);
  }
  return fullest;
}

void *writer_main(void *) {
  // Its sleeps are short while threads trace fast: no 50 us of slack on each.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  writer.tid.store(my_tid(), std::memory_order_release);
  uint64_t sleep_ns = kLongestSleepNs;
  while (!writer.stopping.load(std::memory_order_acquire)) {
    uint32_t word = writer.wake.load(std::memory_order_acquire);
    uint32_t fullest = writer_pass();
    if (fullest > kMaxSegments / 2) {
      sleep_ns = std::max(sleep_ns / 2, kShortestSleepNs);
    } else if (fullest < kMaxSegments / 6) {
      sleep_ns = std::min(sleep_ns * 2, kLongestSleepNs);
    }
    writer.dozing.store(sleep_ns >= kDozeNs, std::memory_order_relaxed);
    timespec wait = {static_cast<time_t>(sleep_ns / 1000000000),
                     static_cast<long>(sleep_ns % 1000000000)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&writer.wake), FUTEX_WAIT_PRIVATE, word, &wait,
            nullptr, 0);
    if (writer.wake.load(std::memory_order_acquire) != word) sleep_ns = kShortestSleepNs;
  }
  return nullptr;
}

}  // namespace

void nudge_writer() {
  if (!writer.dozing.load(std::memory_order_relaxed)) return;
  if (!writer.dozing.exchange(false, std::memory_order_relaxed)) return;
  writer.wake.fetch_add(1, std::memory_order_release);
  futex_wake(writer.wake);
}

void start_writer_thread() {
  if (writer.running.load() && writer.pid == getpid()) return;
  writer.running.store(false);
  writer.stopping.store(false);
  writer.dozing.store(false);
  writer.tid.store(0);
  // Every signal blocked: process-directed signals go to the program's threads.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  int failed = pthread_create(&writer.thread, nullptr, writer_main, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (failed) return;  // every thread encodes its own records
  // The process's name: LTTng-UST gives its events this thread's name as their
  // procname context, and the blocks it writes are the program's threads'.
  char name[16] = {};
  FILE *comm = std::fopen("/proc/self/comm", "re");
  if (comm) {
    if (std::fgets(name, sizeof name, comm)) name[std::strcspn(name, "\n")] = '\0';
    std::fclose(comm);
  }
  if (name[0]) pthread_setname_np(writer.thread, name);
  // Its tid known before anything can fork (pinsight_python's fork hook counts
  // the program's threads without ours).
  while (writer.tid.load(std::memory_order_acquire) == 0) sched_yield();
  writer.pid = getpid();
  writer.running.store(true);
}

void stop_writer_thread() {
  if (writer.pid != getpid() || !writer.running.exchange(false)) return;
  writer.stopping.store(true, std::memory_order_release);
  writer.wake.fetch_add(1, std::memory_order_release);
  futex_wake(writer.wake);
  pthread_join(writer.thread, nullptr);
  writer.pid = 0;
  writer.tid.store(0);
}

}  // namespace pinsight::emitter::blocks
