// Test and debug functions of the configuration parser on the compiled module:
// _parse_config, _parse_config_string, _lexgion_simulate,
// _lexgion_simulate_detail (tests/test_config_parse.py uses them).
#pragma once

#include <pybind11/pybind11.h>

namespace pinsight {

void register_config_bindings(pybind11::module_ &m);

}  // namespace pinsight
