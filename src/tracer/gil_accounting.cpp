#include "tracer/gil_accounting.h"

#include <time.h>

#include "emit/emitter.h"

namespace pinsight::gil_accounting {

std::atomic<bool> enabled{false};

namespace {
// Advanced each time gil events turn on: a point taken before (or while they were off) is void.
std::atomic<uint32_t> epoch{1};
// python_thread_id of gil_holder's thread: the pointer is only ever compared
// (its thread may exit and free it at any time), never followed.
std::atomic<int> holder_id{-1};

// `state`'s thread holds the GIL now; the previous holder's python_thread_id.
int take_holder(ThreadState &state) {
  thread_states::gil_holder.store(&state, std::memory_order_relaxed);
  return holder_id.exchange(state.python_thread_id, std::memory_order_relaxed);
}
}  // namespace

void after_fork_child() {
  epoch.fetch_add(1);
  thread_states::gil_holder.store(thread_states::current_ptr);
  holder_id.store(thread_states::current_ptr ? thread_states::current_ptr->python_thread_id : -1);
}

void set_enabled(bool on) {
  if (on && !enabled.load()) epoch.fetch_add(1);
  enabled.store(on);
}

namespace {

uint64_t read_clock(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Off-CPU time of the thread since its point, and a new point now.
uint64_t advance(GilPoint &point) {
  uint64_t wall = monotonic_ns();
  uint64_t cpu = read_clock(CLOCK_THREAD_CPUTIME_ID);
  uint64_t off = 0;
  uint32_t now_epoch = epoch.load(std::memory_order_relaxed);
  if (point.epoch != now_epoch) {
    point.epoch = now_epoch;
    point.wall_ns = 0;
    point.released_at = 0;
  }
  if (point.wall_ns != 0) {
    uint64_t elapsed = wall - point.wall_ns;
    uint64_t ran = cpu - point.cpu_ns;
    off = elapsed > ran ? elapsed - ran : 0;
  }
  point.wall_ns = wall;
  point.cpu_ns = cpu;
  return off;
}

}  // namespace

uint64_t monotonic_ns() { return read_clock(CLOCK_MONOTONIC); }

void switched_in(ThreadState &state, bool at_begin) {
  int previous_id = take_holder(state);
  if (!enabled.load(std::memory_order_relaxed)) return;
  bool first = state.gil.wall_ns == 0 || state.gil.epoch != epoch.load(std::memory_order_relaxed);
  uint64_t off = advance(state.gil);
  if (first) return;
  // Inside a native call that runs no Python, only the call itself can have
  // released the GIL (time.sleep, a lock, I/O in libpython): the eval loop drops
  // it at the switch interval in bytecode only. A hand-off seen as a Python frame
  // starts or resumes under a native caller (sum over a generator, map, sorted
  // with a key) was the eval loop's, at the frame's entry: a wait.
  bool in_native =
      !at_begin && !state.stack.empty() && state.stack.back().kind == RecordKind::CCall;
  emitter::gil_switch(state.python_thread_id, previous_id, in_native ? 0 : off,
                      in_native ? off : 0);
}

void before_release(ThreadState &state) {
  if (!enabled.load(std::memory_order_relaxed)) return;
  bool first = state.gil.wall_ns == 0 || state.gil.epoch != epoch.load(std::memory_order_relaxed);
  if (!first && thread_states::gil_holder.load(std::memory_order_relaxed) == &state) {
    // No other thread produced an event since this one's: a hand-off since its
    // point would have been seen there. The thread CPU clock (a system call, most
    // of a release's cost) is read once, at the take-back.
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
