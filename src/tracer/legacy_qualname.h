// Qualified names for code objects of CPython < 3.11, which carry only
// co_name: the name the compiler gave the function (PEP 3155), such as
// "Solver.step" or "run.<locals>.worker", so that traces, rules and reports
// read the same on every version.
#pragma once

#include <string>

#include "common/compat.h"

namespace pinsight::legacy_qualname {

// `globals` (borrowed, may be null for the running frame's) are those the
// code runs with. Falls back to co_name when nothing names the code.
std::string resolve(PyCodeObject *code, PyObject *globals);

// Drops what resolve() keeps (deactivate).
void clear();

}  // namespace pinsight::legacy_qualname
