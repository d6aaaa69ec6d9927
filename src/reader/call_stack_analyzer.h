// Replays the events of every thread on a stack and aggregates time per
// function, per native call site and per call path (analysis thread).
//
// A frame segment lasts from a function_begin to the matching function_end
// of the same thread (a generator's yield ends a segment, its resume starts
// another; only transition=start counts as a call). Native calls are frames
// too, so Python code they call back nests inside them. Self time excludes
// child frames, native ones included; total time counts only the outermost
// of recursive frames, so it never exceeds the thread's wall time; likewise a
// caller -> callee pair's total counts only its outermost calls.
//
// The tracer's own control thread (it only ever emits mode_change) is not
// one of the program's threads: it is left out of every output. The filter
// (read_filter.h) leaves out processes and threads, and hides functions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "call_tree.h"
#include "chrome_trace_writer.h"
#include "host_registry.h"
#include "raw_event.h"
#include "read_filter.h"
#include "symbol_table.h"

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

// events = gil (gil_events.cpp): where a thread's time went with respect to the GIL.
struct GilStats {
  bool seen = false;               // the thread has gil events
  uint64_t switch_wait_ns = 0;     // waits at hand-offs (gil_switch; gil_released's before_ns)
  uint64_t take_back_wait_ns = 0;  // waits to take the GIL back after a release
  uint64_t released_ns = 0;        // native code ran with the GIL released
  uint64_t switches = 0;           // gil_switch events
  uint64_t releases = 0;           // gil_released events
  uint64_t mark_ns = 0;            // Chrome GIL track: drawn up to here
};
// Per native callee (the innermost open native call at the event), or kNoSymbol.
struct GilReleaseStats {
  uint64_t count = 0;
  uint64_t released_ns = 0;
  uint64_t wait_ns = 0;  // waiting to take the GIL back
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
};

// Imports (import_begin/import_end): per module, and the chains of nested
// imports (resource_events.cpp).
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

struct Frame {
  SymbolId symbol;
  uint32_t node;
  uint64_t start_ns;
  uint64_t child_ns;
  FunctionStats *stats;
  NativeCallStats *native_call;  // native frames only
  bool outermost;
  bool outermost_pair;  // the outermost call of its caller -> callee pair
  bool hidden;          // left out by the filter: its time is its parent's
};

// A native region that ended on the thread of the frame it belongs to (call
// trees): drawn, when that frame ends, as a child of its node, nested by time.
struct EndedRegion {
  uint64_t start_ns, end_ns;
  uint64_t python_ns;  // Python called back inside it: the frame's child, not the region's
  SymbolId symbol;     // "[OpenMP] parallel"
};

struct ProcessState;

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
  uint64_t mode_changes = 0;  // a thread with nothing else is our control thread
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
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
  // Per stack depth: native regions of the frame there.
  struct FrameRegions {
    std::vector<EndedRegion> ended;  // not drawn yet: a region of theirs may still be open
    uint64_t drawn_ns = 0;           // drawn: taken from the frame's self time at its end
  };
  std::vector<FrameRegions> frame_regions;
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
};

// Native regions (another provider's NAME_begin .. NAME_end on one thread, e.g.
// PInsight's OpenMP parallel regions and MPI calls), per process, attributed to
// the innermost frame open on that thread at the region's begin: a Python
// function, or the native callee (ctypes, pybind11) it was in.
inline constexpr SymbolId kNoCaller = UINT32_MAX;
// export: the track of a process's device activity (a thread id no thread has).
inline constexpr int32_t kDeviceTrackTid = 2000000000;
struct NativeRegionStats {
  uint64_t count = 0;
  uint64_t total_ns = 0;
};
struct NativeOpen {
  uint32_t provider;  // index into NativeProcess::names
  uint32_t region;
  SymbolId caller;
  uint64_t start_ns;
  // The caller's frame on this thread (call trees): its index on the stack, its
  // start (which frame it is) and its child time at the region's begin.
  int32_t opener_tid = -1;  // a worker's region: the thread of the call that opened it
  uint32_t depth = UINT32_MAX;
  uint64_t frame_start_ns = 0;
  uint64_t child_ns = 0;
};
struct NativeProcess {
  std::vector<std::string> names;  // providers and region names, interned
  // (caller, provider, region) -> stats
  std::map<std::tuple<SymbolId, uint32_t, uint32_t>, NativeRegionStats> regions;
  // (provider, region) -> begins that never ended (listed, never timed)
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> unmatched;
  uint64_t ends_without_begin = 0;
  std::unordered_map<int32_t, std::vector<NativeOpen>> open;  // by vtid
  // Open OpenMP parallel regions (codeptr, record id) -> the caller that opened
  // them: a worker thread's regions inside them go to that caller.
  std::map<std::pair<uint64_t, uint64_t>, std::pair<SymbolId, int32_t>> parallel_callers;
  // provider << 32 | region -> the call-tree symbol "[OpenMP] parallel"
  std::unordered_map<uint64_t, SymbolId> tree_symbols;
  // CUDA: launches (correlationId) waiting for their device activity -> the
  // caller and thread of the launch; what turns CUPTI ns into ns from origin.
  std::unordered_map<uint32_t, std::pair<SymbolId, int32_t>> launches;
  int64_t gpu_to_origin = 0;
  bool gpu_clock = false;
  bool device_track = false;                          // export: the process has a GPU track
  std::string domain(uint32_t provider) const;        // "openmp", or the provider
  std::string domain_label(uint32_t provider) const;  // "OpenMP", or the provider
  std::string label(uint32_t provider, uint32_t region) const;  // "[OpenMP] parallel"
};

struct DiscardRecord {
  uint64_t count;
  uint64_t begin_ns;  // 0: unknown
  uint64_t end_ns;
  int32_t stream_id;
  bool packets;
};

class CallStackAnalyzer {
 public:
  // chrome may be null; the analyzer does not own it.
  CallStackAnalyzer(bool build_call_trees, ChromeTraceWriter *chrome, const HostRegistry &hosts,
                    ReadFilter filter = {});

  // One record; `batch` holds its strings. Records come in time order.
  void consume(const RawEvent &event, const EventBatch &batch);
  // Closes the frames still open and labels processes and threads.
  void finish();

  const SymbolTable &symbols() const { return symbols_; }
  // Processes by MPI rank, then host and vpid; their threads, main first.
  std::vector<const ProcessState *> processes() const;
  std::vector<const ThreadState *> threads_of(const ProcessState &process) const;
  const std::vector<DiscardRecord> &discards() const { return discards_; }
  uint64_t discarded_events() const { return discarded_events_; }
  uint64_t discarded_packets() const { return discarded_packets_; }
  uint64_t discard_records() const { return discard_records_; }
  uint64_t events() const { return events_; }
  // Events of each kind (EventKind order, discarded ones excepted).
  uint64_t events_of(EventKind kind) const { return kind_counts_[static_cast<size_t>(kind)]; }
  // Threads that only emitted mode_change: the tracer's control thread.
  uint64_t control_threads() const { return control_threads_; }
  bool is_control_thread(const ThreadState &t) const {
    return t.events > 0 && t.mode_changes == t.events;
  }
  // host << 32 | vpid -> the process's native regions
  const std::map<uint64_t, NativeProcess> &native() const { return native_; }
  const ProcessState *find_process(uint64_t key) const {
    auto it = processes_.find(key);
    return it == processes_.end() ? nullptr : &it->second;
  }
  uint64_t first_ns() const { return first_ns_; }
  uint64_t last_ns() const { return last_ns_; }
  bool build_call_trees() const { return build_call_trees_; }

 private:
  static constexpr size_t kMaxDiscardRecords = 1000;
  // How deep an end event looks for its begin before calling it unmatched.
  static constexpr size_t kMaxEndSearch = 1024;

  ThreadState &thread(const RawEvent &event);
  ProcessState &process(uint16_t host, int32_t vpid);
  void push(ThreadState &t, SymbolId symbol, uint64_t ts, bool is_call,
            NativeCallStats *native_call, bool hidden);
  bool visible(SymbolId symbol);
  bool is_main_script(const std::string &filename) const;
  void close(ThreadState &t, SymbolId symbol, uint64_t ts, FrameExit exit);
  void pop(ThreadState &t, uint64_t ts, FrameExit exit);
  // A CUDA kernel or copy on the device: to the launch's caller.
  void on_device_activity(const RawEvent &e, NativeProcess &p, uint32_t provider, uint32_t region);
  // Tracing stepped aside in `process` (a debugger): its frames end there.
  void step_aside(const ProcessState &process, uint64_t ts);
  void on_c_call_begin(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  SymbolId python_symbol(const RawEvent &e, const EventBatch &batch);
  SymbolId native_symbol(const RawEvent &e, const EventBatch &batch);
  void on_discarded(const RawEvent &e);
  void on_native(const RawEvent &e, const EventBatch &batch);
  // Logs a region that ended for its frame's drawing; false when the frame is gone.
  bool native_region_ended(ThreadState &t, NativeProcess &p, const NativeOpen &region, uint64_t ts);
  // The logged regions of the frame at `depth` become nodes under `node`, nested by
  // time (none of them may still have an open region around it).
  void draw_regions(ThreadState &t, size_t depth, uint32_t node);
  void on_process_info(const RawEvent &e, const EventBatch &batch);
  // resource_events.cpp
  void on_import_begin(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  void on_import_end(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  void on_alloc_sample(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  void on_free_sample(const RawEvent &e);
  // gil_events.cpp
  void on_gil(ThreadState &t, const RawEvent &e);
  void gil_slice(ThreadState &t, const char *state, uint64_t begin_ns, uint64_t end_ns);
  void gil_finish(ThreadState &t);
  void assign_labels();
  void set_origin(uint64_t ts);

  bool build_call_trees_;
  ChromeTraceWriter *chrome_;
  ReadFilter filter_;
  std::vector<int8_t> visible_;            // per symbol: -1 not decided yet
  std::vector<std::string> main_scripts_;  // sys.argv[0] of the processes
  uint64_t kind_counts_[static_cast<size_t>(EventKind::Block) + 1] = {};
  uint64_t control_threads_ = 0;
  const HostRegistry &hosts_;
  SymbolTable symbols_;
  std::unordered_map<uint64_t, std::unique_ptr<ThreadState>> threads_;
  ThreadState *last_thread_ = nullptr;
  uint64_t last_thread_key_ = 0;
  std::map<uint64_t, ProcessState> processes_;  // by host << 32 | vpid
  std::map<uint64_t, NativeProcess> native_;
  std::vector<DiscardRecord> discards_;
  uint64_t discarded_events_ = 0;
  uint64_t discarded_packets_ = 0;
  uint64_t discard_records_ = 0;
  uint64_t events_ = 0;
  uint64_t first_ns_ = 0;
  uint64_t last_ns_ = 0;
  bool origin_set_ = false;
};

}  // namespace pinsight_reader
