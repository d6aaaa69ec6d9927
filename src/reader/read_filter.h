// What a read keeps: processes (vpid, MPI rank), threads (vtid), and the
// Python functions shown (module_filter / module_exclude rules, importlib's
// frozen frames). A hidden function's frames vanish from every output as if
// the tracer had not recorded them: their time is their caller's self time,
// and the visible frames they lead to nest in that caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "symbol_table.h"

namespace pinsight_reader {

struct ReadFilter {
  std::vector<int64_t> pids;          // vpids; empty: all
  std::vector<int64_t> ranks;         // MPI ranks; empty: all
  std::vector<int64_t> threads;       // vtids; empty: all
  std::vector<std::string> modules;   // as module_filter; empty: all
  std::vector<std::string> excludes;  // as module_exclude
  bool ignore_frozen = false;

  bool selects_processes() const { return !pids.empty() || !ranks.empty(); }
  bool pid_selected(int32_t vpid) const;
  // A process without an MPI rank (rank -1) is selected only without --rank.
  bool rank_selected(int32_t rank) const;
  bool thread_selected(int32_t vtid) const;
  bool hides_functions() const { return ignore_frozen || !modules.empty() || !excludes.empty(); }
  // `main_script`: the function's file is a traced process's script, whose
  // module is __main__ (it matches its file's name as well).
  bool function_visible(const Symbol &symbol, bool main_script) const;
};

}  // namespace pinsight_reader
