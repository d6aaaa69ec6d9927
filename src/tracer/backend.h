// The interface between the tracer and a CPython event source. The sources
// live a layer above (src/backends: sys.monitoring, PyEval_SetProfile); the
// tracer drives whichever activation gave it through this interface only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/compat.h"
#include "common/errors.h"  // ActivationError

namespace pinsight {

// Groups of CPython events a backend switches on.
enum CPythonEvents : uint32_t {
  kCPyBegins = 1u << 0,  // PY_START, PY_RESUME, PY_THROW
  kCPyEnds = 1u << 1,    // PY_RETURN, PY_YIELD, PY_UNWIND
  kCPyCalls = 1u << 2,   // CALL, C_RETURN, C_RAISE
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  // Each may throw ActivationError.
  virtual void install() = 0;
  virtual void set_events(uint32_t cpython_events) = 0;
  // Whether kCPyCalls is per code object (watch_calls) rather than global.
  virtual bool calls_per_code() const { return false; }
  // kCPyCalls for one code object (calls_per_code() backends); may throw.
  virtual void watch_calls(PyObject * /*code*/, bool /*on*/) {}
  struct RearmedCode {
    PyObject *code;
    bool calls_watched;  // its kCPyCalls, kept through the re-arm
  };
  // Re-enables the locations of these code objects that returned DISABLE to
  // us, leaving every other tool's DISABLEd locations as they are (never
  // sys.monitoring.restart_events(), which re-arms them all).
  virtual void rearm(const std::vector<RearmedCode> &codes) = 0;
  virtual void uninstall() = 0;
  virtual int tool_id() const { return -1; }
};

}  // namespace pinsight
