// Imports and sampled allocations. Import frames nest on the thread's stack
// like functions (the replay pushes and closes them: flame graphs and the
// Chrome export show them); here, their own per-module statistics and chains.
// Allocation samples are credited to the function they name and to the
// thread's current call path.
#pragma once

#include <cstdint>
#include <vector>

#include "raw_event.h"
#include "symbol_table.h"

namespace pinsight_reader {

struct ThreadState;
struct ProcessState;

// Per module, and the chains of nested imports (import_begin/import_end).
struct ImportStats {
  uint64_t loads = 0;
  uint64_t cumulative_ns = 0;
  uint64_t self_ns = 0;  // minus the imports nested in it (python -X importtime)
  uint64_t raised = 0;
};
struct ImportFrame {
  SymbolId symbol;
  uint64_t start_ns;
  uint64_t nested_ns;
  uint64_t heaviest_ns;            // the slowest nested import
  std::vector<SymbolId> heaviest;  // and its own slowest chain
};
struct ImportChain {
  uint64_t ns;                    // the outermost import's cumulative time
  std::vector<SymbolId> modules;  // outermost first, then the slowest nested, ...
  bool raised;
};

// Sampled allocations, per allocating function of a process.
struct AllocStats {
  uint64_t samples = 0;
  uint64_t sampled_bytes = 0;   // estimated bytes allocated
  uint64_t retained_bytes = 0;  // of those, not freed by the end of the trace
  uint64_t native_bytes = 0;    // through malloc from native code
};

// The symbol of an import frame: a pseudo-function of the file "<import>".
SymbolId import_symbol(SymbolTable &symbols, const RawEvent &e, const EventBatch &batch);
void import_begun(ThreadState &t, SymbolId symbol, uint64_t ts);
// After the replay closed its frame; imports whose end was lost close with it.
void import_ended(ThreadState &t, SymbolId symbol, uint64_t ts, bool raised);

// The function an alloc_sample names ("<no Python frame>" when none).
SymbolId alloc_symbol(SymbolTable &symbols, const RawEvent &e, const EventBatch &batch);
void alloc_sampled(ProcessState &p, ThreadState &t, SymbolId symbol, const RawEvent &e,
                   bool call_trees);
// False when the address was not sampled (nothing changed).
bool free_sampled(ProcessState &p, uint64_t address);

}  // namespace pinsight_reader
