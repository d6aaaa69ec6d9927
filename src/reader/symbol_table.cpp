#include "symbol_table.h"

#include <cinttypes>
#include <cstdio>
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

CodeLocation SymbolTable::location(bool native, std::string_view filename) {
  if (native) return CodeLocation{"", CodeOrigin::Native};
  auto found = locations_.find(std::string(filename));
  if (found == locations_.end()) {
    found = locations_.emplace(std::string(filename), locate_code(filename)).first;
  }
  return found->second;
}

SymbolId SymbolTable::intern(bool native, std::string_view qualname, std::string_view filename,
                             int32_t lineno) {
  auto id = static_cast<SymbolId>(symbols_.size());
  CodeLocation where = location(native, filename);
  symbols_.push_back(Symbol{native, std::string(qualname), std::string(filename), lineno,
                            std::move(where.module), where.origin});
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

// ---------------------------------------------------------------------------
// Compact payload: names by id.

size_t SymbolTable::IdKeyHash::operator()(const IdKey &k) const {
  uint64_t h = k.id ^ (static_cast<uint64_t>(static_cast<uint32_t>(k.vpid)) << 32 |
                       static_cast<uint64_t>(k.host) << 1 | static_cast<uint64_t>(k.native));
  return static_cast<size_t>(h * 0x9e3779b97f4a7c15ULL);
}

SymbolId SymbolTable::unnamed(bool native, uint64_t id, std::string_view qualname, int32_t lineno) {
  // Outside the name maps: another process's id of the same value is
  // another function.
  char text[40];
  std::snprintf(text, sizeof text, native ? "<callable 0x%" PRIx64 ">" : "<code 0x%" PRIx64 ">",
                id);
  auto symbol = static_cast<SymbolId>(symbols_.size());
  CodeLocation where = location(native, {});
  symbols_.push_back(Symbol{native, qualname.empty() ? std::string(text) : std::string(qualname),
                            std::string(), native ? 0 : lineno, std::move(where.module),
                            where.origin});
  return symbol;
}

void SymbolTable::rename(SymbolId id, std::string_view qualname, std::string_view filename,
                         int32_t lineno) {
  Symbol &s = symbols_[id];
  s.qualname = qualname;
  s.filename = filename;
  s.lineno = lineno;
  CodeLocation where = location(s.native, filename);
  s.module = std::move(where.module);
  s.origin = where.origin;
  renamed_.push_back(id);
  // Found by name from now on too, unless the name already has a symbol.
  if (s.native) {
    natives_.emplace(s.qualname, id);
  } else {
    functions_.emplace(FunctionKey{s.qualname, s.filename, s.lineno}, id);
  }
}

void SymbolTable::name_code(uint16_t host, int32_t vpid, uint64_t code_id,
                            std::string_view qualname, std::string_view filename, int32_t lineno) {
  IdNames &names = ids_[IdKey{code_id, vpid, host, false}];
  if (names.named) {
    if (names.qualname == qualname && names.filename == filename && names.lineno == lineno) return;
    names.early = kNoSymbol;  // the address now holds another code object
  }
  names.named = true;
  names.qualname = qualname;
  names.filename = filename;
  names.lineno = lineno;
  if (names.early != kNoSymbol) rename(names.early, qualname, filename, lineno);
}

void SymbolTable::name_callable(uint16_t host, int32_t vpid, uint64_t callable_id,
                                std::string_view name) {
  IdNames &names = ids_[IdKey{callable_id, vpid, host, true}];
  if (names.named) return;  // callable names never change (interned by the tracer)
  names.named = true;
  names.qualname = name;
  if (names.early != kNoSymbol) rename(names.early, name, {}, 0);
}

SymbolId SymbolTable::python_function_by_id(uint16_t host, int32_t vpid, uint64_t code_id,
                                            std::string_view qualname, int32_t lineno) {
  IdNames &names = ids_[IdKey{code_id, vpid, host, false}];
  if (names.early != kNoSymbol) return names.early;
  if (names.named) {
    return python_function(vpid, code_id, names.qualname, names.filename, names.lineno);
  }
  return names.early = unnamed(false, code_id, qualname, lineno);
}

SymbolId SymbolTable::caller_by_id(uint16_t host, int32_t vpid, uint64_t code_id,
                                   std::string_view qualname) {
  IdNames &names = ids_[IdKey{code_id, vpid, host, false}];
  if (names.early != kNoSymbol) return names.early;
  if (names.named) return caller(vpid, code_id, names.qualname, names.filename);
  return names.early = unnamed(false, code_id, qualname, -1);
}

SymbolId SymbolTable::native_function_by_id(uint16_t host, int32_t vpid, uint64_t callable_id) {
  IdNames &names = ids_[IdKey{callable_id, vpid, host, true}];
  if (names.early != kNoSymbol) return names.early;
  if (names.named) return native_function(names.qualname);
  return names.early = unnamed(true, callable_id);
}

bool SymbolTable::is_code(SymbolId symbol, uint16_t host, int32_t vpid, uint64_t code_id) {
  auto it = ids_.find(IdKey{code_id, vpid, host, false});
  if (it == ids_.end()) return false;
  const IdNames &names = it->second;
  if (names.early != kNoSymbol) return symbol == names.early;
  if (!names.named) return false;
  const Symbol &s = symbols_[symbol];
  return !s.native && s.qualname == names.qualname && s.filename == names.filename;
}

}  // namespace pinsight_reader
