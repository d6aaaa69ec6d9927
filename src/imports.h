// Import events: a module actually loaded is a frame of importlib's
// _find_and_load (CPython calls it only for a name not in sys.modules); its
// start and end, seen by either backend, become import_begin / import_end.
// Nothing of the program changes: builtins.__import__ is never wrapped.
#pragma once

#include "config.h"

namespace pinsight::imports {

// Import events are named by `config` (domain events, a thread section, the
// Python lexgion default): events = import or pysysmon_import = on.
bool named_by(const Config &config);

}  // namespace pinsight::imports
