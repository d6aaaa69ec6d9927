// Where a Python function's code comes from, derived from its file name
// (the trace carries file names, not module names): the module it belongs
// to, as its `__name__` would say, and whether it is the program's own code,
// an installed library, the standard library or importlib's frozen modules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pinsight_reader {

enum class CodeOrigin : uint8_t {
  Program,  // the user's own files
  Library,  // site-packages / dist-packages
  Stdlib,   // the interpreter's lib/pythonX.Y
  Frozen,   // <frozen importlib._bootstrap> and the like
  Native,   // a native callee
  Unknown,  // <string>, <stdin>, ...
};

const char *origin_name(CodeOrigin origin);

struct CodeLocation {
  std::string module;  // dotted name; empty when unknown
  CodeOrigin origin;
};

// Installed and standard-library modules are named from their path under
// site-packages or lib/pythonX.Y; a program's file by its name, prefixed by
// the packages (directories with an __init__.py) that hold it, when the file
// is on this machine.
CodeLocation locate_code(std::string_view filename);

}  // namespace pinsight_reader
