// Imports and sampled allocations: import frames nest on the thread's stack
// like functions (flame graphs and the Chrome export show them), with their
// own per-module statistics and chains; allocation samples are credited to
// the function they name and to the thread's current call path.
#include "call_stack_analyzer.h"

namespace pinsight_reader {
namespace {

// Import frames are symbols of this pseudo-file: the report tells them apart.
constexpr std::string_view kImportFile = "<import>";
constexpr std::string_view kNoPythonFrame = "<no Python frame>";

}  // namespace

void CallStackAnalyzer::on_import_begin(ThreadState &t, const RawEvent &e,
                                        const EventBatch &batch) {
  SymbolId symbol = symbols_.python_function(e.vpid, 0, batch.string(e.str[0]), kImportFile, 0);
  push(t, symbol, e.ts_ns, true, nullptr, !visible(symbol));
  t.imports.push_back(ImportFrame{symbol, e.ts_ns, 0, 0, {}});
}

void CallStackAnalyzer::on_import_end(ThreadState &t, const RawEvent &e, const EventBatch &batch) {
  SymbolId symbol = symbols_.python_function(e.vpid, 0, batch.string(e.str[0]), kImportFile, 0);
  bool raised = e.transition == kImportRaise;
  close(t, symbol, e.ts_ns, raised ? FrameExit::Raise : FrameExit::Return);
  // Imports whose end was lost (discarded events) close with the outer one.
  size_t depth = t.imports.size();
  while (depth > 0 && t.imports[depth - 1].symbol != symbol) --depth;
  if (depth == 0) return;  // the begin is not in the trace
  while (t.imports.size() >= depth) {
    ImportFrame frame = std::move(t.imports.back());
    t.imports.pop_back();
    bool this_one = t.imports.size() + 1 == depth;
    uint64_t ns = e.ts_ns > frame.start_ns ? e.ts_ns - frame.start_ns : 0;
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

void CallStackAnalyzer::on_alloc_sample(ThreadState &t, const RawEvent &e,
                                        const EventBatch &batch) {
  std::string_view qualname = batch.string(e.str[0]);
  SymbolId symbol =
      qualname.empty() || qualname == kNoPythonFrame
          ? symbols_.python_function(e.vpid, 0, kNoPythonFrame, {}, 0)
          : symbols_.python_function(e.vpid, 0, qualname, batch.string(e.str[1]), e.lineno);
  ProcessState &p = process(e.host, e.vpid);
  AllocStats &stats = p.allocations[symbol];
  ++stats.samples;
  stats.sampled_bytes += e.extra;
  stats.retained_bytes += e.extra;
  if (e.transition == kNative) stats.native_bytes += e.extra;
  auto [it, inserted] = p.live_samples.try_emplace(e.code_id, symbol, e.extra);
  if (!inserted) {
    // The address was sampled before and its free not seen: that block is gone.
    AllocStats &old = p.allocations[it->second.first];
    old.retained_bytes -= std::min(old.retained_bytes, it->second.second);
    it->second = {symbol, e.extra};
  }
  if (build_call_trees_) {
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

void CallStackAnalyzer::on_free_sample(const RawEvent &e) {
  ProcessState &p = process(e.host, e.vpid);
  auto it = p.live_samples.find(e.code_id);
  if (it == p.live_samples.end()) return;
  AllocStats &stats = p.allocations[it->second.first];
  stats.retained_bytes -= std::min(stats.retained_bytes, it->second.second);
  p.live_samples.erase(it);
}

}  // namespace pinsight_reader
