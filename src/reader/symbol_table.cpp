#include "symbol_table.h"

#include <functional>

namespace pinsight_reader {

size_t SymbolTable::FunctionKeyHash::operator()(const FunctionKey &k) const {
  std::hash<std::string_view> h;
  size_t seed = h(k.qualname);
  seed ^= h(k.filename) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
  seed ^= static_cast<size_t>(k.lineno) * 0xff51afd7ed558ccdULL;
  return seed;
}

uint64_t SymbolTable::code_key(int32_t vpid, uint64_t code_id) {
  return code_id ^ (static_cast<uint64_t>(static_cast<uint32_t>(vpid)) * 0x9e3779b97f4a7c15ULL);
}

SymbolId SymbolTable::intern(bool native, std::string_view qualname, std::string_view filename,
                             int32_t lineno) {
  auto id = static_cast<SymbolId>(symbols_.size());
  CodeLocation location{"", CodeOrigin::Native};
  if (!native) {
    auto found = locations_.find(std::string(filename));
    if (found == locations_.end()) {
      found = locations_.emplace(std::string(filename), locate_code(filename)).first;
    }
    location = found->second;
  }
  symbols_.push_back(Symbol{native, std::string(qualname), std::string(filename), lineno,
                            std::move(location.module), location.origin});
  const Symbol &s = symbols_.back();
  if (native) {
    natives_.emplace(s.qualname, id);
  } else {
    functions_.emplace(FunctionKey{s.qualname, s.filename, s.lineno}, id);
  }
  return id;
}

SymbolId SymbolTable::python_function(int32_t vpid, uint64_t code_id, std::string_view qualname,
                                      std::string_view filename, int32_t lineno) {
  // Code objects can be freed and their address reused: the cache entry is
  // only trusted when the strings match too.
  CodeCacheEntry &cached = by_code_[code_key(vpid, code_id)];
  if (cached.code_id == code_id && cached.vpid == vpid && cached.symbol != kNoSymbol) {
    const Symbol &s = symbols_[cached.symbol];
    if (s.lineno == lineno && s.qualname == qualname && s.filename == filename) {
      return cached.symbol;
    }
  }
  SymbolId id;
  auto it = functions_.find(FunctionKey{qualname, filename, lineno});
  id = it != functions_.end() ? it->second : intern(false, qualname, filename, lineno);
  cached = CodeCacheEntry{vpid, code_id, id};
  return id;
}

SymbolId SymbolTable::caller(int32_t vpid, uint64_t code_id, std::string_view qualname,
                             std::string_view filename) {
  auto cached = by_code_.find(code_key(vpid, code_id));
  if (cached != by_code_.end() && cached->second.code_id == code_id &&
      cached->second.vpid == vpid && cached->second.symbol != kNoSymbol) {
    const Symbol &s = symbols_[cached->second.symbol];
    if (s.qualname == qualname && s.filename == filename) return cached->second.symbol;
  }
  auto it = functions_.find(FunctionKey{qualname, filename, -1});
  return it != functions_.end() ? it->second : intern(false, qualname, filename, -1);
}

SymbolId SymbolTable::native_function(std::string_view name) {
  auto it = natives_.find(name);
  return it != natives_.end() ? it->second : intern(true, name, {}, 0);
}

}  // namespace pinsight_reader
