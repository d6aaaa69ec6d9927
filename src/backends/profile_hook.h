// The PyEval_SetProfile backend, for CPython without sys.monitoring (< 3.12)
// or on request: the same Tracer hot paths, fed from profile events.
#pragma once

#include <memory>

#include "tracer/backend.h"

namespace pinsight {
std::unique_ptr<Backend> make_profile_backend();
}
