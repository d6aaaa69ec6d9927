#include "resource_events.h"

#include <algorithm>
#include <utility>

#include "call_tree.h"
#include "replay_state.h"

namespace pinsight_reader {
namespace {

// Import frames are symbols of this pseudo-file: the report tells them apart.
constexpr std::string_view kImportFile = "<import>";
constexpr std::string_view kNoPythonFrame = "<no Python frame>";

}  // namespace

SymbolId import_symbol(SymbolTable &symbols, const RawEvent &e, const EventBatch &batch) {
  return symbols.python_function(e.vpid, 0, batch.string(e.str[0]), kImportFile, 0);
}

void import_begun(ThreadState &t, SymbolId symbol, uint64_t ts) {
  t.imports.push_back(ImportFrame{symbol, ts, 0, 0, {}});
}

void import_ended(ThreadState &t, SymbolId symbol, uint64_t ts, bool raised) {
  // Imports whose end was lost (discarded events) close with the outer one.
  size_t depth = t.imports.size();
  while (depth > 0 && t.imports[depth - 1].symbol != symbol) --depth;
  if (depth == 0) return;  // the begin is not in the trace
  while (t.imports.size() >= depth) {
    ImportFrame frame = std::move(t.imports.back());
    t.imports.pop_back();
    bool this_one = t.imports.size() + 1 == depth;
    uint64_t ns = ts > frame.start_ns ? ts - frame.start_ns : 0;
    ImportStats &stats = t.import_stats[frame.symbol];
    ++stats.loads;
    stats.cumulative_ns += ns;
    stats.self_ns += ns > frame.nested_ns ? ns - frame.nested_ns : 0;
    if (this_one && raised) ++stats.raised;
    std::vector<SymbolId> chain;
    chain.reserve(frame.heaviest.size() + 1);
    chain.push_back(frame.symbol);
    chain.insert(chain.end(), frame.heaviest.begin(), frame.heaviest.end());
    if (!t.imports.empty()) {
      ImportFrame &parent = t.imports.back();
      parent.nested_ns += ns;
      if (ns >= parent.heaviest_ns) {
        parent.heaviest_ns = ns;
        parent.heaviest = std::move(chain);
      }
    } else {
      t.import_chains.push_back(ImportChain{ns, std::move(chain), this_one && raised});
    }
  }
}

SymbolId alloc_symbol(SymbolTable &symbols, const RawEvent &e, const EventBatch &batch) {
  std::string_view qualname = batch.string(e.str[0]);
  return qualname.empty() || qualname == kNoPythonFrame
             ? symbols.python_function(e.vpid, 0, kNoPythonFrame, {}, 0)
             : symbols.python_function(e.vpid, 0, qualname, batch.string(e.str[1]), e.lineno);
}

void alloc_sampled(ProcessState &p, ThreadState &t, SymbolId symbol, const RawEvent &e,
                   bool call_trees) {
  AllocStats &stats = p.allocations[symbol];
  ++stats.samples;
  stats.sampled_bytes += e.extra;
  stats.retained_bytes += e.extra;
  if (e.transition == kNative) stats.native_bytes += e.extra;
  auto [it, inserted] = p.live_samples.try_emplace(e.code_id, symbol, e.extra);
  p.live_sampled_bytes += e.extra;
  if (!inserted) {
    // The address was sampled before and its free not seen: that block is gone.
    AllocStats &old = p.allocations[it->second.first];
    old.retained_bytes -= std::min(old.retained_bytes, it->second.second);
    p.live_sampled_bytes -= it->second.second;
    it->second = {symbol, e.extra};
  }
  if (call_trees) {
    // The call path the allocation happened in, as far as function events tell.
    uint32_t node;
    if (!t.stack.empty() && t.stack.back().symbol == symbol) {
      node = t.stack.back().node;
    } else {
      node = t.tree.child(t.stack.empty() ? CallTree::kRoot : t.stack.back().node, symbol);
    }
    t.alloc_nodes[node] += e.extra;
  }
}

bool free_sampled(ProcessState &p, uint64_t address) {
  auto it = p.live_samples.find(address);
  if (it == p.live_samples.end()) return false;
  AllocStats &stats = p.allocations[it->second.first];
  stats.retained_bytes -= std::min(stats.retained_bytes, it->second.second);
  p.live_sampled_bytes -= it->second.second;
  p.live_samples.erase(it);
  return true;
}

}  // namespace pinsight_reader
