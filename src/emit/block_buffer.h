// The batched payload's per-thread block: compact frame and native-call
// records staged at fixed size in segments, timed per segment (emit/cycle_clock.h),
// packed (format/wire.h) into a buffer of the thread's own, and written as one
// event_block event when full, when its first record is 100 ms old, or at a
// flush. One LTTng event per block instead of per call: LTTng's
// reserve/commit and context are most of a per-event trace's price.
//
// Who does what: a traced thread only stages its records; a closed segment goes
// to the writer thread over a single-producer ring, and the writer encodes it
// and writes the blocks (so the traced thread's cost per record is staging
// alone, trace0's design). With no writer (none started, or a forked child
// before Python's after-fork hook) or when a thread's segments are all waiting,
// the thread encodes its own: never a lost record, never a wait on the writer.
//
// Ownership: a thread's staging side is its own, under the GIL (callbacks hold
// it); other threads flush it only while holding the GIL (flush_all,
// flush_idle), or at fork in the forking thread, so no lock is taken on the hot
// path. Its encoding side (the encoded bytes, the LTTng write) belongs to the
// holder of the block's encoder lock. A fatal signal's handler flushes the
// faulting thread's block unless it interrupted a record being staged or encoded.
#pragma once

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "emit/cycle_clock.h"
#include "format/wire.h"

namespace pinsight::emitter::blocks {

// A block is written once its records take this many bytes (one record more
// at most): its event then fits the smallest sub-buffer LTTng takes, a 4 KiB
// page, with the packet's header and context, the event's header, fields and
// vpid/vtid contexts (about 160 bytes), and room for a few contexts more. An
// event larger than a sub-buffer is discarded whatever the channel's size.
constexpr size_t kBlockBytes = 3584;
constexpr size_t kMaxRecordBytes = 1 + 10 + 10 + 5 + 10;
// A block whose first record is older is flushed with the next record.
constexpr uint64_t kMaxBlockAgeNs = 100000000;
// A thread whose last block is older is flushed by the control thread (it
// is blocked, or runs no traced code): readers then know it has nothing older.
constexpr uint64_t kIdleFlushNs = 200000000;

// A record as staged: fixed size, the counter's ticks for its time. Two to a
// cache line, written whole.
struct alignas(32) Staged {
  uint64_t ticks;
  uint64_t code_id;
  uint64_t callable_id;
  uint64_t line_head;  // the line (low 32 bits) | the head << 32: (kind << 3) | transition
};

// Records are staged in segments of at most this many (block_buffer.cpp): a
// segment's close (its anchor, the hand-off to the writer) costs the traced
// thread about 350 counter ticks, 2.8 per record at 128 (the suite with function
// events), 1.0 at 512.
constexpr uint32_t kSegmentRecords = 512;

// What staging one record reads and writes of its thread's block, together in
// one cache line: the rest of the block is the slow paths' and the encoder's.
struct alignas(64) StageCursor {
  Staged *filling = nullptr;  // the open segment's records
  uint32_t staged_count = 0;
  volatile sig_atomic_t writing = 0;  // a record or segment is half-done (signal handlers)
  // A record past this closes the segment; 0 while the stream is not open, so
  // that one compare on the hot path sends both to stage_slow.
  uint64_t segment_end_ticks = 0;
  bool opened = false;     // the empty opening block went out
  bool streaming = false;  // a writer runs: records are staged write-combined
};

// The calling thread's cursor; null before its first record.
extern __thread StageCursor *current_cursor __attribute__((tls_model("initial-exec")));

// Slow path of stage(): the thread's stream opened, or its segment closed (full,
// or older than its time span); `ticks` read again after the new anchor.
__attribute__((cold)) StageCursor *stage_slow(int python_thread_id, uint64_t *ticks);

// A staged word, while a writer thread reads the thread's segments
// (StageCursor::streaming): on x86-64 a non-temporal store. The writer reads each
// segment on its core and hands it back; an ordinary store into a line the
// other core holds would wait for that copy to be invalidated (n-body with
// function events: 15% of the traced thread's added CPU). Without a writer the
// thread encodes its segments itself, from its cache: ordinary stores (the
// non-temporal ones made that 1.65x slower). Write-combined, a record's words
// reach memory before the segment is handed over (the sfence in close_segment),
// before another thread that takes the GIL reads them (the GIL's release is a
// locked instruction, which drains write-combining buffers), and in order for
// this thread's own reads (a flush, a signal handler).
inline void stream(uint64_t *to, uint64_t value) {
#if defined(__x86_64__)
  _mm_stream_si64(reinterpret_cast<long long *>(to), static_cast<long long>(value));
#else
  *to = value;
#endif
}

// The calling thread's next record staged: its time taken first (the counter's
// read is the slowest step; nothing before it waits on it), a full or old
// segment closed, its words written while the block is marked as being written
// (a fatal signal's flush then leaves it alone). Inline: the callbacks' hot path.
__attribute__((always_inline)) inline void stage_at(uint64_t ticks, int python_thread_id,
                                                    uint64_t code_id, uint64_t callable_id,
                                                    uint64_t line_head) {
  StageCursor *c = current_cursor;
  if (__builtin_expect(
          c == nullptr || c->staged_count == kSegmentRecords || ticks > c->segment_end_ticks, 0)) {
    c = stage_slow(python_thread_id, &ticks);
  }
  c->writing = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  Staged &r = c->filling[c->staged_count];
  if (__builtin_expect(c->streaming, 1)) {
    stream(&r.ticks, ticks);
    stream(&r.code_id, code_id);
    stream(&r.callable_id, callable_id);
    stream(&r.line_head, line_head);
  } else {
    r.ticks = ticks;
    r.code_id = code_id;
    r.callable_id = callable_id;
    r.line_head = line_head;
  }
  ++c->staged_count;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  c->writing = 0;
}

__attribute__((always_inline)) inline void stage(int python_thread_id, uint64_t code_id,
                                                 uint64_t callable_id, uint64_t line_head) {
  stage_at(cycle_clock::ticks(), python_thread_id, code_id, callable_id, line_head);
}

inline uint64_t line_head(int line, int kind, int transition) {
  return static_cast<uint32_t>(line) | static_cast<uint64_t>((kind << 3) | transition) << 32;
}

// One record of the calling thread (kind: PINSIGHT_RECORD_*) at `ticks`
// (cycle_clock::ticks(), read by the caller). Out of line: the full and compact
// payloads' inline paths stay as small as they were. A generator's end passes
// its lifetime_ns as callable_id, its segments as line and its `how` as
// transition.
void append_at(uint64_t ticks, int kind, int transition, uint64_t code_id, uint64_t callable_id,
               int line, int python_thread_id);
inline void append(int kind, int transition, uint64_t code_id, uint64_t callable_id, int line,
                   int python_thread_id) {
  append_at(cycle_clock::ticks(), kind, transition, code_id, callable_id, line, python_thread_id);
}
// A function record (PINSIGHT_RECORD_FUNCTION_*) at `ticks`: append's path for
// the records that name no callable, the most frequent; inline. Written whole
// (write-combined stores fill a line); encode_records() reads neither the
// callable nor the line of a function record.
inline void append_function_at(uint64_t ticks, int kind, int transition, uint64_t code_id,
                               int python_thread_id) {
  stage_at(ticks, python_thread_id, code_id, 0, line_head(0, kind, transition));
}

// A native callee's interned name, as it is first named (slow path): os._exit's
// is remembered, and a call of it flushes every thread's block first (it ends
// the process without exit handlers; multiprocessing's forked children end so).
void note_callable(const char *name);

// Once, when the batched payload is first chosen: the fatal-signal handlers and
// the flush at process exit.
void enable();
// The writer thread, while the payload is batched (idempotent; in a forked
// child, a new one). Stopped, every thread encodes its own records.
// activate()'s choice (PINSIGHT_PYTHON_BLOCK_WRITER): start_writer() starts none
// when false.
extern bool writer_allowed;
void start_writer();
void stop_writer();
// Its tid while it runs in this process, else 0.
int writer_tid();
// Every live thread's block (GIL held, or at process exit). final: no record
// follows for now (process exit, deactivate, a mode without records): readers
// then wait for none; a later record opens the thread's stream again.
void flush_all(bool final);
// The calling thread's block (before fork).
void flush_current();
// A flight recorder's dump, without the GIL: every thread's closed segments and
// encoded records written now (as partial blocks); what a thread is staging in
// its open segment stays there (a flush under the GIL writes it). A block
// whose encoder stays held for 10 ms is left as it is.
void flush_encoded();
// A flight recorder's dump (activation/flight_recorder.cpp): from this process's
// part of it until the snapshot is recorded (resume_blocks) or `max_ns` has
// passed, blocks are dropped, not written: in the overwriting ring they would
// push out what the dump just wrote (its open stacks first) before the snapshot
// copies it. Readers see the dropped records as missing, as LTTng's own drops.
void hold_blocks(uint64_t max_ns);
void resume_blocks();
// From a fatal signal's handler (async-signal-safe): the calling thread's
// records, unless the signal interrupted one being staged or encoded. With
// `others` (the thread holds the GIL: no other thread stages now), every other
// thread's too, each whose locks are free within 10 ms.
void flush_from_signal(bool others);
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
