// Chooses the CPython event source by name, for activation.
#pragma once

#include <memory>
#include <string>

#include "tracer/backend.h"

namespace pinsight {

// The backend for `name` (a name of common/settings.h's kBackendNames); throws
// ActivationError when it is not available on this CPython.
std::unique_ptr<Backend> make_backend(const std::string &name);

}  // namespace pinsight
