// Per-thread state: the small stable python_thread_id and the shadow stack of
// frames entered under a callback. Lives in thread-local storage, created at
// the thread's first callback and destroyed when the OS thread exits.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "tracer/code_info.h"

namespace pinsight {

enum RecordFlags : uint16_t {
  kBeginEmitted = 1u << 0,    // function_begin / c_call_begin went out
  kEmitEnd = 1u << 1,         // the end event is wanted (pysysmon_*_return)
  kTraceCCalls = 1u << 2,     // native calls made by this frame are traced
  kEndsWindow = 1u << 3,      // last traced execution: window_end_action on its end
  kTraced = 1u << 4,          // rate control chose this execution
  kImportEmitted = 1u << 5,   // importlib's _find_and_load: import_begin went out
  kGeneratorEntry = 1u << 6,  // resumed from a GeneratorTable entry, finished at its end
  kTaskStep = 1u << 7,        // an asyncio task's step: its end is the step's (tasks.h)
  kAsyncioEnd = 1u << 8,      // a task creator or executor submit: its return value says more
};

enum class RecordKind : uint8_t { Function, CCall };

// One frame entered under a callback. Pointers are identities of live
// objects: a frame keeps its code alive, and a native call's callable is
// alive until its C_RETURN/C_RAISE.
struct FrameRecord {
  // Built in place (emplace_back) on the hot paths: a record assembled on the C
  // stack and copied in stalls on store-to-load forwarding.
  FrameRecord(const void *frame_, CodeInfo *code_, const void *callable_, const char *callee_name_,
              int line_, RecordKind kind_, uint16_t flags_, uint64_t begin_ticks_ = 0)
      : frame(frame_),
        code(code_),
        callable(callable_),
        callee_name(callee_name_),
        line(line_),
        kind(kind_),
        flags(flags_),
        begin_ticks(begin_ticks_) {}

  const void *frame;  // interpreter frame (caller's frame for a native call)
  CodeInfo *code;     // the frame's code (the caller's for a native call)
  union {
    const void *callable;  // native call: the object C_RETURN/C_RAISE will name
    uint64_t started_ns;   // a traced generator instance's first segment: when it started
  };
  const char *callee_name;  // native call: interned name; import: the module
  int line;                 // native call: line of the call site
  RecordKind kind;
  uint16_t flags;
  // When it began (emitter::record_ticks(): the batched payload's record time,
  // which its begin reads anyway); 0 when not known (another payload, a frame
  // running before tracing started). A flight recorder's dump tells how long
  // each open frame has run from it.
  uint64_t begin_ticks;
};

// events = gil: the thread's last accounting point (tracer/gil_accounting.h).
// Touched only by the thread itself.
struct GilPoint {
  uint64_t wall_ns = 0;           // CLOCK_MONOTONIC at the point; 0: no point yet
  uint64_t cpu_ns = 0;            // the thread's CPU time then
  uint64_t blocked = 0;           // its voluntary context switches then
  uint64_t released_at = 0;       // native code released the GIL then (our hooks); 0: not released
  uint64_t before_ns = 0;         // time waited for the GIL between the point and that release
  uint64_t last_event_ticks = 0;  // cycle_clock::ticks() at the thread's previous event
  uint32_t epoch = 0;             // gil_accounting's epoch of the point: older points are void
};

// window_end_trigger = all (PInsight's count policy): the lexgions with a cap
// (max_num_traces >= 0) this thread has run under config generation
// `generation` (its low 32 bits), and how many of them reached it. The window
// ends after an execution that capped one, once every one has.
struct WindowGates {
  uint32_t seen = 0;
  uint32_t capped = 0;
  uint32_t generation = UINT32_MAX;
};

struct ThreadState {
  int python_thread_id = -1;
  int tid = 0;  // the OS thread's (a flight recorder's dump names it): in the padding
  unsigned long thread_ident = 0;
  std::vector<FrameRecord> stack;
  // setprofile backend: generator frames a running gen.throw()/close() call
  // will resume with an exception, by the generator thrown into (identities
  // only: the pair outlives neither the call nor the generator).
  std::vector<std::pair<const void *, const void *>> pending_throws;
  // asyncio: the task steps running on this thread, innermost last (an eager
  // task's first step runs inside its creator's step): the step's frame and task.
  struct TaskStep {
    const void *frame;
    uintptr_t task;
    bool awaited;  // a coroutine the task's awaits, resumed first by a throw()
  };
  std::vector<TaskStep> task_steps;
  // Such an awaited coroutine returned or raised: its awaiter, resumed next, goes on
  // with the same step.
  uintptr_t continuing_task = 0;
  // The task this thread's last task_create named: nested creation functions
  // (TaskGroup.create_task, then the loop's) return the same task one after the
  // other. Cleared by a step's begin or end, before which its address cannot
  // be another task's.
  uintptr_t last_created = 0;
  GilPoint gil;
  // This thread's instance of libpython's thread-state variable (the one
  // PyThreadState_GetUnchecked reads), when it could be found
  // (python_state_slot()); null: ask libpython. Its address is fixed for the
  // thread's life.
  PyThreadState *const *python_state = nullptr;
  // Last: every callback reads the fields above (stack, python_state), and this
  // only the slow paths, under the GIL.
  WindowGates window_gates;
};

namespace thread_states {

// Python threads known to the tracer and still alive.
int live_count();
// Hand out python_thread_id 0 to `main_ident`, then 1, 2, ... in order of
// first callback. Reset only when no tracing has happened.
void set_main_thread(unsigned long main_ident);
__attribute__((cold)) ThreadState *create_current();  // slow path
// Empties every thread's shadow stack (deactivate; GIL held).
void clear_all_stacks();
// Records of any thread naming `code` (stale: their frames are gone) now name
// `replacement` and emit nothing; in place, so that no record moves under a
// callback of this thread. GIL held.
void forget_code(const CodeInfo &code, CodeInfo &replacement);
// Runs `fn` on the live thread `python_thread_id` under the registry's lock (a
// thread exits without the GIL); nothing if it exited. GIL held.
void with_thread(int python_thread_id, const std::function<void(ThreadState &)> &fn);
// Runs `fn` on every live thread's state, under the registry's lock. GIL held.
void for_each(const std::function<void(ThreadState &)> &fn);
// The same without allocating, and only if the registry's lock is free (a
// fatal signal's handler may have interrupted its holder): false when it is
// not. GIL held.
bool try_for_each(void (*fn)(ThreadState &, void *), void *context);
// Called (without the GIL, from the exiting thread) when the last thread that
// ran Python code exits; activation installs it (its control thread then looks
// whether the program has any thread left).
void set_last_thread_exit_hook(void (*hook)());
// In a forked child (GIL held): only the forking thread survives; its
// inherited records stay (their ends are recognised) but emit nothing.
void forked_child();

// The thread whose callback ran last (any mode): a callback of another thread
// means the GIL changed hands in between (events = gil). Cleared when that
// thread exits, so that a new state at the same address is not taken for it.
// While gil events are on, no thread's: gil_accounting keeps the last one.
extern std::atomic<ThreadState *> gil_holder;

// __thread, not thread_local: no dynamic initialization, so other files read it
// without the thread_local wrapper's check for an initialization function.
extern __thread ThreadState *current_ptr __attribute__((tls_model("initial-exec")));

// The running frame (compat::current_frame) of the calling thread: through its
// ThreadState's python_state when it has one, a load instead of libpython's
// call and its __tls_get_addr on every event.
inline const void *current_frame() {
  ThreadState *state = current_ptr;
  PyThreadState *tstate = __builtin_expect(state && state->python_state, 1)
                              ? *state->python_state
                              : compat::thread_state();
  return compat::current_frame(tstate);
}

inline ThreadState *current() {
  ThreadState *state = current_ptr;
  return state ? state : create_current();
}

}  // namespace thread_states
}  // namespace pinsight
