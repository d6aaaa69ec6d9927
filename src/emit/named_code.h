// What the emitter writes of a code object: its identity and names, and the
// naming epoch in which its code_info last went out (every payload). The
// tracer's per-code state (tracer/code_info.h) is one.
#pragma once

#include <cstdint>
#include <string>

#include "common/compat.h"

namespace pinsight {

// The two fields every record reads come first: the tracer's per-code state
// puts its hot fields right after them (tracer/code_info.h).
struct NamedCode {
  PyObject *code = nullptr;  // borrowed: the identity written as code_id
  uint32_t named_epoch = 0;  // 0: never named
  int lineno = 0;
  std::string qualname;
  std::string filename;
};

}  // namespace pinsight
