// What the stack replay keeps per thread and per process: the open frames and
// the aggregates of every concern (functions, native calls, call trees, GIL,
// imports, allocations, native regions' drawing). The concerns' own types are
// in their headers (gil_events.h, resource_events.h, native_regions.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "call_tree.h"
#include "gil_events.h"
#include "native_regions.h"
#include "raw_event.h"
#include "resource_events.h"
#include "symbol_table.h"
#include "task_events.h"

namespace pinsight_reader {

struct FunctionStats {
  uint64_t calls = 0;     // transition=start (native: every call)
  uint64_t segments = 0;  // frame segments, resumes included
  uint64_t total_ns = 0;
  uint64_t self_ns = 0;
  uint64_t exceptions = 0;   // left by unwind / native call raised
  uint64_t gil_wait_ns = 0;  // waits for the GIL while it was the innermost Python frame
  uint32_t active = 0;       // frames of this function on the stack now
  // Generator, coroutine and async-generator instances that ended on this
  // thread (generator_end), and their lifetimes: first start to final end.
  uint64_t finished = 0;
  uint64_t wall_ns = 0;
};

struct NativeCallStats {
  uint64_t calls = 0;
  uint64_t total_ns = 0;  // outermost calls of the pair only
  uint64_t raised = 0;
  uint32_t active = 0;  // calls of this pair on the stack now
};

// Input the stacks could not explain, reported rather than guessed at.
struct Anomalies {
  uint64_t ends_without_begin = 0;  // e.g. frames already running at activate()
  uint64_t implicitly_closed = 0;   // frames closed by an outer frame's end
  uint64_t open_at_end = 0;         // frames still open when the trace ended
  uint64_t stepped_aside = 0;       // open when tracing stepped aside for a debugger
  uint64_t cut_by_damage = 0;       // open where the thread's stream lost packets (damage)
};

struct Frame {
  SymbolId symbol;
  uint32_t node;
  uint32_t task_node;  // its node in the thread's task_tree (flamegraph --by-task)
  uint64_t start_ns;
  uint64_t child_ns;
  FunctionStats *stats;
  NativeCallStats *native_call;  // native frames only
  bool outermost;
  bool outermost_pair;  // the outermost call of its caller -> callee pair
  bool hidden;          // left out by the filter: its time is its parent's
};

inline constexpr size_t kNoFrame = SIZE_MAX;
// The index of the innermost frame of `stack` that the filters keep, or kNoFrame.
inline size_t innermost_visible(const std::vector<Frame> &stack) {
  for (size_t i = stack.size(); i-- > 0;) {
    if (!stack[i].hidden) return i;
  }
  return kNoFrame;
}

struct ProcessState;

// One of a thread's last events (RecentEvents): a frame's begin or end.
struct RecentEvent {
  uint64_t ts_ns = 0;
  SymbolId symbol = kNoSymbol;
  EventKind kind = EventKind::FunctionBegin;
  uint8_t transition = 0;
};
// A thread's last kRecentEvents frame events, oldest first once unrolled: what
// a flight recorder's dump shows before the open stack.
struct RecentEvents {
  static constexpr size_t kRecentEvents = 8;
  RecentEvent ring[kRecentEvents];
  uint64_t count = 0;
  void add(uint64_t ts, SymbolId symbol, EventKind kind, uint8_t transition) {
    ring[count++ % kRecentEvents] = {ts, symbol, kind, transition};
  }
};

struct ThreadState {
  ProcessState *process;
  bool selected;  // by the thread filter
  uint16_t host;
  int32_t vpid;
  int32_t vtid;
  int64_t chrome_pid;
  int32_t python_thread_id = -1;
  uint64_t thread_ident = 0;
  uint64_t events = 0;
  uint64_t mode_changes =
      0;  // and config_info, lexgion_counts: with nothing else, our control thread
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
  // The streams its events came from (LTTng's per-CPU buffers), the last one
  // apart: damage to a stream cuts the threads that wrote to it.
  StreamRef last_stream = kNoStreamRef;
  std::vector<StreamRef> streams;
  bool lower_bound = false;  // damage may have cost it events: its totals are lower bounds
  std::vector<Frame> stack;
  std::unordered_map<SymbolId, FunctionStats> functions;
  // key: caller symbol << 32 | callee symbol
  std::unordered_map<uint64_t, NativeCallStats> native_calls;
  CallTree tree;
  Anomalies anomalies;
  std::string label;
  std::vector<ImportFrame> imports;
  std::unordered_map<SymbolId, ImportStats> import_stats;
  std::vector<ImportChain> import_chains;
  std::unordered_map<uint32_t, uint64_t> alloc_nodes;  // call-tree node -> sampled bytes
  GilStats gil;
  std::unordered_map<SymbolId, GilReleaseStats> gil_releases;
  std::vector<FrameRegions> frame_regions;  // per stack depth
  ThreadTasks tasks;                        // asyncio: the task steps running here
  // The call tree with each task step's frames under their task (by name) instead
  // of the event loop's frames; built once the thread ran a task step.
  CallTree task_tree;
  bool task_tree_started = false;
  RecentEvents recent;
};

// A flight recorder's dump: one frame open on a thread when it was taken
// (open_frame). A Python function's frame: `symbol`, `caller` kNoSymbol, `line`
// its first line; a native call's: the callee, its Python caller, the call's line.
struct DumpFrame {
  uint32_t depth;
  SymbolId symbol;
  SymbolId caller;
  int32_t line;
  uint64_t begin_ns;  // ns from origin; 0: not known
};
// A native region (PInsight's OpenMP, MPI or CUDA) still open on the thread
// at the end of a dump's trace: under its innermost frame.
struct DumpRegion {
  std::string label;  // "[MPI] MPI_Allreduce"
  uint64_t begin_ns;
};
struct DumpStack {
  int32_t vtid = -1;
  int32_t python_thread_id = -1;
  std::vector<DumpFrame> frames;  // outermost first
  std::vector<DumpRegion> regions;
};
// The last dump of a process (dump_marker, and the open_frame events before it).
struct DumpState {
  bool seen = false;
  uint32_t id = 0;
  uint64_t ts_ns = 0;
  std::string reason;
  uint64_t status = 0;  // PINSIGHT_DUMP_* bits
  uint32_t threads = 0;
  uint32_t frames = 0;
  std::vector<DumpStack> stacks;
};

// A mode_change of the Python domain (activation, reload, window end, API, debugger).
struct ModeChangeRecord {
  uint64_t ts_ns;
  std::string mode, reason;
  uint64_t generation;
};

// A configuration put in force (config_info): "" for the built-in defaults.
struct ConfigRecord {
  uint64_t ts_ns;
  std::string path;
  uint64_t generation;
};

// Rate control's counts of one function (lexgion_counts, the last one seen).
struct LexgionCountRecord {
  uint64_t executions = 0, traced = 0;
  bool lower_bound = false;
  int64_t max_num_traces = -1, tracing_rate = 1, trace_starts_at = 0;
  std::string section;
};

struct ProcessState {
  uint16_t host;
  std::string host_name;  // from the trace's environment
  int32_t vpid;
  int64_t chrome_pid;     // vpid, made unique across hosts
  bool has_info = false;  // a process_info event was seen
  bool selected = true;   // by the pid and rank filters
  int64_t pid = -1;
  int32_t mpi_rank = -1;
  int32_t mpi_size = -1;
  std::string hostname, argv, python_version, backend, procname;
  uint64_t events = 0;
  std::string label;
  std::unordered_map<SymbolId, AllocStats> allocations;
  // Sampled blocks not freed yet: address -> (function, sampled bytes).
  std::unordered_map<uint64_t, std::pair<SymbolId, uint64_t>> live_samples;
  uint64_t live_sampled_bytes = 0;  // their sampled bytes
  std::vector<ModeChangeRecord> mode_changes;
  std::vector<ConfigRecord> configs;
  std::map<SymbolId, LexgionCountRecord> lexgion_counts;
  TaskTable tasks;  // asyncio tasks
  // open_frame events by dump id, then vtid, until their dump_marker.
  std::map<uint32_t, std::map<int32_t, DumpStack>> dump_frames;
  DumpState dump;
};

struct DiscardRecord {
  uint64_t count;
  uint64_t begin_ns;  // 0: unknown
  uint64_t end_ns;
  int32_t stream_id;
  bool packets;
};

// The replay's output names processes by pid, which must be unique: processes
// of other hosts than the first get theirs above Linux's largest pid (2^22).
inline int64_t chrome_pid(uint16_t host, int32_t vpid) {
  return static_cast<int64_t>(host) * (int64_t{1} << 22) + vpid;
}

}  // namespace pinsight_reader
