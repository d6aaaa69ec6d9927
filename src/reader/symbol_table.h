// Interned functions: Python functions (qualname, filename, def line) and
// native callees (callee_name). Memory grows with distinct functions only.
// The one place where the reader turns event strings into names: each symbol
// is resolved once (its module and origin too), then known by its id.
//
// The one place where names are resolved. Full-payload events carry their
// function's qualname and line, their file comes from code_info (earlier
// versions wrote the file in every event: those are read by their strings);
// compact ones carry ids (code_id, callable_id) named by code_info /
// callable_info events of the same process. An id used before its names came
// (the first naming epoch of a trace that started late) gets a symbol named
// after the id, or after the full event's qualname without a file, renamed in
// place when the names arrive, so every frame of the code object stays one
// symbol and begins still match their ends.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

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

  // Compact payload: the names of an id, from code_info / callable_info.
  void name_code(uint16_t host, int32_t vpid, uint64_t code_id, std::string_view qualname,
                 std::string_view filename, int32_t lineno);
  void name_callable(uint16_t host, int32_t vpid, uint64_t callable_id, std::string_view name);
  // As python_function(), caller() and native_function() with the names the
  // ids were given; before any, the id's own symbol: named `qualname` (line
  // `lineno`, no file) where the event named its function (full payload),
  // else "<code 0x...>".
  SymbolId python_function_by_id(uint16_t host, int32_t vpid, uint64_t code_id,
                                 std::string_view qualname = {}, int32_t lineno = -1);
  SymbolId caller_by_id(uint16_t host, int32_t vpid, uint64_t code_id,
                        std::string_view qualname = {});
  SymbolId native_function_by_id(uint16_t host, int32_t vpid, uint64_t callable_id);
  // Symbols renamed since the last call (their names came after their ids).
  std::vector<SymbolId> take_renamed() { return std::exchange(renamed_, {}); }
  // Whether `symbol` is the one python_function_by_id() gives for this code
  // object (matching a native call to the frame that made it).
  bool is_code(SymbolId symbol, uint16_t host, int32_t vpid, uint64_t code_id);

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
  CodeLocation location(bool native, std::string_view filename);
  SymbolId unnamed(bool native, uint64_t id, std::string_view qualname = {}, int32_t lineno = -1);
  void rename(SymbolId id, std::string_view qualname, std::string_view filename, int32_t lineno);

  struct IdKey {
    uint64_t id;
    int32_t vpid;
    uint16_t host;
    bool native;
    bool operator==(const IdKey &o) const {
      return id == o.id && vpid == o.vpid && host == o.host && native == o.native;
    }
  };
  struct IdKeyHash {
    size_t operator()(const IdKey &k) const;
  };
  struct IdNames {
    bool named = false;
    std::string qualname, filename;  // native: the callee's name in qualname
    int32_t lineno = 0;
    // The symbol this id got before it was named: it keeps it (renamed), so
    // frames opened under it still match their ends.
    SymbolId early = kNoSymbol;
  };
  static uint64_t code_key(int32_t vpid, uint64_t code_id);

  std::deque<Symbol> symbols_;  // a deque: keys below point into it
  std::unordered_map<FunctionKey, SymbolId, FunctionKeyHash> functions_;
  std::unordered_map<std::string_view, SymbolId> natives_;
  std::unordered_map<uint64_t, CodeCacheEntry> by_code_;
  std::unordered_map<std::string, CodeLocation> locations_;  // by file name
  std::unordered_map<IdKey, IdNames, IdKeyHash> ids_;
  std::vector<SymbolId> renamed_;
};

}  // namespace pinsight_reader
