#include "config/lexgion.h"

namespace pinsight {

bool lexgion_exhausted(const LexgionSettings &settings, const LexgionCounters &counters) {
  return settings.max_num_traces >= 0 && counters.trace_counter >= settings.max_num_traces;
}

}  // namespace pinsight
