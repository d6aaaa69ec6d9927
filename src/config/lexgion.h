// Lexgion rate control: PInsight's arithmetic, pure and unit-testable.
//
// What PInsight does (src/pinsight.c lexgion_begin and
// lexgion_set_top_trace_bit_domain_event, src/pinsight.h
// lexgion_post_trace_update), which these functions reproduce:
//  - A lexgion is one code object on one thread: every Python thread has its
//    own counters ("max_num_traces = 5" on 4 threads gives up to 20 traces).
//  - At each execution (function start) `counter` and
//    `num_exes_after_last_trace` are incremented first, then the execution is
//    traced when
//        trace_starts_at <= counter - 1           (counter-1: 0-based index)
//        && (max_num_traces == -1 || trace_counter < max_num_traces)
//        && num_exes_after_last_trace >= tracing_rate
//  - A traced execution increments `trace_counter` and zeroes
//    `num_exes_after_last_trace`.
// So with rate R the 0-based executions max(trace_starts_at, R-1), then every
// R-th after it, are traced: rate 10 over 100 calls traces 9, 19, ..., 99.
//
// One deliberate difference: PInsight does the trace bookkeeping at the
// function's end, so a recursive call that starts before the traced outer
// call returns is judged against stale counters and max_num_traces can be
// exceeded. Here it is done at the start, so max_num_traces is a hard cap; for
// non-overlapping executions the results are identical.
//
// The hot path, per function start of a code object on a thread, is
// lexgion_execution() below, with mask = config.events_for(settings,
// python_thread_id) (cached per thread):
//   mode OFF/STANDBY: nothing.  MONITORING: lexgion_count().  TRACING:
//   traced = lexgion_begin(); window_ended = lexgion_window_ended()
// When mask is 0 nothing is counted (the thread never traces this lexgion).
// PInsight applies window_end_action at the end of the execution that reached
// max_num_traces, so that execution's function_end is still emitted.
// The tracer (tracer.h) and the _lexgion_simulate test binding both call
// lexgion_execution(), so the simulation cannot drift from the hot path.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace pinsight {

// Counters of one lexgion on one thread. PInsight keeps them across config
// reloads (a lexgion traced 5 times under max 5 gets 5 more under max 10).
struct LexgionCounters {
  int64_t counter = 0;                    // executions seen
  int64_t trace_counter = 0;              // executions traced
  int64_t num_exes_after_last_trace = 0;  // executions since the last traced one
};

// Called once per execution (a function begin) in TRACING mode. Counts it and
// says whether it is traced: trace_starts_at <= counter-1, trace_counter <
// max_num_traces (unless -1) and num_exes_after_last_trace >= tracing_rate.
// Inline, as the two below: every traced begin runs them.
inline bool lexgion_begin(const LexgionSettings &settings, LexgionCounters &counters) {
  ++counters.counter;
  ++counters.num_exes_after_last_trace;
  const bool under_cap =
      settings.max_num_traces < 0 || counters.trace_counter < settings.max_num_traces;
  const bool traced = settings.trace_starts_at <= counters.counter - 1 && under_cap &&
                      counters.num_exes_after_last_trace >= settings.tracing_rate;
  if (traced) {
    ++counters.trace_counter;
    counters.num_exes_after_last_trace = 0;
  }
  return traced;
}

// MONITORING mode: PInsight still counts executions (they move
// trace_starts_at and tracing_rate along) but decides nothing.
inline void lexgion_count(LexgionCounters &counters) {
  ++counters.counter;
  ++counters.num_exes_after_last_trace;
}

// True once no later execution can be traced under these settings: exactly
// when max_num_traces >= 0 and trace_counter has reached it (trace_starts_at
// and tracing_rate only delay). Counters are per thread, so this says nothing
// about other threads; see LexgionSettings::never_traced for all of them.
bool lexgion_exhausted(const LexgionSettings &settings, const LexgionCounters &counters);

// True right after the lexgion_begin that traced the last execution allowed
// (trace_counter reached max_num_traces > 0): the window ends and
// window_end_action applies. False on every other call.
inline bool lexgion_window_ended(const LexgionSettings &settings, const LexgionCounters &counters) {
  // num_exes_after_last_trace is zero only right after a traced execution.
  return settings.max_num_traces > 0 && counters.trace_counter == settings.max_num_traces &&
         counters.counter > 0 && counters.num_exes_after_last_trace == 0;
}

// Settings under which lexgion_begin traces every execution (PInsight's
// defaults: from the first, at rate 1, no cap): trace_starts_at <= counter-1,
// no cap and num_exes_after_last_trace >= 1 >= tracing_rate always hold.
inline bool lexgion_traces_every(const LexgionSettings &settings) {
  return settings.trace_starts_at <= 0 && settings.max_num_traces < 0 && settings.tracing_rate <= 1;
}

// What one execution (a function start) of a lexgion on a thread does.
struct LexgionStep {
  bool traced = false;       // emit this execution (TRACING only)
  bool ends_window = false;  // window_end_action applies after this execution
};

// TRACING's step under rate control (out of line: most code objects trace
// every execution, and the callbacks' cache lines are the hot path's).
LexgionStep lexgion_rate_step(const LexgionSettings &settings, LexgionCounters &counters);

// The one rate-control decision, for the mode in force and the events the
// thread may emit for this lexgion: MONITORING counts the execution (so a
// later TRACING honours trace_starts_at and tracing_rate), TRACING counts and
// decides, OFF and STANDBY do nothing. traces_every: lexgion_traces_every(settings),
// computed once per code object, so the common TRACING step reads no settings.
inline LexgionStep lexgion_execution(TraceMode mode, uint32_t events,
                                     const LexgionSettings &settings, LexgionCounters &counters,
                                     bool traces_every = false) {
  LexgionStep step;
  if (events == 0 || mode < TraceMode::Monitoring) return step;
  if (mode == TraceMode::Monitoring) {
    lexgion_count(counters);
    return step;
  }
  if (__builtin_expect(traces_every, 1)) {
    // lexgion_begin's counts when it traces; no window can end.
    ++counters.counter;
    ++counters.trace_counter;
    counters.num_exes_after_last_trace = 0;
    step.traced = true;
    return step;
  }
  return lexgion_rate_step(settings, counters);
}

}  // namespace pinsight
