// Python views of a parsed configuration: the dicts of the product's
// check_config() and of the test module's parser probes.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace pinsight {

// pysysmon_* names of the events in `mask`.
pybind11::list event_list(uint32_t mask);
// "file:line: message" of each diagnostic.
std::vector<std::string> messages(const std::vector<ConfigDiagnostic> &diagnostics);
// Every error of `result`, one a line.
std::string error_text(const ParseResult &result);
// The Config of `result`, or ValueError with error_text(result).
const Config &checked(const ParseResult &result);
// The configuration as a dict (mode, events, threads, lexgions, ..., warnings);
// ValueError when `result` has errors.
pybind11::dict config_dict(const ParseResult &result);

}  // namespace pinsight
