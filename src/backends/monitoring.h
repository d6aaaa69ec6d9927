// The sys.monitoring backend (CPython >= 3.12): METH_FASTCALL callbacks
// registered from one static event table under a free tool id.
#pragma once

#include <memory>

#include "tracer/backend.h"

namespace pinsight {
std::unique_ptr<Backend> make_monitoring_backend();  // throws ActivationError before 3.12
}
