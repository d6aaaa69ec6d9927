// events = gil: where each thread's time went with respect to the GIL,
// measured by the thread itself at a few points only, never per call.
//
// A hand-off is seen by the thread switched in: its callback finds that another
// thread produced the last one (thread_states::gil_holder, one compare on the
// hot path). It then reads its wall and CPU clocks: since its previous point it
// was off CPU for (wall elapsed - CPU consumed), which is GIL wait, or, when a
// native call is open on its stack, time that call spent with the GIL released
// by code we cannot hook (libpython's own sleep, lock and I/O calls). Native code
// of extension modules releasing the GIL goes through src/gil's hooks, which call
// before_release / after_take_back: the release and the wait to take the GIL back
// are then measured exactly.
//
// A thread can also lose the GIL and get it back between two of its own events
// with no other thread's event in between (both ran loops that call nothing), or
// be preempted while it holds it: no hand-off is seen then. So with gil events
// on, each event also compares the cycle counter with the thread's previous
// event's: after a gap of kQuietGapNs or more, and as the thread's outermost
// frame ends (the rest of its life), it reads its clocks and reports the off-CPU
// time pending since its point (settle). So that the hot paths do not pay for
// this with gil events off, gil_holder then names no thread and every callback
// goes out of line. Points are per thread, so the sum of a thread's waits is
// exact however rarely it produces events; only where a wait is attributed
// depends on them.
#pragma once

#include <atomic>
#include <cstdint>

#include "tracer/thread_state.h"

namespace pinsight::gil_accounting {

// gil events are on: asked for, the tracer active and TRACING (set by activation).
extern std::atomic<bool> enabled;
// Turns gil events on or off (GIL held); points taken before are then void.
void set_enabled(bool on);
// In a forked child: the parent's points are void (the child's CPU clocks start
// at zero) and the other threads are gone.
void after_fork_child();

// A gap between two events of one thread after which its clocks are read: the
// shortest wait a hand-off unseen can hide is about a switch interval (5 ms).
constexpr uint64_t kQuietGapNs = 1000000;
// kQuietGapNs in cycle_clock ticks (set as gil events turn on).
extern uint64_t quiet_gap_ticks;

// The slow path of note_thread: another thread's callback ran last, or gil
// events are on (gil_holder then matches no thread). outermost_ends: the event
// ends the thread's outermost record.
void switched_in(ThreadState &state, bool at_begin, bool outermost_ends);
// Reports the thread's off-CPU time pending since its point (gil events on).
void settle(ThreadState &state, bool at_begin);
// The exiting thread's state is no longer the last callback's (no GIL held).
void thread_exited(ThreadState *state);

// Every hot path, with the calling thread's state: one compare.
// at_begin: the event is a Python frame starting or resuming, so the thread was
// on its way into bytecode (a native caller such as sum() or map() driving it).
inline void note_thread(ThreadState &state, bool at_begin = false) {
  if (__builtin_expect(thread_states::gil_holder.load(std::memory_order_relaxed) != &state, 0)) {
    switched_in(state, at_begin, false);
  }
}

// note_thread for the end of a Python frame's record, before it is popped.
inline void note_end(ThreadState &state) {
  if (__builtin_expect(thread_states::gil_holder.load(std::memory_order_relaxed) != &state, 0)) {
    switched_in(state, false, state.stack.size() == 1);
  }
}

uint64_t monotonic_ns();

// The GIL hooks, on the releasing thread: just before native code releases the
// GIL (still held), and once it is held again (take_back_start: monotonic_ns()
// before the take-back began). Nothing happens for a thread the tracer never saw.
void before_release(ThreadState &state);
void after_take_back(ThreadState &state, uint64_t take_back_start, int source);
// The thread took the GIL without a release we saw (a foreign thread's first
// PyGILState_Ensure): `waited` is the wait measured around it.
void after_first_take(ThreadState &state, uint64_t waited, int source);

}  // namespace pinsight::gil_accounting
