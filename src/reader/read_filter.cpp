#include "read_filter.h"

#include <algorithm>

#include "common/module_names.h"

namespace pinsight_reader {
namespace {

bool listed(const std::vector<int64_t> &values, int64_t value) {
  return values.empty() || std::find(values.begin(), values.end(), value) != values.end();
}

}  // namespace

bool ReadFilter::pid_selected(int32_t vpid) const { return listed(pids, vpid); }

bool ReadFilter::rank_selected(int32_t rank) const {
  return ranks.empty() || (rank >= 0 && listed(ranks, rank));
}

bool ReadFilter::thread_selected(int32_t vtid) const { return listed(threads, vtid); }

bool ReadFilter::function_visible(const Symbol &symbol, bool main_script) const {
  if (symbol.native) return true;  // native calls follow their caller
  if (ignore_frozen && symbol.origin == CodeOrigin::Frozen) return false;
  if (modules.empty() && excludes.empty()) return true;
  bool selected = pinsight::module_selected(symbol.module, modules, excludes);
  if (main_script) {
    selected = selected || pinsight::module_selected("__main__", modules, excludes);
    // An exclusion of either name wins.
    for (const std::string &entry : excludes) {
      selected = selected && !pinsight::module_matches("__main__", entry) &&
                 !pinsight::module_matches(symbol.module, entry);
    }
  }
  return selected;
}

}  // namespace pinsight_reader
