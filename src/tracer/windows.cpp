#include "tracer/tracer.h"

// The tracer's TRACING windows (PInsight's window_end_trigger, window_end_action,
// window_timeout, INTROSPECT's cyclic windows): the gates a thread counts under
// window_end_trigger = all, the end of a window and what it does, a new window.

namespace pinsight {

void Tracer::count_window_gate(CodeInfo &code, ThreadLexgion &lex, ThreadState &state) {
  if (lex.uncapped_gate()) --code.uncapped_gates;
  lex.window_gate = 0;
  // A gate is a lexgion this thread may trace, up to a cap: the lexgions it
  // never traces (no events for it, its module left out) could never cap.
  if (code.limits.window_end_trigger != WindowEndTrigger::All || code.limits.max_num_traces < 0 ||
      lex.events == 0) {
    return;
  }
  WindowGates &gates = state.window_gates;
  if (gates.generation != lex.generation) gates = WindowGates{0, 0, lex.generation};
  ++gates.seen;
  lex.window_gate = kGateSeen;
  // Counters carry over reloads: a cap of 5 reached before stays reached.
  if (lexgion_exhausted(code.limits, lex.counters)) {
    ++gates.capped;
    lex.window_gate |= kGateCapped;
  } else {
    ++code.uncapped_gates;
  }
}

void Tracer::uncount_window_gates(CodeInfo &code) {
  code.for_each_thread([&code](int python_thread_id, ThreadLexgion &lex) {
    if (!lex.uncapped_gate()) return;
    lex.window_gate = 0;
    --code.uncapped_gates;
    thread_states::with_thread(python_thread_id, [&lex](ThreadState &state) {
      WindowGates &gates = state.window_gates;
      if (gates.generation == lex.generation && gates.seen > 0) --gates.seen;
    });
  });
}

void Tracer::end_window(const WindowEndAction &action, const char *reason) {
  const bool introspect = action.introspect && hooks_.introspect;
  if (introspect && introspecting_) return;  // this window's introspection is under way
  ++windows_ended_;
  if (introspect) {
    introspecting_ = true;
    hooks_.introspect(action);
    return;
  }
  if (action.has_python_mode && action.python_mode != mode()) {
    set_mode(action.python_mode, reason);
  }
}

void Tracer::end_introspection(const WindowEndAction &action) {
  introspecting_ = false;
  if (!active_ || !action.has_python_mode) return;
  if (action.python_mode == TraceMode::Tracing) start_window_cycle();
  if (action.python_mode == mode()) {
    // Marked all the same: the trace shows where the pause ended.
    emitter::mode_change(trace_mode_name(action.python_mode), "introspect", generation_.load());
  } else {
    set_mode(action.python_mode, "introspect");
  }
}

void Tracer::start_window_cycle() {
  // PInsight resets trace_counter alone: trace_starts_at and tracing_rate go
  // on counting executions. Each lexgion is decided again, so that the window
  // gates count anew.
  for (CodeInfo *info = code_registry::first(); info; info = info->next) {
    info->for_each_thread([](int, ThreadLexgion &lex) {
      lex.counters.trace_counter = 0;
      lex.window_gate = 0;
      lex.generation = UINT32_MAX;
    });
    info->uncapped_gates = 0;
  }
  thread_states::for_each([](ThreadState &state) { state.window_gates = WindowGates{}; });
  rearm(/*per_thread_only=*/false);  // the capped functions' begins were disabled
}

void Tracer::window_ended(CodeInfo &code, ThreadState &state) {
  if (code.limits.window_end_trigger == WindowEndTrigger::All) {
    // PInsight's `all`: this thread's last lexgion with a cap to reach it ends
    // the window; before that, a cap only counts.
    ThreadLexgion &lex = code.for_thread(state.python_thread_id);
    WindowGates &gates = state.window_gates;
    if (lex.generation != gates.generation) return;  // capped under an earlier configuration
    if (lex.uncapped_gate()) {
      lex.window_gate |= kGateCapped;
      ++gates.capped;
      --code.uncapped_gates;
    }
    if (gates.capped < gates.seen) return;
  }
  end_window(code.limits.window_end, "window_end_action");
}

void Tracer::window_timed_out(const WindowEndAction &action) {
  if (!active_ || mode() != TraceMode::Tracing) return;  // no TRACING window to end
  end_window(action, "window_timeout");
}

}  // namespace pinsight
