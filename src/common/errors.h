// The error every layer may raise when tracing cannot start or go on (no free
// sys.monitoring tool id, an unverified CPython): the backends and the tracer
// throw it, activation lets it through, the bindings turn it into
// pinsight_python.ActivationError. Here, below them all, so that the bindings
// see it without seeing the tracer.
#pragma once

#include <stdexcept>

namespace pinsight {

struct ActivationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace pinsight
