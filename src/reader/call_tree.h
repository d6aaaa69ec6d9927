// Per-thread calling-context tree: one node per distinct call path, holding
// the self time spent there. It is what folded stacks and flame graphs are
// made of; it grows with distinct call paths, not with events.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "symbol_table.h"

namespace pinsight_reader {

struct CallTreeNode {
  uint32_t parent;
  SymbolId symbol;
  uint64_t self_ns = 0;
  uint64_t calls = 0;
};

class CallTree {
 public:
  static constexpr uint32_t kRoot = 0;

  CallTree() { nodes_.push_back(CallTreeNode{kRoot, kNoSymbol}); }

  uint32_t child(uint32_t parent, SymbolId symbol) {
    uint64_t key = (static_cast<uint64_t>(parent) << 32) | symbol;
    auto [it, inserted] = children_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
    if (inserted) nodes_.push_back(CallTreeNode{parent, symbol});
    return it->second;
  }

  CallTreeNode &operator[](uint32_t node) { return nodes_[node]; }
  const std::vector<CallTreeNode> &nodes() const { return nodes_; }

 private:
  std::vector<CallTreeNode> nodes_;  // parents come before their children
  std::unordered_map<uint64_t, uint32_t> children_;
};

}  // namespace pinsight_reader
