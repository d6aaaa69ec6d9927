#include "emit/block_buffer.h"

#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "emit/cycle_clock.h"
#include "emit/write_guard.h"
#include "python_pinsight_lttng_ust.h"

namespace pinsight::emitter::blocks {

namespace {

// A record as append() stages it: fixed size, the counter's ticks for its time.
struct Staged {
  uint64_t ticks;
  uint64_t code_id;
  uint64_t callable_id;
  int32_t line;
  uint8_t head;  // (kind << 3) | transition
};

// Records staged before they are encoded into the block: a segment, timed by
// interpolation between the anchor before its first record and one after its
// last. Short (kSegmentRecords, or kSegmentNs of counter time) so that the
// interpolation's rate is the clock's own rate at the time.
constexpr uint32_t kSegmentRecords = 128;
constexpr uint64_t kSegmentNs = 1000000;

struct Block {
  Staged staged[kSegmentRecords];
  uint32_t staged_count = 0;
  uint64_t segment_end_ticks = 0;  // a record past this starts a new segment
  cycle_clock::Anchor anchor;      // taken before the staged records
  // A segment is encoded whole into a block that is not yet full.
  uint8_t bytes[kBlockBytes + kSegmentRecords * kMaxRecordBytes];
  uint32_t used = 0;
  uint32_t count = 0;
  uint64_t sequence = 0;  // this thread's records before the block's first
  uint64_t base_clock = 0;
  uint64_t last_clock = 0;
  uint64_t last_code = 0;
  uint64_t last_callable = 0;
  int python_thread_id = -1;
  int tid = 0;
  volatile sig_atomic_t writing = 0;    // a record is half-staged or half-encoded (signal handlers)
  bool opened = false;                  // the empty opening block went out
  std::atomic<uint64_t> last_flush{0};  // clock of the last event_block (control thread)
  Block *prev = nullptr;                // the registry of live blocks
  Block *next = nullptr;
};

// The clock LTTng-UST timestamps events with (no clock plugin: the session
// refuses batched when Python found LTTNG_UST_CLOCK_PLUGIN set).
inline uint64_t clock_ns() { return cycle_clock::monotonic_ns(); }

// Segment thresholds in counter ticks (cycle_clock::calibrate()).
uint64_t segment_ticks = kSegmentNs;

thread_local Block *current_block __attribute__((tls_model("initial-exec"))) = nullptr;

// Guards the registry (creation, thread exit, flushes by other threads); never
// taken on the hot path. Placement-new'ed again in a forked child, where another
// thread may have held it.
std::mutex *registry_mutex = new std::mutex();
std::atomic<bool> idle_flush{false};
// The interned name of os._exit (posix._exit), once a call of it was named.
std::atomic<const char *> exit_callable{nullptr};
Block *registry = nullptr;

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

__attribute__((noinline)) void encode_staged(Block &b);

void write_block(Block &b, bool final) {
  encode_staged(b);
  PINSIGHT_TRACEPOINT(event_block, b.python_thread_id, b.tid, b.sequence, b.count, b.base_clock,
                      final ? PINSIGHT_BLOCK_FINAL : 0, b.bytes, static_cast<uint16_t>(b.used));
  b.sequence += b.count;
  b.count = 0;
  b.used = 0;
  b.last_flush.store(clock_ns(), std::memory_order_relaxed);
}

// Owns the thread's block; its destructor runs when the OS thread exits (before
// LTTng-UST's own thread-exit work, so the tracepoint still works).
struct Owner {
  Block *block = nullptr;
  ~Owner() {
    if (!block) return;
    {
      std::lock_guard<std::mutex> lock(*registry_mutex);
      unlink(block);
    }
    current_block = nullptr;
    // Unlinked: no other thread flushes it now.
    if (block->opened) write_block(*block, true);
    delete block;
  }
};
thread_local Owner owner;

// The fatal signals whose default action ends the process: the faulting
// thread's records go out first.
constexpr int kFatalSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM};
struct sigaction previous_actions[sizeof kFatalSignals / sizeof kFatalSignals[0]];

void on_fatal_signal(int signo, siginfo_t *info, void *context) {
  Block *b = current_block;
  // A record half-written is the one thing that cannot go out; its block is
  // then lost if the signal ends the process.
  if (b && b->opened && !b->writing && (b->count != 0 || b->staged_count != 0)) {
    write_block(*b, false);
  }
  for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
    if (kFatalSignals[i] != signo) continue;
    const struct sigaction &previous = previous_actions[i];
    if (previous.sa_flags & SA_SIGINFO) {
      if (previous.sa_sigaction) previous.sa_sigaction(signo, info, context);
      return;
    }
    if (previous.sa_handler == SIG_IGN) return;
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != nullptr) {
      previous.sa_handler(signo);
      return;
    }
    // The default action: as if we were never there.
    sigaction(signo, &previous, nullptr);
    raise(signo);
    return;
  }
}

void install_signal_handlers() {
  for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
    struct sigaction current = {};
    if (sigaction(kFatalSignals[i], nullptr, &current) != 0) continue;
    // SIG_IGN stays: the signal does not end the process.
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) continue;
    previous_actions[i] = current;
    struct sigaction action = {};
    action.sa_sigaction = on_fatal_signal;
    // SA_NODEFER: the default action re-raised from inside the handler is
    // delivered at once. SA_ONSTACK: a stack overflow's SIGSEGV (faulthandler
    // sets up an alternate stack).
    action.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(kFatalSignals[i], &action, nullptr);
  }
}

void flush_at_exit() { flush_all(true); }

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

// Slow path: the thread's first record, or its first since its stream closed.
__attribute__((noinline)) Block *create_current(int python_thread_id) {
  Block *b = current_block;
  if (!b) {
    b = new Block();
    b->tid = static_cast<int>(syscall(SYS_gettid));
    b->python_thread_id = python_thread_id;
    {
      std::lock_guard<std::mutex> lock(*registry_mutex);
      link(b);
    }
    owner.block = b;
    current_block = b;
  }
  // The empty opening block: readers hold this thread's other events from here
  // on until its blocks say what happened meanwhile.
  b->opened = true;
  b->staged_count = 0;
  write_block(*b, false);
  b->anchor = cycle_clock::anchor();
  b->segment_end_ticks = b->anchor.ticks + segment_ticks;
  return b;
}

// The staged records, timed between the segment's anchor and one taken now
// (their counter ticks lie between the two), into the block's bytes; the new
// anchor opens the next segment. Timestamps stay in order per thread: the map
// is monotonic, and clamped to the last one written. A segment goes whole into
// one block, and a block is written only after every staged record is in it:
// its event is then later than all of them, as readers expect.
//
// Each record: its head, the zigzag delta of its code id, for a native call the
// zigzag delta of its callable id and its line, then its time's delta (ns, from
// the block's previous record; the first record's time is the block's
// base_clock). The block's running state lives in locals through the loop: the
// bytes written through `p` could alias any field of the Block, which would
// otherwise be stored and loaded again around every byte.
void encode_staged(Block &b) {
  uint32_t n = b.staged_count;
  if (n == 0) return;
  b.writing = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  b.staged_count = 0;
  cycle_clock::Anchor start = b.anchor;
  cycle_clock::Anchor end = cycle_clock::anchor();
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
  if (count == 0) {
    // The block's first record: its time is the base, its ids' deltas from 0.
    last_clock = 0;
    last_code = last_callable = 0;
  }
  uint8_t *p = b.bytes + b.used;
  const Staged *staged = b.staged;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t ticks = staged[i].ticks;
    const uint64_t code_id = staged[i].code_id;
    const uint8_t head = staged[i].head;
    uint64_t into = ticks > start.ticks ? ticks - start.ticks : 0;
    uint64_t now =
        start.ns + static_cast<uint64_t>((static_cast<unsigned __int128>(into) * rate) >> 32);
    if (now > end.ns) now = end.ns;
    if (now < floor_ns) now = floor_ns;
    floor_ns = now;
    if (count == 0) b.base_clock = last_clock = now;
    *p++ = head;
    p = put_varint(p, zigzag(code_id - last_code));
    last_code = code_id;
    if ((head >> 3) >= PINSIGHT_RECORD_C_CALL_BEGIN) {
      const uint64_t callable_id = staged[i].callable_id;
      p = put_varint(p, zigzag(callable_id - last_callable));
      last_callable = callable_id;
      p = put_varint(p, static_cast<uint32_t>(staged[i].line));
    }
    p = put_varint(p, now - last_clock);
    last_clock = now;
    ++count;
  }
  b.used = static_cast<uint32_t>(p - b.bytes);
  b.count = count;
  b.last_clock = last_clock;
  b.last_code = last_code;
  b.last_callable = last_callable;
  b.anchor = end;
  b.segment_end_ticks = end.ticks + segment_ticks;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  b.writing = 0;
  // Full, or its first record is old.
  if (b.used >= kBlockBytes || end.ns - b.base_clock > kMaxBlockAgeNs) write_block(b, false);
}

// The calling thread's next staged record, its time taken (a full or old segment
// encoded first) and the block marked as being written (a fatal signal's flush
// then leaves it alone): the caller fills the record, then calls end_staging().
// Inlined into both appends, which are the callbacks' hot path.
__attribute__((always_inline)) inline Staged &begin_staging(Block *&b, int python_thread_id) {
  b = current_block;
  if (__builtin_expect(b == nullptr || !b->opened, 0)) b = create_current(python_thread_id);
  uint64_t ticks = cycle_clock::ticks();
  if (__builtin_expect(b->staged_count == kSegmentRecords || ticks > b->segment_end_ticks, 0)) {
    encode_staged(*b);
    ticks = cycle_clock::ticks();  // after the new anchor
  }
  b->writing = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  Staged &r = b->staged[b->staged_count];
  r.ticks = ticks;
  return r;
}

__attribute__((always_inline)) inline void end_staging(Block &b) {
  ++b.staged_count;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  b.writing = 0;
}

}  // namespace

void append(int kind, int transition, uint64_t code_id, uint64_t callable_id, int line,
            int python_thread_id) {
  Block *b;
  Staged &r = begin_staging(b, python_thread_id);
  r.code_id = code_id;
  r.callable_id = callable_id;
  r.line = line;
  r.head = static_cast<uint8_t>((kind << 3) | transition);
  end_staging(*b);
  if (kind == PINSIGHT_RECORD_C_CALL_BEGIN &&
      callable_id == reinterpret_cast<uintptr_t>(exit_callable.load(std::memory_order_relaxed))) {
    // The process ends inside this call, without exit handlers: the last blocks
    // of every thread go out now.
    flush_all(true);
  }
}

void append_function(int kind, int transition, uint64_t code_id, int python_thread_id) {
  Block *b;
  Staged &r = begin_staging(b, python_thread_id);
  // encode_staged() reads neither callable_id nor line of a function record.
  r.code_id = code_id;
  r.head = static_cast<uint8_t>((kind << 3) | transition);
  end_staging(*b);
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

void flush_all(bool final) {
  std::lock_guard<std::mutex> lock(*registry_mutex);
  for (Block *b = registry; b; b = b->next) {
    if (b->opened && (b->count != 0 || b->staged_count != 0 || final)) write_block(*b, final);
    // A thread's next record, if any, opens its stream again.
    if (final) b->opened = false;
  }
}

void flush_current() {
  Block *b = current_block;
  if (b && b->opened && (b->count != 0 || b->staged_count != 0)) write_block(*b, false);
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
      write_block(*b, false);
    }
  }
}

void set_idle_flush(bool wanted) { idle_flush.store(wanted, std::memory_order_relaxed); }
bool idle_flush_wanted() { return idle_flush.load(std::memory_order_relaxed); }

void forked_child() {
  // The parent's other threads do not exist here: their blocks (their records
  // are the parent's, flushed or not by the parent) are forgotten, not freed
  // (their memory may be half-updated).
  registry_mutex = new (registry_mutex) std::mutex();
  registry = nullptr;
  Block *b = current_block;
  if (!b) return;
  b->count = 0;
  b->staged_count = 0;
  b->used = 0;
  b->sequence = 0;
  b->tid = static_cast<int>(syscall(SYS_gettid));
  b->opened = false;  // the next record opens the child's stream
  link(b);
}

}  // namespace pinsight::emitter::blocks
