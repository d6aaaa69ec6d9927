#include "emit/block_buffer.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/signal_chain.h"
#include "emit/block_state.h"
#include "emit/block_writer.h"
#include "emit/cycle_clock.h"
#include "emit/write_guard.h"
#include "python_pinsight_lttng_ust.h"

namespace pinsight::emitter::blocks {

__thread int own_tid __attribute__((tls_model("initial-exec"))) = 0;
// Guards the registry (creation, thread exit, flushes by other threads, the
// writer's passes); never taken on the hot path. Placement-new'ed again in a
// forked child, where another thread may have held it. Taken before any
// block's encoder, never after.
std::mutex *registry_mutex = new std::mutex();
Block *registry = nullptr;

namespace {

// The staged words written so far are visible to another thread's loads after
// a release store that follows this.
inline void publish_staged() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// Records are staged in segments: a segment is timed by interpolation between
// the anchor before its first record and one after its last. Short
// (kSegmentRecords, or kSegmentNs of counter time) so that the interpolation's
// rate is the clock's own rate at the time.
constexpr uint64_t kSegmentNs = 1000000;

// The clock LTTng-UST timestamps events with (no clock plugin: activation
// refuses batched when Python found LTTNG_UST_CLOCK_PLUGIN set).
inline uint64_t clock_ns() { return cycle_clock::monotonic_ns(); }

// Segment thresholds in counter ticks (cycle_clock::calibrate()).
uint64_t segment_ticks = kSegmentNs;

inline Block *current_block() { return static_cast<Block *>(current_cursor); }

std::atomic<bool> idle_flush{false};
// The interned name of os._exit (posix._exit), once a call of it was named.
std::atomic<const char *> exit_callable{nullptr};

void link(Block *b) {
  b->prev = nullptr;
  b->next = registry;
  if (registry) registry->prev = b;
  registry = b;
}

void unlink(Block *b) {
  if (b->prev) b->prev->next = b->next;
  if (b->next) b->next->prev = b->prev;
  if (registry == b) registry = b->next;
  b->prev = b->next = nullptr;
}

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// ---------------------------------------------------------------------------
// The encoder lock (block_state.h), as the owner's side and a fatal signal's
// handler take it.

void lock_encoder(Block &b) {
  int tid = my_tid();
  for (unsigned spins = 0; !try_lock_encoder(b, tid); ++spins) {
    if (spins < 1000) {
      cpu_relax();
    } else {
      sched_yield();  // the writer was preempted while it held it
    }
  }
}

// Async-signal-safe; false if this thread holds it (the signal interrupted an
// encoding) or its holder does not let go within 10 ms.
bool lock_encoder_from_signal(Block &b) {
  int tid = static_cast<int>(syscall(SYS_gettid));
  if (b.encoder.load(std::memory_order_relaxed) == tid) return false;
  uint64_t deadline = clock_ns() + 10000000;
  while (!try_lock_encoder(b, tid)) {
    if (clock_ns() > deadline) return false;
    cpu_relax();
  }
  return true;
}

// The thread's stream ends (a final flush, a forked child): its next record
// opens it again. segment_end_ticks 0 sends that record to stage_slow, the
// hot path's one test (StageCursor).
inline void close_stream(Block &b) {
  b.opened = false;
  b.segment_end_ticks = 0;
}

// ---------------------------------------------------------------------------
// Encoding (encoder lock held).

uint8_t *put_varint(uint8_t *p, uint64_t value) {
  while (value >= 0x80) {
    *p++ = static_cast<uint8_t>(value) | 0x80;
    value >>= 7;
  }
  *p++ = static_cast<uint8_t>(value);
  return p;
}

uint64_t zigzag(uint64_t delta) {
  auto d = static_cast<int64_t>(delta);
  return (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
}

// A dump's hold (hold_blocks): until when, 0 when none.
std::atomic<uint64_t> hold_until_ns{0};

// The encoded records as one event_block. PINSIGHT_BLOCK_PARTIAL when records
// of the thread staged before this moment may still be on their way (in the
// open segment, or closed and not yet encoded): readers then take the
// thread's stream as complete up to the block's last record, not up to the
// block's own time.
void emit(Block &b, int flags) {
  const uint64_t hold = hold_until_ns.load(std::memory_order_relaxed);
  // Held: dropped; the sequence numbers still advance, so readers count them missing.
  if (__builtin_expect(hold == 0, 1) || clock_ns() >= hold) {
    PINSIGHT_TRACEPOINT(event_block, b.python_thread_id, b.tid, b.sequence, b.count, b.base_clock,
                        flags, b.bytes, static_cast<uint16_t>(b.used));
  }
  b.sequence += b.count;
  b.count = 0;
  b.used = 0;
  b.last_flush.store(clock_ns(), std::memory_order_relaxed);
}

// `n` staged records, timed between the anchors `start` and `end` (their
// counter ticks lie between the two), into the block's bytes. Timestamps stay
// in order per thread: the map is monotonic, and clamped to the last one
// written. A block is written when full (so an event_block holds at most
// kBlockBytes + kMaxRecordBytes, whatever the segment's length), or at the end
// of a segment when its first record is old (kMaxBlockAgeNs). `last`: no record
// of the thread is staged beyond these, so a block that ends them is complete.
//
// Each record: its head, the zigzag delta of its code id, for a native call the
// zigzag delta of its callable id and its line, then its time's delta (ns, from
// the block's previous record; the first record's time is the block's
// base_clock). The block's running state lives in locals through the loop: the
// bytes written through `p` could alias any field of the Block, which would
// otherwise be stored and loaded again around every byte.
void encode_records(Block &b, const Staged *staged, uint32_t n, cycle_clock::Anchor start,
                    cycle_clock::Anchor end, bool last) {
  if (n == 0) return;
  // ns per tick in 32.32 fixed point: this segment's own rate.
  uint64_t span_ticks = end.ticks > start.ticks ? end.ticks - start.ticks : 0;
  uint64_t span_ns = end.ns > start.ns ? end.ns - start.ns : 0;
  uint64_t rate =
      span_ticks == 0
          ? 0
          : static_cast<uint64_t>((static_cast<unsigned __int128>(span_ns) << 32) / span_ticks);
  uint32_t count = b.count;
  uint64_t last_clock = b.last_clock;
  uint64_t last_code = b.last_code;
  uint64_t last_callable = b.last_callable;
  uint64_t floor_ns = count != 0 && last_clock > start.ns ? last_clock : start.ns;
  uint8_t *p = b.bytes + b.used;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t ticks = staged[i].ticks;
    const uint64_t code_id = staged[i].code_id;
    const uint8_t head = static_cast<uint8_t>(staged[i].line_head >> 32);
    uint64_t into = ticks > start.ticks ? ticks - start.ticks : 0;
    uint64_t now =
        start.ns + static_cast<uint64_t>((static_cast<unsigned __int128>(into) * rate) >> 32);
    if (now > end.ns) now = end.ns;
    if (now < floor_ns) now = floor_ns;
    floor_ns = now;
    if (count == 0) {
      // The block's first record (here, or after a full block below): its time
      // is the base, its ids' deltas from 0.
      b.base_clock = last_clock = now;
      last_code = last_callable = 0;
    }
    *p++ = head;
    p = put_varint(p, zigzag(code_id - last_code));
    last_code = code_id;
    const int kind = head >> 3;
    if (kind == PINSIGHT_RECORD_C_CALL_BEGIN || kind == PINSIGHT_RECORD_C_CALL_END) {
      const uint64_t callable_id = staged[i].callable_id;
      p = put_varint(p, zigzag(callable_id - last_callable));
      last_callable = callable_id;
      p = put_varint(p, static_cast<uint32_t>(staged[i].line_head));
    } else if (kind == PINSIGHT_RECORD_GENERATOR_END) {
      p = put_varint(p, staged[i].callable_id);                       // lifetime_ns
      p = put_varint(p, static_cast<uint32_t>(staged[i].line_head));  // segments
    }
    p = put_varint(p, now - last_clock);
    last_clock = now;
    ++count;
    if (__builtin_expect(p - b.bytes >= static_cast<ptrdiff_t>(kBlockBytes), 0) && i + 1 < n) {
      // Full with records of the segment still to come: out now, and the rest
      // starts a block of its own.
      b.used = static_cast<uint32_t>(p - b.bytes);
      b.count = count;
      emit(b, PINSIGHT_BLOCK_PARTIAL);
      p = b.bytes;
      count = 0;
    }
  }
  b.used = static_cast<uint32_t>(p - b.bytes);
  b.count = count;
  b.last_clock = last_clock;
  b.last_code = last_code;
  b.last_callable = last_callable;
  // Full, or its first record is old.
  if (b.used >= kBlockBytes || end.ns - b.base_clock > kMaxBlockAgeNs) {
    emit(b, last ? 0 : PINSIGHT_BLOCK_PARTIAL);
  }
}

}  // namespace

void drain(Block &b) {
  while (Segment *s = b.closed.take()) {
    encode_records(b, s->records, s->count, s->start, s->end, false);
    b.returned.put(s);
  }
}

namespace {

// ---------------------------------------------------------------------------
// The owner's side.

// A free segment for the thread to fill: one the encoder gave back, or a new
// one while the thread has fewer than kMaxSegments; else none.
Segment *free_segment(Block &b) {
  if (Segment *s = b.returned.take()) return s;
  if (b.segments >= kMaxSegments) return nullptr;
  Segment *s = new (std::nothrow) Segment();
  if (s) ++b.segments;
  return s;
}

// Everything the thread staged, written now as its latest block (`flags`:
// PINSIGHT_BLOCK_FINAL or 0); with `only_if_any`, nothing if it staged nothing
// since its last block. The owner's side, with the encoder lock held.
void flush_locked(Block &b, int flags, bool only_if_any) {
  drain(b);
  if (b.staged_count != 0) {
    b.writing = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    cycle_clock::Anchor end = cycle_clock::anchor();
    encode_records(b, b.filling, b.staged_count, b.anchor, end, true);
    b.staged_count = 0;
    b.anchor = end;
    b.segment_end_ticks = end.ticks + segment_ticks;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    b.writing = 0;
  }
  if (only_if_any && b.count == 0) return;
  emit(b, flags);
}

void flush_block(Block &b, int flags, bool only_if_any) {
  lock_encoder(b);
  flush_locked(b, flags, only_if_any);
  unlock_encoder(b);
}

// The open segment is full, or old: closed and handed to the writer, or, with
// no writer or no free segment, encoded here with those still waiting. The
// next segment opens at the anchor taken now.
__attribute__((noinline)) void close_segment(Block &b) {
  b.writing = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  cycle_clock::Anchor end = cycle_clock::anchor();
  if (b.staged_count != 0) {
    Segment *next = writer.running.load(std::memory_order_relaxed) ? free_segment(b) : nullptr;
    if (next) {
      Segment *s = b.open;
      publish_staged();
      s->count = b.staged_count;
      s->start = b.anchor;
      s->end = end;
      b.closed.put(s);
      b.open = next;
      b.filling = next->records;
      if (b.closed.size() >= kMaxSegments / 2) nudge_writer();
    } else {
      lock_encoder(b);
      drain(b);
      encode_records(b, b.filling, b.staged_count, b.anchor, end, true);
      unlock_encoder(b);
    }
    b.staged_count = 0;
  }
  b.anchor = end;
  b.segment_end_ticks = end.ticks + segment_ticks;
  b.streaming = writer.running.load(std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  b.writing = 0;
}

void free_segments(Block *b) {
  while (Segment *s = b->closed.take()) delete s;
  while (Segment *s = b->returned.take()) delete s;
  delete b->open;
}

// Owns the thread's block; its destructor runs when the OS thread exits (before
// LTTng-UST's own thread-exit work, so the tracepoint still works).
struct Owner {
  Block *block = nullptr;
  ~Owner() {
    if (!block) return;
    {
      // The writer is between passes: it cannot hold the block's encoder.
      std::lock_guard<std::mutex> lock(*registry_mutex);
      unlink(block);
    }
    current_cursor = nullptr;
    // Unlinked: no other thread flushes it now.
    if (block->opened) flush_block(*block, PINSIGHT_BLOCK_FINAL, false);
    free_segments(block);
    delete block;
  }
};
thread_local Owner owner;

// The fatal signals whose default action ends the process: the faulting
// thread's records go out first.
constexpr int kFatalSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM};
struct sigaction previous_actions[sizeof kFatalSignals / sizeof kFatalSignals[0]];

void on_fatal_signal(int signo, siginfo_t *info, void *context) {
  flush_from_signal(false);
  for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
    if (kFatalSignals[i] != signo) continue;
    chain_signal(signo, previous_actions[i], info, context);
    return;
  }
}

void install_signal_handlers() {
  for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
    chain_in(kFatalSignals[i], on_fatal_signal, &previous_actions[i]);
  }
}

void flush_at_exit() {
  // Joined first: nothing writes blocks while LTTng-UST goes away.
  stop_writer_thread();
  flush_all(true);
}

// Slow path: the thread's first record, or its first since its stream closed.
__attribute__((noinline)) Block *create_current(int python_thread_id) {
  Block *b = current_block();
  if (!b) {
    b = new Block();
    b->open = new Segment();
    b->segments = 1;
    b->filling = b->open->records;
    b->tid = my_tid();
    b->python_thread_id = python_thread_id;
    {
      std::lock_guard<std::mutex> lock(*registry_mutex);
      link(b);
    }
    owner.block = b;
    current_cursor = b;
  }
  // The empty opening block: readers hold this thread's other events from here
  // on until its blocks say what happened meanwhile.
  b->opened = true;
  flush_block(*b, 0, false);
  b->anchor = cycle_clock::anchor();
  b->segment_end_ticks = b->anchor.ticks + segment_ticks;
  b->streaming = writer.running.load(std::memory_order_relaxed);
  return b;
}

}  // namespace

__thread StageCursor *current_cursor __attribute__((tls_model("initial-exec"))) = nullptr;

StageCursor *stage_slow(int python_thread_id, uint64_t *ticks) {
  Block *b = current_block();
  if (b == nullptr || !b->opened) {
    b = create_current(python_thread_id);
    *ticks = cycle_clock::ticks();  // after the stream's anchor
  }
  if (b->staged_count == kSegmentRecords || *ticks > b->segment_end_ticks) {
    close_segment(*b);
    *ticks = cycle_clock::ticks();  // after the new anchor
  }
  return b;
}

void append_at(uint64_t ticks, int kind, int transition, uint64_t code_id, uint64_t callable_id,
               int line, int python_thread_id) {
  stage_at(ticks, python_thread_id, code_id, callable_id, line_head(line, kind, transition));
  if (kind == PINSIGHT_RECORD_C_CALL_BEGIN &&
      callable_id == reinterpret_cast<uintptr_t>(exit_callable.load(std::memory_order_relaxed))) {
    // The process ends inside this call, without exit handlers: the last blocks
    // of every thread go out now.
    flush_all(true);
  }
}

void note_callable(const char *name) {
  if (std::strcmp(name, "posix._exit") == 0) exit_callable.store(name, std::memory_order_relaxed);
}

void enable() {
  static std::once_flag once;
  std::call_once(once, [] {
    cycle_clock::calibrate();
    segment_ticks = cycle_clock::ticks_for_ns(kSegmentNs);
    install_signal_handlers();
    std::atexit(flush_at_exit);
  });
}

bool writer_allowed = true;

void start_writer() {
  if (writer_allowed) start_writer_thread();
}
void stop_writer() { stop_writer_thread(); }
int writer_tid() { return writer.running.load() && writer.pid == getpid() ? writer.tid.load() : 0; }

void flush_all(bool final) {
  // Held, the writer is between passes and no thread of the GIL's encodes:
  // every encoder lock is free, or taken back at once.
  std::lock_guard<std::mutex> lock(*registry_mutex);
  for (Block *b = registry; b; b = b->next) {
    if (b->opened) flush_block(*b, final ? PINSIGHT_BLOCK_FINAL : 0, !final);
    // A thread's next record, if any, opens its stream again.
    if (final) close_stream(*b);
  }
}

void flush_current() {
  Block *b = current_block();
  if (b && b->opened) flush_block(*b, 0, true);
}

void hold_blocks(uint64_t max_ns) {
  hold_until_ns.store(clock_ns() + max_ns, std::memory_order_relaxed);
}

void resume_blocks() { hold_until_ns.store(0, std::memory_order_relaxed); }

void flush_encoded() {
  std::lock_guard<std::mutex> lock(*registry_mutex);
  for (Block *b = registry; b; b = b->next) {
    // The encoder's side only: the writer thread does the same without the GIL.
    if (!b->opened || !lock_encoder_from_signal(*b)) continue;
    drain(*b);
    if (b->count != 0) emit(*b, PINSIGHT_BLOCK_PARTIAL);
    unlock_encoder(*b);
  }
}

void flush_from_signal(bool others) {
  Block *own = current_block();
  // A record or segment half-written is the one thing that cannot go out; the
  // thread's records are then lost if the signal ends the process.
  if (own && own->opened && !own->writing && lock_encoder_from_signal(*own)) {
    flush_locked(*own, 0, true);
    unlock_encoder(*own);
  }
  if (!others) return;
  // The registry's mutex, tried for as long as an encoder lock is: the writer
  // holds it for a pass; this thread may hold it (the signal came in a flush).
  const uint64_t deadline = clock_ns() + 10000000;
  while (!registry_mutex->try_lock()) {
    if (clock_ns() > deadline) return;
    cpu_relax();
  }
  for (Block *b = registry; b; b = b->next) {
    if (b == own || !b->opened || b->writing || !lock_encoder_from_signal(*b)) continue;
    flush_locked(*b, 0, true);
    unlock_encoder(*b);
  }
  registry_mutex->unlock();
}

bool any_idle() {
  uint64_t now = clock_ns();
  std::lock_guard<std::mutex> lock(*registry_mutex);
  for (Block *b = registry; b; b = b->next) {
    if (now - b->last_flush.load(std::memory_order_relaxed) > kIdleFlushNs) return true;
  }
  return false;
}

void flush_idle() {
  uint64_t now = clock_ns();
  std::lock_guard<std::mutex> lock(*registry_mutex);
  for (Block *b = registry; b; b = b->next) {
    if (b->opened && now - b->last_flush.load(std::memory_order_relaxed) > kIdleFlushNs) {
      flush_block(*b, 0, false);
    }
  }
}

void set_idle_flush(bool wanted) { idle_flush.store(wanted, std::memory_order_relaxed); }
bool idle_flush_wanted() { return idle_flush.load(std::memory_order_relaxed); }

void forked_child() {
  // The parent's other threads, its writer among them, do not exist here: their
  // blocks (their records are the parent's, flushed or not by the parent) are
  // forgotten, not freed (their memory may be half-updated).
  registry_mutex = new (registry_mutex) std::mutex();
  registry = nullptr;
  writer.running.store(false);
  writer.pid = 0;
  writer.tid.store(0);
  own_tid = 0;
  Block *b = current_block();
  if (!b) return;
  // Flushed before the fork (flush_current): anything still closed is the
  // parent's.
  b->encoder.store(0);
  while (Segment *s = b->closed.take()) b->returned.put(s);
  b->count = 0;
  b->staged_count = 0;
  b->used = 0;
  b->sequence = 0;
  b->tid = my_tid();
  close_stream(*b);  // the next record opens the child's stream
  link(b);
}

}  // namespace pinsight::emitter::blocks
