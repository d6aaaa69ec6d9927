// The batched payload's per-thread block: compact frame and native-call
// records packed (format/wire.h) into a buffer of the thread's own, written
// as one event_block event when full, when its first record is 100 ms old, or
// at a flush. One LTTng event per block instead of per call: LTTng's
// reserve/commit and context are most of a per-event trace's price.
//
// Ownership: a block is written by its thread, under the GIL (callbacks hold
// it). Other threads flush it only while holding the GIL (flush_all,
// flush_idle), or at fork in the forking thread, so no lock is taken on the
// hot path. A fatal signal's handler flushes the faulting thread's block
// unless it interrupted a record being written.
#pragma once

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "format/wire.h"

namespace pinsight::emitter::blocks {

constexpr size_t kBlockBytes = 4096;
constexpr size_t kMaxRecordBytes = 1 + 10 + 10 + 5 + 10;
// A block whose first record is older is flushed with the next record.
constexpr uint64_t kMaxBlockAgeNs = 100000000;
// A thread whose last block is older is flushed by the control thread (it
// is blocked, or runs no traced code): readers then know it has nothing older.
constexpr uint64_t kIdleFlushNs = 200000000;

struct Block {
  uint8_t bytes[kBlockBytes + kMaxRecordBytes];
  uint32_t used = 0;
  uint32_t count = 0;
  uint64_t sequence = 0;  // this thread's records before the block's first
  uint64_t base_clock = 0;
  uint64_t last_clock = 0;
  uint64_t last_code = 0;
  uint64_t last_callable = 0;
  int python_thread_id = -1;
  int tid = 0;
  volatile sig_atomic_t writing = 0;    // a record is half-written (signal handlers)
  bool opened = false;                  // the empty opening block went out
  std::atomic<uint64_t> last_flush{0};  // clock of the last event_block (control thread)
  Block *prev = nullptr;                // the registry of live blocks
  Block *next = nullptr;
};

// The clock LTTng-UST timestamps events with (no clock plugin: session.cpp
// refuses batched under LTTNG_UST_CLOCK_PLUGIN).
inline uint64_t clock_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

extern thread_local Block *current_block __attribute__((tls_model("initial-exec")));
Block *create_current(int python_thread_id);  // slow path
// Writes the block's records (or, empty, a block that says the thread is alive)
// and starts a new one.
void flush(Block &block, bool final);

inline uint8_t *put_varint(uint8_t *p, uint64_t value) {
  while (value >= 0x80) {
    *p++ = static_cast<uint8_t>(value) | 0x80;
    value >>= 7;
  }
  *p++ = static_cast<uint8_t>(value);
  return p;
}

inline uint64_t zigzag(uint64_t delta) {
  auto d = static_cast<int64_t>(delta);
  return (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
}

// One record of the calling thread (kind: PINSIGHT_RECORD_*).
inline void append(int kind, int transition, uint64_t code_id, uint64_t callable_id, int line,
                   int python_thread_id) {
  Block *b = current_block;
  if (__builtin_expect(b == nullptr || !b->opened, 0)) b = create_current(python_thread_id);
  uint64_t now = clock_ns();
  if (b->count != 0 && now - b->base_clock > kMaxBlockAgeNs) flush(*b, false);
  if (b->count == 0) {
    b->base_clock = b->last_clock = now;
    b->last_code = b->last_callable = 0;
  }
  b->writing = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  uint8_t *p = b->bytes + b->used;
  *p++ = static_cast<uint8_t>((kind << 3) | transition);
  p = put_varint(p, zigzag(code_id - b->last_code));
  b->last_code = code_id;
  if (kind >= PINSIGHT_RECORD_C_CALL_BEGIN) {
    p = put_varint(p, zigzag(callable_id - b->last_callable));
    b->last_callable = callable_id;
    p = put_varint(p, static_cast<uint32_t>(line));
  }
  p = put_varint(p, now - b->last_clock);
  b->last_clock = now;
  b->used = static_cast<uint32_t>(p - b->bytes);
  ++b->count;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  b->writing = 0;
  if (b->used >= kBlockBytes) flush(*b, false);
}

// Once, when the batched payload is first chosen: the fatal-signal handlers and
// the flush at process exit.
void enable();
// Every live thread's block (GIL held, or at process exit). final: no record
// follows for now (process exit, deactivate, a mode without records): readers
// then wait for none; a later record opens the thread's stream again.
void flush_all(bool final);
// The calling thread's block (before fork).
void flush_current();
// Whether some thread's last block is older than kIdleFlushNs (no GIL needed),
// and the flush of those (GIL held: their threads are not writing).
bool any_idle();
void flush_idle();
// Whether the control thread looks for idle blocks: tracing, batched.
void set_idle_flush(bool wanted);
bool idle_flush_wanted();
// In a forked child: only the forking thread lives; its block (flushed before
// the fork) opens anew under the child's ids.
void forked_child();

}  // namespace pinsight::emitter::blocks
