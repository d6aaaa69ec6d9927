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

// One record of the calling thread (kind: PINSIGHT_RECORD_*). Out of line: the
// full and compact payloads' inline paths stay as small as they were. A
// generator's end passes its lifetime_ns as callable_id, its segments as line
// and its `how` as transition.
void append(int kind, int transition, uint64_t code_id, uint64_t callable_id, int line,
            int python_thread_id);
// A function record (PINSIGHT_RECORD_FUNCTION_*): append's path for the
// records that name no callable, the most frequent.
void append_function(int kind, int transition, uint64_t code_id, int python_thread_id);

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
