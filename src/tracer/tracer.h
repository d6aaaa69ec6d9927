// The tracer: the per-event state of the Python domain (mode, configuration
// generation, shadow stacks through thread_states, the backend's events) and
// the hot paths shared by both backends (inline below); slow paths in
// tracer.cpp. Policy (what to trace, from which settings; the configuration's
// publication; the control thread) belongs to src/activation, which drives this
// object through the control methods and the hooks it installs.
//
// Threads: every method runs with the GIL held, except where noted. The
// shadow stacks are per thread; CodeInfo counters and the suspended-frame map
// are shared and protected by the GIL (free-threaded builds are refused).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/py_util.h"
#include "config/config.h"
#include "emit/emitter.h"
#include "tracer/backend.h"
#include "tracer/callable_names.h"
#include "tracer/code_info.h"
#include "tracer/generators.h"
#include "tracer/gil_accounting.h"
#include "tracer/thread_state.h"

namespace pinsight {

// What CPython sees from a callback: carry on, or DISABLE this location.
enum class Verdict { Continue, Disable };

// What the tracer asks of the layer above it, which installs them before
// start(): the tracer knows when, activation knows how.
struct TracerHooks {
  // A new, installed backend, when the mode leaves OFF after the backend was
  // dropped (OFF with nothing open); throws ActivationError.
  std::unique_ptr<Backend> (*make_backend)() = nullptr;
  // The mode changed, or tracing turned itself off: allocation sampling follows.
  void (*mode_changed)() = nullptr;
  // A window ended with an INTROSPECT action (GIL held): activation pauses and
  // runs its script, then calls end_introspection. None: the resume mode at once.
  void (*introspect)(const WindowEndAction &action) = nullptr;
};

struct LexgionReport {
  std::string qualname, filename, module;
  int lineno;
  uint64_t executions, traced;
  // Rate control (lexgion_counts): the settings the code was last decided
  // under, and whether `executions` is a lower bound.
  bool rate_controlled = false;
  bool lower_bound = false;
  int64_t max_num_traces = -1, tracing_rate = 1, trace_starts_at = 0;
  std::string section;
  const NamedCode *code = nullptr;  // valid while the GIL is held
};

class Tracer {
 public:
  static Tracer &instance() { return instance_; }

  // ---- hot paths: inline, below ----
  Verdict on_begin(PyObject *code, const void *frame, int transition);
  // value: what the frame returned or yielded, or the exception it unwinds
  // with (null where the backend cannot tell: setprofile's unwind).
  Verdict on_end(PyObject *code, const void *frame, int transition, PyObject *value);
  // Every end on_end's inline part leaves: a yield, a generator's or import's
  // end, a window's last, a task creator's, a stale native call, no record.
  Verdict on_end_slow(PyObject *code, const void *frame, int transition, PyObject *value);
  // offset(): the CALL's bytecode offset, asked for only when the call gets a
  // record (most calls are to Python functions and need none).
  template <typename OffsetFn>
  Verdict on_call(PyObject *code, const void *frame, OffsetFn offset, PyObject *callable);
  void on_c_end(const void *frame, PyObject *callable, bool raised);

  // ---- driven by activation ----
  void set_hooks(const TracerHooks &hooks) { hooks_ = hooks; }
  // Per-code and generator state CPython must lend us (the code-extra slot,
  // the generator layout); throws ActivationError.
  static void prepare();
  // Starts in `initial` mode under configuration `generation`, with `backend`
  // installed (null under OFF). `requested_events`: kEvent* bits the caller
  // allows. Frames already running get records (their ends are recognised).
  void start(std::unique_ptr<Backend> backend, TraceMode initial, uint64_t generation,
             uint32_t requested_events);
  // Switches CPython's events off and forgets every open record.
  void stop();
  // A debugger traces the program (activation/debugger_guard.h): CPython's events
  // off and every open record forgotten, the backend and the mode kept; back,
  // tracing resumes from the frames running then, as after start().
  void step_aside();
  void step_back();
  bool stepped_aside() const { return aside_; }
  bool active() const { return active_.load(); }  // any thread
  TraceMode mode() const { return mode_.load(std::memory_order_relaxed); }
  // Switches the mode (window end, reload, API) and reconciles CPython's events.
  void set_mode(TraceMode mode, const char *reason);
  uint64_t generation() const { return generation_.load(); }
  void set_generation(uint64_t generation) { generation_.store(generation); }
  // A configuration of `generation` was published, asking for `target` (GIL held).
  void config_published(uint64_t generation, TraceMode target, const char *reason);
  // Tracing windows ended so far (a function reached max_num_traces, or
  // window_timed_out): a window timer armed before the last one has nothing to end.
  uint64_t windows_ended() const { return windows_ended_; }
  // window_timeout passed: the TRACING window ends with `action`, as a
  // function's last traced execution ends it (GIL held).
  void window_timed_out(const WindowEndAction &action);
  // An INTROSPECT window end's pause is over (GIL held): Python takes the resume
  // mode of `action`; resuming in TRACING starts a new window, in which every
  // function's cap counts from zero again (PInsight's cyclic INTROSPECT).
  void end_introspection(const WindowEndAction &action);
  bool introspecting() const { return introspecting_; }
  // Import events: asked for by activate(events=...), or possible at all (asked
  // for or named by the configuration). shadow_all: every frame needs a record
  // (allocation samples name the innermost Python function).
  void set_extra_events(bool imports_requested, bool imports_possible, bool shadow_all);
  void on_new_thread(ThreadState &state);
  // Reported once on stderr; tracing then turns itself off.
  __attribute__((cold)) void internal_failure(const char *what);
  // In a forked child: inherited frames are silenced, names written again.
  void after_fork_child();

  // ---- read by status() ----
  std::vector<LexgionReport> lexgions() const;
  const char *backend_name() const { return backend_ ? backend_->name() : nullptr; }
  int tool_id() const { return backend_ ? backend_->tool_id() : -1; }
  uint32_t requested_events() const { return requested_events_; }
  bool imports_possible() const { return imports_possible_.load(); }
  uint64_t events_emitted() const { return events_emitted_; }
  // The same from a thread without the GIL (a flight recorder's stall watch):
  // the hot path's plain count, read whole.
  uint64_t events_emitted_now() const {
    return __atomic_load_n(&events_emitted_, __ATOMIC_RELAXED);
  }
  int threads_seen() const { return threads_seen_.load(); }

 private:
  Tracer() = default;

  // Slow paths (tracer.cpp; the windows' in windows.cpp).
  void apply_decision(CodeInfo &code, const Config &config);  // read lock held
  // The code's decision under the current config, if not made yet, then the thread's.
  __attribute__((cold)) void decide_thread(CodeInfo &code, ThreadLexgion &lex, ThreadState &state);
  // window_end_trigger = all: `lex`, just decided, counted in the thread's gates.
  void count_window_gate(CodeInfo &code, ThreadLexgion &lex, ThreadState &state);
  // The code dies: threads counting it as seen and not capped no longer do.
  void uncount_window_gates(CodeInfo &code);
  // 0 while the code may still be traced; else why its begins may be
  // disabled (kDisabledShared, kDisabledPerThread).
  uint8_t never_traced_again(const CodeInfo &code, const ThreadLexgion &lex) const;
  void close_stale_calls(ThreadState &state, const void *frame);
  // Records whose code died (thread_states::forget_code) leave the top of
  // `state`'s stack; true if any did.
  bool drop_forgotten(ThreadState &state);
  // code_registry's forget hook: `code` dies while records or window gates still name it.
  static void forget_code(CodeInfo &code);
  // An execution that took `code` to its cap on `state`'s thread ended.
  void window_ended(CodeInfo &code, ThreadState &state);
  // Both ends of a window (a cap, window_timeout): counted, and `action` applied.
  void end_window(const WindowEndAction &action, const char *reason);
  // A new window: every function's cap counts again (end_introspection).
  void start_window_cycle();
  // A frame of generator code returned or unwound: its instance's lifetime.
  void generator_ended(const FrameRecord &record, const ThreadState &state, int transition);
  void reconcile_events();  // CPython's events follow mode_ and open records
  // kCPyCalls in every code object but those that name setprofile, for a
  // backend that switches them per code object (Backend::calls_per_code).
  void watch_calls(bool on);
  // code_registry's created hook: a new code object gets our CALL if others have it.
  static void code_created(CodeInfo &code);
  void forget_records();  // every shadow stack and suspended generator (stop, step aside)
  // Re-enables our DISABLEd locations: those of per-thread verdicts only (a
  // new thread), or all of them (mode change, reload).
  void rearm(bool per_thread_only);
  // Every DISABLE we return goes through here, so that rearm() finds it.
  Verdict disable(CodeInfo &code, uint8_t why = kDisabledShared) {
    code.disabled |= why;
    return Verdict::Disable;
  }
  Verdict disable(PyObject *code);
  void push_activation_frames(ThreadState &state);
  void mode_changed() {
    if (hooks_.mode_changed) hooks_.mode_changed();
  }

  bool begins_disabled(const CodeInfo &code) const {
    return code.begins_disabled_epoch == disable_epoch_;
  }
  __attribute__((always_inline)) Verdict begin_start(CodeInfo &code, ThreadState &state,
                                                     const void *frame);
  void monitor_start(CodeInfo &code, ThreadState &state);         // MONITORING: counts only
  ThreadLexgion &lexgion_of(CodeInfo &code, ThreadState &state);  // decided for this config
  template <bool MayDisable>
  __attribute__((always_inline)) Verdict begin_execution(CodeInfo &code, ThreadState &state,
                                                         const void *frame);
  // An execution rate control or the filters left out (out of line).
  template <bool MayDisable>
  Verdict begin_untraced(CodeInfo &code, ThreadState &state, const void *frame,
                         const ThreadLexgion &lex);
  // imports.cpp: importlib's _find_and_load starts / ends (import events).
  __attribute__((cold)) Verdict begin_import(CodeInfo &code, ThreadState &state, const void *frame);
  // A start of CodeInfo::special code: an import, a task creator, an executor's work.
  __attribute__((cold, noinline)) Verdict begin_special(CodeInfo &code, ThreadState &state,
                                                        const void *frame);
  // tasks.cpp: a traced coroutine frame begins (its record on top, its begin
  // not emitted yet): if it is a task's outermost coroutine, a step of that
  // task (task_step, before the frame's function_begin).
  __attribute__((cold, noinline)) void begin_task_step(ThreadState &state, const void *frame,
                                                       int transition);
  // The end of a task step's frame (kTaskStep): what the task awaits, or how it ended.
  void end_task_step(const FrameRecord &record, ThreadState &state, int transition,
                     PyObject *value);
  // The end of a task creator's or an executor submit's frame (kAsyncioEnd).
  void end_asyncio_call(const FrameRecord &record, ThreadState &state, int transition,
                        PyObject *value);
  // A coroutine frame without a record ended: a task's coroutine thrown into
  // before it started (cancelled at once) still ends its task.
  void untraced_coroutine_end(ThreadState &state, const void *frame, int transition,
                              PyObject *value);
  void end_import(const FrameRecord &record, const ThreadState &state, int transition);
  Verdict begin_resume(CodeInfo &code, ThreadState &state, const void *frame, int transition);
  // A function record just popped: its counts, and its end event if it has one.
  void end_function_record(CodeInfo &info, uint16_t flags, const ThreadState &state,
                           int transition);
  // After a record's end: with none left open, STANDBY/OFF can switch everything off.
  void reconcile_if_drained() {
    if (__builtin_expect(open_records_ == 0, 0) &&
        mode_.load(std::memory_order_relaxed) < TraceMode::Monitoring) {
      reconcile_events();
    }
  }

  // Never destroyed: at exit, after the interpreter has finalized, a
  // destructor could not release the Python objects the backend holds.
  static Tracer &instance_;

  TracerHooks hooks_;
  std::atomic<TraceMode> mode_{TraceMode::Off};
  // Periods in which starts went uncounted (mode below MONITORING, a
  // debugger's step aside): lexgions()' lower bounds.
  uint64_t blind_periods_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> active_{false};  // read by the control thread without the GIL
  bool failed_ = false;
  bool aside_ = false;  // stepped aside for a debugger
  bool reconciling_ = false;
  uint64_t disable_epoch_ = 1;
  uint32_t requested_events_ = 0;   // kEvent* bits allowed by activate(events=...)
  bool imports_requested_ = false;  // activate(events=[..., "import"])
  // Import events may be emitted: _find_and_load frames take begin_import.
  std::atomic<bool> imports_possible_{false};
  // Allocation sampling is on: every frame gets a shadow-stack record, traced
  // or not, so samples name the innermost Python function.
  std::atomic<bool> shadow_all_{false};
  uint32_t installed_events_ = 0;  // CPythonEvents currently switched on
  bool calls_watched_ = false;     // per-code kCPyCalls on (watch_calls)
  std::unique_ptr<Backend> backend_;

  // Records on all shadow stacks.
  uint64_t open_records_ = 0;
  // Traced generator instances between their first yield and their end.
  GeneratorTable &generators_ = generator_table();
  // What stale records name once their code died (forget_code).
  static CodeInfo forgotten_code_;

  uint64_t events_emitted_ = 0;
  uint64_t windows_ended_ = 0;
  // A window ended with INTROSPECT and its introspection is not over: other
  // ends of the same window (later caps, the timer) add nothing.
  bool introspecting_ = false;
  std::atomic<int> threads_seen_{0};
};

// ---------------------------------------------------------------------------
// Hot paths. Their code shares the 32 KiB L1 instruction cache with the
// interpreter's loop: what a common begin or end does not run is out of line
// (noinline) or in .text.unlikely (cold, __builtin_expect), so that each
// event touches few cache lines (bench/bench_cache.py counts the misses).

inline Verdict Tracer::on_begin(PyObject *code, const void *frame, int transition) {
  TraceMode mode = mode_.load(std::memory_order_relaxed);
  if (__builtin_expect(mode != TraceMode::Tracing, 0)) {
    if (mode == TraceMode::Monitoring && transition == wire::kStart) {
      CodeInfo *info = code_registry::get(code);
      if (info) monitor_start(*info, *thread_states::current());
      return Verdict::Continue;
    }
    // Nothing can begin outside TRACING; PY_THROW cannot be disabled.
    return transition == wire::kThrow ? Verdict::Continue : disable(code);
  }
  CodeInfo *info = code_registry::get(code);
  if (!info) {
    internal_failure("cannot attach state to a code object");
    return Verdict::Continue;
  }
  ThreadState *state = thread_states::current();
  gil_accounting::note_thread(*state, /*at_begin=*/true);
  if (transition == wire::kStart) return begin_start(*info, *state, frame);
  return begin_resume(*info, *state, frame, transition);
}

// A thread's lexgion decided under the current generation implies its code's
// was (decide_thread decides the code first): one compare on the hot path.
inline ThreadLexgion &Tracer::lexgion_of(CodeInfo &code, ThreadState &state) {
  ThreadLexgion &lex = code.for_thread(state.python_thread_id);
  if (__builtin_expect(
          lex.generation != static_cast<uint32_t>(generation_.load(std::memory_order_relaxed)),
          0)) {
    decide_thread(code, lex, state);
  }
  return lex;
}

// Out of line: TRACING's begins share the callbacks' cache lines with it.
__attribute__((noinline)) inline void Tracer::monitor_start(CodeInfo &code, ThreadState &state) {
  code.count_execution();
  ThreadLexgion &lex = lexgion_of(code, state);
  lexgion_execution(TraceMode::Monitoring, lex.events, code.limits, lex.counters);
}

inline Verdict Tracer::begin_start(CodeInfo &code, ThreadState &state, const void *frame) {
  if (__builtin_expect(code.special, 0)) return begin_special(code, state, frame);
  return begin_execution<true>(code, state, frame);
}

// Inlined into the callbacks whatever the compiler's estimate of its size: a
// call here costs as much as several of the steps it makes.
template <bool MayDisable>
inline Verdict Tracer::begin_execution(CodeInfo &code, ThreadState &state, const void *frame) {
  code.count_execution();
  ThreadLexgion &lex = lexgion_of(code, state);
  const LexgionStep step = lexgion_execution(TraceMode::Tracing, lex.events, code.limits,
                                             lex.counters, code.traces_every);
  if (__builtin_expect(!step.traced, 0)) {
    return begin_untraced<MayDisable>(code, state, frame, lex);
  }
  uint8_t flags = lex.start_flags;
  if (__builtin_expect(step.ends_window, 0)) flags |= kEndsWindow;
  uint64_t ticks = emitter::record_ticks();
  state.stack.emplace_back(frame, &code, nullptr, nullptr, 0, RecordKind::Function, flags, ticks);
  ++code.open_records;
  ++open_records_;
  if (flags & kBeginEmitted) {
    code.count_traced();
    ++events_emitted_;
    if (code.generator) {
      state.stack.back().started_ns = lifetime_clock_ns();
      if (code.coroutine) {
        begin_task_step(state, frame, wire::kStart);
        ticks = emitter::record_ticks();  // the record after its task's step, as readers expect
      }
    }
    emitter::function(ticks, true, code, state.python_thread_id, wire::kStart);
  }
  return Verdict::Continue;
}

template <bool MayDisable>
__attribute__((noinline)) Verdict Tracer::begin_untraced(CodeInfo &code, ThreadState &state,
                                                         const void *frame,
                                                         const ThreadLexgion &lex) {
  if (shadow_all_.load(std::memory_order_relaxed)) {
    // Not traced, but allocation samples need to know the frame runs.
    state.stack.emplace_back(frame, &code, nullptr, nullptr, 0, RecordKind::Function, 0);
    ++code.open_records;
    ++open_records_;
    return Verdict::Continue;
  }
  uint8_t why = MayDisable ? never_traced_again(code, lex) : 0;
  if (why) {
    code.begins_disabled_epoch = disable_epoch_;
    code.begins_were_disabled = true;
    return disable(code, why);
  }
  return Verdict::Continue;
}

inline Verdict Tracer::begin_resume(CodeInfo &code, ThreadState &state, const void *frame,
                                    int transition) {
  uint8_t flags = 0;
  if (generators_.empty() || !generators_.resume(frame, &flags)) {
    // Not a traced instance: a resume follows its start's decision. The
    // location may go quiet only while no traced instance of this code is
    // suspended or running (a running one yields and resumes here later).
    if (transition == wire::kResume && code.suspended_traced == 0 && code.open_records == 0 &&
        begins_disabled(code)) {
      return disable(code, code.disabled);
    }
    return Verdict::Continue;
  }
  flags |= kGeneratorEntry;
  uint64_t ticks = emitter::record_ticks();
  state.stack.emplace_back(frame, &code, nullptr, nullptr, 0, RecordKind::Function, flags, ticks);
  ++code.open_records;
  ++open_records_;
  if (flags & kBeginEmitted) {
    ++events_emitted_;
    if (code.coroutine) {
      begin_task_step(state, frame, transition);
      ticks = emitter::record_ticks();  // the record after its task's step
    }
    emitter::function(ticks, true, code, state.python_thread_id, transition);
  }
  return Verdict::Continue;
}

inline void Tracer::end_function_record(CodeInfo &info, uint16_t flags, const ThreadState &state,
                                        int transition) {
  --info.open_records;
  --open_records_;
  if (flags & kEmitEnd) {
    ++events_emitted_;
    emitter::function(emitter::record_ticks(), false, info, state.python_thread_id, transition);
  }
}

// Inline: the end of a plain function's traced frame, most ends; the rest out of line.
__attribute__((always_inline)) inline Verdict Tracer::on_end(PyObject *code, const void *frame,
                                                             int transition, PyObject *value) {
  ThreadState *state = thread_states::current_ptr;
  if (__builtin_expect(state != nullptr && !state->stack.empty() && transition != wire::kYield,
                       1)) {
    const FrameRecord &top = state->stack.back();
    if (__builtin_expect(top.frame == frame && top.kind == RecordKind::Function &&
                             !(top.flags & (kImportEmitted | kEndsWindow | kAsyncioEnd)) &&
                             !top.code->generator,
                         1)) {
      gil_accounting::note_end(*state);
      CodeInfo &info = *top.code;
      const uint16_t flags = top.flags;
      state->stack.pop_back();
      end_function_record(info, flags, *state, transition);
      reconcile_if_drained();
      return Verdict::Continue;
    }
  }
  return on_end_slow(code, frame, transition, value);
}

__attribute__((noinline)) inline Verdict Tracer::on_end_slow(PyObject *code, const void *frame,
                                                             int transition, PyObject *value) {
  ThreadState *state = thread_states::current_ptr;
  if (state && !state->stack.empty()) {
    gil_accounting::note_end(*state);
    if (state->stack.back().frame == frame && state->stack.back().kind == RecordKind::CCall) {
      close_stale_calls(*state, frame);
    }
    if (!state->stack.empty() && state->stack.back().frame == frame) {
      // Copied field by field: its begin stored it so, moments ago, and a
      // whole-record copy would stall on store forwarding.
      const FrameRecord &top = state->stack.back();
      FrameRecord record(top.frame, top.code, top.callable, top.callee_name, top.line, top.kind,
                         top.flags);
      state->stack.pop_back();
      CodeInfo &info = *record.code;
      end_function_record(info, record.flags, *state, transition);
      if (record.flags & kImportEmitted) end_import(record, *state, transition);
      if (record.flags & kTaskStep) end_task_step(record, *state, transition, value);
      if (record.flags & kAsyncioEnd) end_asyncio_call(record, *state, transition, value);
      if (transition == wire::kYield) {
        generators_.suspend(frame, info,
                            static_cast<uint8_t>(record.flags & ~(kGeneratorEntry | kTaskStep)),
                            (record.flags & kGeneratorEntry) ? 0 : record.started_ns);
      } else {
        if (info.generator) generator_ended(record, *state, transition);
        if (record.flags & kEndsWindow) window_ended(info, *state);
      }
      reconcile_if_drained();
      return Verdict::Continue;
    }
  }
  if (state && !state->stack.empty() && state->stack.back().code == &forgotten_code_ &&
      drop_forgotten(*state)) {
    return on_end(code, frame, transition, value);
  }
  // No record: this location may go quiet if no frame of its code can need it.
  CodeInfo *info = code_registry::find(code);
  if (info && info->coroutine && transition != wire::kYield && state &&
      mode_.load(std::memory_order_relaxed) == TraceMode::Tracing) {
    untraced_coroutine_end(*state, frame, transition, value);
  }
  if (transition == wire::kUnwind) return Verdict::Continue;  // cannot be disabled
  if (!info) {
    return mode_.load(std::memory_order_relaxed) == TraceMode::Tracing ? Verdict::Continue
                                                                       : disable(code);
  }
  if (info->open_records == 0 && info->suspended_traced == 0) {
    if (mode_.load(std::memory_order_relaxed) != TraceMode::Tracing) return disable(*info);
    if (begins_disabled(*info)) return disable(*info, info->disabled);
  }
  return Verdict::Continue;
}

template <typename OffsetFn>
inline Verdict Tracer::on_call(PyObject *code, const void *frame, OffsetFn offset,
                               PyObject *callable) {
  if (mode_.load(std::memory_order_relaxed) != TraceMode::Tracing) return disable(code);
  ThreadState *state = thread_states::current_ptr;
  if (!state || state->stack.empty()) return Verdict::Continue;
  gil_accounting::note_thread(*state);
  FrameRecord *top = &state->stack.back();
  if (top->frame != frame) {
    // The caller is not traced: its executions were rate-limited or filtered.
    CodeInfo *info = code_registry::find(code);
    if (info && info->open_records == 0 && begins_disabled(*info)) {
      return disable(*info, info->disabled);
    }
    return Verdict::Continue;
  }
  if (top->kind == RecordKind::CCall) {
    close_stale_calls(*state, frame);
    if (state->stack.empty() || state->stack.back().frame != frame) return Verdict::Continue;
    top = &state->stack.back();
  }
  if (!(top->flags & kTraceCCalls)) return Verdict::Continue;
  callables::NativeCallable native;
  if (!callables::native(callable, &native)) return Verdict::Continue;
  // Naming it met the program's allocation failure: the backend raises it at
  // this call, which then never runs: no record.
  if (py::memory_failed) return Verdict::Continue;
  CodeInfo *caller = top->code;
  uint32_t events = caller->for_thread(state->python_thread_id).events;
  uint8_t flags = 0;
  if (events & kEventCStart) flags |= kBeginEmitted;
  if (events & kEventCReturn) flags |= kEmitEnd;
  const uint64_t ticks = emitter::record_ticks();
  state->stack.emplace_back(frame, caller, native.identity, native.name, caller->line_at(offset()),
                            RecordKind::CCall, flags, ticks);
  ++open_records_;
  if (flags & kBeginEmitted) {
    ++events_emitted_;
    const FrameRecord &call = state->stack.back();
    emitter::c_call(ticks, true, *call.code, call.callee_name, call.line, state->python_thread_id,
                    wire::kCall);
  }
  return Verdict::Continue;
}

inline void Tracer::on_c_end(const void *frame, PyObject *callable, bool raised) {
  ThreadState *state = thread_states::current_ptr;
  if (!state) return;
  gil_accounting::note_thread(*state);
  // Normally the top record is this call. Calls CPython reported no end for
  // (stale) are closed here too, so the stack never keeps them.
  while (!state->stack.empty() && state->stack.back().frame == frame &&
         state->stack.back().kind == RecordKind::CCall) {
    FrameRecord record = state->stack.back();
    state->stack.pop_back();
    --open_records_;
    bool matched = record.callable == callables::end_identity(callable);
    if (record.flags & kEmitEnd) {
      ++events_emitted_;
      emitter::c_call(emitter::record_ticks(), false, *record.code, record.callee_name, record.line,
                      state->python_thread_id, matched && raised ? wire::kCRaise : wire::kCReturn);
    }
    if (matched) break;
  }
  reconcile_if_drained();
}

}  // namespace pinsight
