// Interned functions: Python functions (qualname, filename, def line) and
// native callees (callee_name). Memory grows with distinct functions only.
// The one place where the reader turns event strings into names: each symbol
// is resolved once (its module and origin too), then known by its id.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "code_location.h"

namespace pinsight_reader {

using SymbolId = uint32_t;
inline constexpr SymbolId kNoSymbol = UINT32_MAX;

struct Symbol {
  bool native;
  std::string qualname;  // native: callee_name
  std::string filename;  // native: empty
  int32_t lineno;        // native: 0; Python, seen only as a caller: -1
  std::string module;    // Python: from the file name (code_location.h); native: empty
  CodeOrigin origin;
};

class SymbolTable {
 public:
  // A Python function. code_id (unique per live code object in a process)
  // lets repeated lookups skip hashing the strings.
  SymbolId python_function(int32_t vpid, uint64_t code_id, std::string_view qualname,
                           std::string_view filename, int32_t lineno);
  // The Python function that runs code object `code_id` of `vpid`, as far as
  // a function_begin told; otherwise a symbol without its definition line.
  SymbolId caller(int32_t vpid, uint64_t code_id, std::string_view qualname,
                  std::string_view filename);
  SymbolId native_function(std::string_view name);

  const Symbol &operator[](SymbolId id) const { return symbols_[id]; }
  size_t size() const { return symbols_.size(); }

 private:
  struct FunctionKey {
    std::string_view qualname;
    std::string_view filename;
    int32_t lineno;
    bool operator==(const FunctionKey &o) const {
      return lineno == o.lineno && qualname == o.qualname && filename == o.filename;
    }
  };
  struct FunctionKeyHash {
    size_t operator()(const FunctionKey &k) const;
  };
  struct CodeCacheEntry {
    int32_t vpid = 0;
    uint64_t code_id = 0;
    SymbolId symbol = kNoSymbol;
  };

  SymbolId intern(bool native, std::string_view qualname, std::string_view filename,
                  int32_t lineno);
  static uint64_t code_key(int32_t vpid, uint64_t code_id);

  std::deque<Symbol> symbols_;  // a deque: keys below point into it
  std::unordered_map<FunctionKey, SymbolId, FunctionKeyHash> functions_;
  std::unordered_map<std::string_view, SymbolId> natives_;
  std::unordered_map<uint64_t, CodeCacheEntry> by_code_;
  std::unordered_map<std::string, CodeLocation> locations_;  // by file name
};

}  // namespace pinsight_reader
