// A thread's block and the registry of live blocks: what the owner's side and
// the encoder of emit/block_buffer.cpp and the writer thread of
// emit/block_writer.cpp share. Private to emit: block_buffer.h is the
// interface of the batched payload.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "emit/block_buffer.h"
#include "emit/cycle_clock.h"

namespace pinsight::emitter::blocks {

// A segment of staged records, timed by interpolation between the anchor taken
// before its first record and the one after its last (block_buffer.cpp).
struct Segment {
  alignas(64) Staged records[kSegmentRecords];
  uint32_t count = 0;
  cycle_clock::Anchor start;
  cycle_clock::Anchor end;
};

// The most segments one thread has: the one it fills, and closed ones the
// writer has not encoded yet. A thread that stages slowly keeps two or three;
// one that outruns the writer encodes its own (close_segment). A power of two;
// 256 KiB in all.
constexpr uint32_t kMaxSegments = 16;

// A single-producer single-consumer ring of segments. It holds every segment
// of its thread at most, so put() always finds room.
struct SegmentRing {
  Segment *slots[kMaxSegments] = {};
  std::atomic<uint32_t> head{0};  // the producer's: segments put
  std::atomic<uint32_t> tail{0};  // the consumer's: segments taken

  void put(Segment *s) {
    uint32_t h = head.load(std::memory_order_relaxed);
    slots[h % kMaxSegments] = s;
    head.store(h + 1, std::memory_order_release);
  }
  Segment *take() {
    uint32_t t = tail.load(std::memory_order_relaxed);
    if (t == head.load(std::memory_order_acquire)) return nullptr;
    Segment *s = slots[t % kMaxSegments];
    tail.store(t + 1, std::memory_order_release);
    return s;
  }
  uint32_t size() const {
    return head.load(std::memory_order_acquire) - tail.load(std::memory_order_acquire);
  }
};

// A thread's records: staged by the thread ("the owner's side": the thread, or
// another thread holding the GIL while it does not run), encoded into `bytes`
// and written as event_blocks by whoever holds `encoder`: the writer thread
// (closed segments, in the background), or the owner's side (a flush, or a
// thread whose segments are all waiting).
struct Block : StageCursor {
  // The owner's side, besides the cursor.
  Segment *open = nullptr;
  cycle_clock::Anchor anchor;  // taken before the open segment's records
  uint32_t segments = 0;       // allocated
  SegmentRing closed;          // to the encoder, in order
  SegmentRing returned;        // back from the encoder, free

  // The encoder's side, under `encoder` (0: free; else its holder's tid).
  std::atomic<int> encoder{0};
  // A block is written as soon as it holds kBlockBytes: one record more at most.
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
  std::atomic<uint64_t> last_flush{0};  // clock of the last event_block (control thread)
  Block *prev = nullptr;                // the registry of live blocks
  Block *next = nullptr;
};

// The calling thread's tid, read once.
extern __thread int own_tid __attribute__((tls_model("initial-exec")));

inline int my_tid() {
  if (own_tid == 0) own_tid = static_cast<int>(syscall(SYS_gettid));
  return own_tid;
}

// Guards the registry (creation, thread exit, flushes by other threads, the
// writer's passes); never taken on the hot path. Taken before any block's
// encoder, never after.
extern std::mutex *registry_mutex;
extern Block *registry;  // the live blocks, linked through prev and next

// The encoder lock. Its holders: the writer (try only: a thread it would wait
// for encodes its own), the owner's side (waits: the writer holds it for one
// block's closed segments), a fatal signal's handler (waits a bounded time,
// never for its own thread).
inline bool try_lock_encoder(Block &b, int tid) {
  int free = 0;
  return b.encoder.compare_exchange_strong(free, tid, std::memory_order_acquire,
                                           std::memory_order_relaxed);
}

inline void unlock_encoder(Block &b) { b.encoder.store(0, std::memory_order_release); }

// The closed segments, in order, back to the owner once encoded (encoder lock
// held; block_buffer.cpp).
void drain(Block &b);

}  // namespace pinsight::emitter::blocks
