// Probes of the configuration parser and of lexgion rate control, on the test
// module (_pinsight_python_testing): _parse_config, _parse_config_string,
// _lexgion_simulate, _lexgion_simulate_detail (tests/unit/test_config_parse.py).
#pragma once

#include <pybind11/pybind11.h>

namespace pinsight {

void register_config_probes(pybind11::module_ &m);

}  // namespace pinsight
