// Module names as the configuration's module_filter / module_exclude select
// them: one rule, shared by the configuration (config/config.cpp) and the trace reader
// (src/reader), so `pinsight-python report --module X` means what
// `module_filter = X` means.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pinsight {

// `entry` selects the module of that name and its submodules: numpy matches
// numpy and numpy.linalg, not numpyx.
inline bool module_matches(std::string_view module, std::string_view entry) {
  return module == entry ||
         (module.size() > entry.size() && module.substr(0, entry.size()) == entry &&
          module[entry.size()] == '.');
}

// An empty `filter` selects every module; `exclude` wins over `filter`.
inline bool module_selected(std::string_view module, const std::vector<std::string> &filter,
                            const std::vector<std::string> &exclude) {
  bool selected = filter.empty();
  for (const std::string &entry : filter) selected = selected || module_matches(module, entry);
  for (const std::string &entry : exclude) selected = selected && !module_matches(module, entry);
  return selected;
}

}  // namespace pinsight
