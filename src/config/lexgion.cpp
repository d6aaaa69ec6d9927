#include "config/lexgion.h"

namespace pinsight {

LexgionStep lexgion_rate_step(const LexgionSettings &settings, LexgionCounters &counters) {
  LexgionStep step;
  step.traced = lexgion_begin(settings, counters);
  step.ends_window = step.traced && lexgion_window_ended(settings, counters);
  return step;
}

bool lexgion_exhausted(const LexgionSettings &settings, const LexgionCounters &counters) {
  return settings.max_num_traces >= 0 && counters.trace_counter >= settings.max_num_traces;
}

}  // namespace pinsight
