#include "config/lexgion.h"

namespace pinsight {

bool lexgion_begin(const LexgionSettings &settings, LexgionCounters &counters) {
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

void lexgion_count(LexgionCounters &counters) {
  ++counters.counter;
  ++counters.num_exes_after_last_trace;
}

bool lexgion_exhausted(const LexgionSettings &settings, const LexgionCounters &counters) {
  return settings.max_num_traces >= 0 && counters.trace_counter >= settings.max_num_traces;
}

bool lexgion_window_ended(const LexgionSettings &settings, const LexgionCounters &counters) {
  // num_exes_after_last_trace is zero only right after a traced execution.
  return settings.max_num_traces > 0 && counters.trace_counter == settings.max_num_traces &&
         counters.counter > 0 && counters.num_exes_after_last_trace == 0;
}

}  // namespace pinsight
