#include "tracer/gil_accounting.h"

#include <sys/resource.h>
#include <time.h>

#include "emit/cycle_clock.h"
#include "emit/emitter.h"

namespace pinsight::gil_accounting {

std::atomic<bool> enabled{false};
uint64_t quiet_gap_ticks = UINT64_MAX;

namespace {
// Advanced each time gil events turn on: a point taken before (or while they were off) is void.
std::atomic<uint32_t> epoch{1};
// While gil events are on, the thread whose callback ran last (gil_holder then
// holds kEveryCallback). Like gil_holder, only ever compared (its thread may exit
// and free it at any time), never followed.
std::atomic<ThreadState *> last_thread{nullptr};
// python_thread_id of the last callback's thread.
std::atomic<int> holder_id{-1};

// No thread's state: with gil events on, every callback's compare with
// gil_holder fails and takes switched_in, which reads the cycle counter.
ThreadState every_callback;
ThreadState *const kEveryCallback = &every_callback;

std::atomic<ThreadState *> &holder_slot() {
  return enabled.load(std::memory_order_relaxed) ? last_thread : thread_states::gil_holder;
}

// `state`'s thread holds the GIL now; the previous holder's python_thread_id.
int take_holder(ThreadState &state) {
  holder_slot().store(&state, std::memory_order_relaxed);
  return holder_id.exchange(state.python_thread_id, std::memory_order_relaxed);
}
}  // namespace

void after_fork_child() {
  epoch.fetch_add(1);
  holder_slot().store(thread_states::current_ptr);
  holder_id.store(thread_states::current_ptr ? thread_states::current_ptr->python_thread_id : -1);
}

void thread_exited(ThreadState *state) {
  ThreadState *expected = state;
  thread_states::gil_holder.compare_exchange_strong(expected, nullptr);
  expected = state;
  last_thread.compare_exchange_strong(expected, nullptr);
}

void set_enabled(bool on) {
  bool was = enabled.load();
  if (on && !was) {
    emitter::cycle_clock::calibrate();
    quiet_gap_ticks = emitter::cycle_clock::ticks_for_ns(kQuietGapNs);
    epoch.fetch_add(1);
    last_thread.store(thread_states::gil_holder.load());
    thread_states::gil_holder.store(kEveryCallback);
  } else if (!on && was) {
    thread_states::gil_holder.store(last_thread.load());
  }
  enabled.store(on);
}

namespace {

uint64_t read_clock(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The calling thread's clocks: wall, CPU time (to the microsecond) and how many
// times it blocked (voluntary context switches: a sleep, a lock, I/O, the GIL's
// own wait; preemption is involuntary). One getrusage costs less than a
// clock_gettime of the thread CPU clock, which is also a system call.
struct Clocks {
  uint64_t wall_ns;
  uint64_t cpu_ns;
  uint64_t blocked;
};

Clocks read_clocks() {
  uint64_t wall = read_clock(CLOCK_MONOTONIC);
  rusage usage;
  getrusage(RUSAGE_THREAD, &usage);
  uint64_t us = static_cast<uint64_t>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000u +
                static_cast<uint64_t>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  return {wall, us * 1000u, static_cast<uint64_t>(usage.ru_nvcsw)};
}

// Off-CPU time of the thread from its point to `now`: wall elapsed - CPU consumed.
uint64_t off_cpu(const GilPoint &point, const Clocks &now) {
  uint64_t elapsed = now.wall_ns - point.wall_ns;
  uint64_t ran = now.cpu_ns - point.cpu_ns;
  return elapsed > ran ? elapsed - ran : 0;
}

void move_point(GilPoint &point, const Clocks &now) {
  point.wall_ns = now.wall_ns;
  point.cpu_ns = now.cpu_ns;
  point.blocked = now.blocked;
}

// Off-CPU time of the thread since its point, and a new point now.
uint64_t advance(GilPoint &point) {
  Clocks now = read_clocks();
  uint32_t now_epoch = epoch.load(std::memory_order_relaxed);
  if (point.epoch != now_epoch) {
    point.epoch = now_epoch;
    point.wall_ns = 0;
    point.released_at = 0;
  }
  uint64_t off = point.wall_ns != 0 ? off_cpu(point, now) : 0;
  move_point(point, now);
  return off;
}

}  // namespace

uint64_t monotonic_ns() { return read_clock(CLOCK_MONOTONIC); }

namespace {

bool no_point(const GilPoint &point) {
  return point.wall_ns == 0 || point.epoch != epoch.load(std::memory_order_relaxed);
}

// Inside a native call that runs no Python, only the call itself can have
// released the GIL (time.sleep, a lock, I/O in libpython): the eval loop drops
// it at the switch interval in bytecode only. A hand-off seen as a Python frame
// starts or resumes under a native caller (sum over a generator, map, sorted
// with a key) was the eval loop's, at the frame's entry: a wait.
bool in_native_call(const ThreadState &state, bool at_begin) {
  return !at_begin && !state.stack.empty() && state.stack.back().kind == RecordKind::CCall;
}

// Off-CPU time `off` of the thread, reported as it holds the GIL again.
void report_off_cpu(ThreadState &state, int previous_id, uint64_t off, bool released) {
  emitter::gil_switch(state.python_thread_id, previous_id, released ? 0 : off, released ? off : 0);
}

// Off-CPU time below this stays pending at the point (clock reads' jitter,
// short preemptions) until a hand-off or a later settle reports it.
constexpr uint64_t kSettleMinNs = 20000;

}  // namespace

void switched_in(ThreadState &state, bool at_begin, bool outermost_ends) {
  if (!enabled.load(std::memory_order_relaxed)) {
    take_holder(state);
    return;
  }
  // gil events on: every callback is here. A gap since the thread's previous
  // event, or its outermost frame ending, settles its pending off-CPU time.
  uint64_t now = emitter::cycle_clock::ticks();
  uint64_t previous_event = state.gil.last_event_ticks;
  state.gil.last_event_ticks = now;
  if (last_thread.load(std::memory_order_relaxed) == &state) {
    if (outermost_ends || now - previous_event >= quiet_gap_ticks) settle(state, at_begin);
    return;
  }
  int previous_id = take_holder(state);
  bool first = no_point(state.gil);
  uint64_t off = advance(state.gil);
  if (!first) report_off_cpu(state, previous_id, off, in_native_call(state, at_begin));
}

void settle(ThreadState &state, bool at_begin) {
  GilPoint &point = state.gil;
  if (no_point(point)) {
    advance(point);
    return;
  }
  Clocks now = read_clocks();
  uint64_t off = off_cpu(point, now);
  if (off < kSettleMinNs) return;
  // No hand-off seen, so off CPU inside a native call is not necessarily its
  // release: preempted while it held the GIL, the thread did not block.
  bool released = in_native_call(state, at_begin) && now.blocked != point.blocked;
  move_point(point, now);
  // With no other Python thread there was nobody to wait for: the thread held
  // the GIL while off CPU (preempted, a page fault), which is held time.
  if (!released && thread_states::live_count() <= 1) return;
  // No other thread's event since this one's: the thread is its own previous holder.
  report_off_cpu(state, state.python_thread_id, off, released);
}

void before_release(ThreadState &state) {
  if (!enabled.load(std::memory_order_relaxed)) return;
  bool first = no_point(state.gil);
  if (!first && last_thread.load(std::memory_order_relaxed) == &state) {
    // No other thread produced an event since this one's: a hand-off since its
    // point would have been seen there (and a quiet gap settled). The thread
    // CPU clock (a system call, most of a release's cost) is read once, at the
    // take-back.
    state.gil.before_ns = 0;
    state.gil.released_at = monotonic_ns();
    return;
  }
  uint64_t off = advance(state.gil);
  state.gil.before_ns = first ? 0 : off;
  state.gil.released_at = state.gil.wall_ns;
}

void after_take_back(ThreadState &state, uint64_t take_back_start, int source) {
  uint64_t released_at = state.gil.released_at;
  // Released before gil events were on (or in an earlier epoch).
  if (released_at == 0 || state.gil.epoch != epoch.load(std::memory_order_relaxed)) return;
  state.gil.released_at = 0;
  take_holder(state);
  if (!enabled.load(std::memory_order_relaxed)) return;
  advance(state.gil);
  uint64_t now = state.gil.wall_ns;
  uint64_t released = take_back_start > released_at ? take_back_start - released_at : 0;
  uint64_t waited = now > take_back_start ? now - take_back_start : 0;
  emitter::gil_released(state.python_thread_id, released, waited, state.gil.before_ns, source);
}

void after_first_take(ThreadState &state, uint64_t waited, int source) {
  take_holder(state);
  if (!enabled.load(std::memory_order_relaxed)) return;
  advance(state.gil);
  emitter::gil_released(state.python_thread_id, 0, waited, 0, source);
}

}  // namespace pinsight::gil_accounting
