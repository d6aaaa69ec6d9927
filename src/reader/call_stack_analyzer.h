// The stack replay: replays the events of every thread on a stack and
// aggregates time per function, per native call site and per call path
// (analysis thread). Its concerns beside the stacks have modules of their own,
// which it feeds: native and CUDA regions (native_regions), the GIL
// (gil_events), imports and allocations (resource_events); what it produces
// as it goes, the program's timeline, goes to a ReplayOutput (replay_output.h:
// the Chrome trace writer), never written from here.
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
#include <unordered_map>
#include <vector>

#include "damage.h"
#include "host_registry.h"
#include "native_regions.h"
#include "raw_event.h"
#include "read_filter.h"
#include "replay_output.h"
#include "replay_state.h"
#include "symbol_table.h"

namespace pinsight_reader {

class CallStackAnalyzer {
 public:
  // output may be null (no export); the analyzer does not own it.
  CallStackAnalyzer(bool build_call_trees, ReplayOutput *output, const HostRegistry &hosts,
                    ReadFilter filter = {});

  // One record; `batch` holds its strings. Records come in time order.
  void consume(const RawEvent &event, const EventBatch &batch);
  // What damage to the trace lost (damage.h), before finish(): the threads
  // that may have lost events to it get lower-bound totals.
  void set_damages(std::vector<Damage> damages) { damages_ = std::move(damages); }
  // Closes the frames still open and labels processes and threads.
  void finish();
  CallStackAnalyzer(const CallStackAnalyzer &) = delete;
  CallStackAnalyzer &operator=(const CallStackAnalyzer &) = delete;

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
  const std::map<uint64_t, NativeProcess> &native() const { return native_.processes(); }
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
  // Tracing stepped aside in `process` (a debugger): its frames end there.
  void step_aside(const ProcessState &process, uint64_t ts);
  void on_c_call_begin(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  SymbolId python_symbol(const RawEvent &e, const EventBatch &batch);
  SymbolId native_symbol(const RawEvent &e, const EventBatch &batch);
  void on_discarded(const RawEvent &e);
  // The trace lost packets of a stream here: the threads it was writing for
  // (their last event came from it) lose their open frames here.
  void on_damage(const RawEvent &e);
  static void note_stream(ThreadState &t, StreamRef stream);
  bool damaged_by(const ThreadState &t, const Damage &d) const;
  void take_back_discards(uint64_t count, int32_t stream_id, bool packets);
  void on_native(const RawEvent &e, const EventBatch &batch);
  // The process's threads blocked in a native call now (for a CUDA launch on a
  // thread without Python frames).
  BlockedCalls blocked_calls(uint16_t host, int32_t vpid) const;
  void on_process_info(const RawEvent &e, const EventBatch &batch);
  // config_info and lexgion_counts: the process's configurations and rate control's counts.
  void on_rate_event(ProcessState &p, const RawEvent &e, const EventBatch &batch);
  // A flight recorder's dump: its open frames, then its marker.
  void on_open_frame(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  void on_dump_marker(ProcessState &p, const RawEvent &e, const EventBatch &batch);
  void on_import_begin(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  void on_import_end(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  // asyncio tasks (task_events.h): the events, and the frames that are steps.
  void on_task_event(ThreadState &t, const RawEvent &e, const EventBatch &batch);
  void begin_task_frame(ThreadState &t, uint64_t ts);
  void end_task_frame(ThreadState &t, SymbolId symbol, uint64_t ts, uint64_t self, bool hidden);
  // The task tree's node of a task: tasks of one name (number left out) together.
  SymbolId task_symbol(const TaskRecord &task);
  // Where a task was created: the innermost visible Python frame outside asyncio.
  SymbolId task_creation_site(const ThreadState &t);
  void assign_labels();
  void set_origin(uint64_t ts);

  bool build_call_trees_;
  ReplayOutput *output_;
  ReadFilter filter_;
  std::vector<int8_t> visible_;            // per symbol: -1 not decided yet
  std::vector<std::string> main_scripts_;  // sys.argv[0] of the processes
  uint64_t kind_counts_[kEventKinds] = {};
  uint64_t control_threads_ = 0;
  const HostRegistry &hosts_;
  SymbolTable symbols_;
  std::unordered_map<uint64_t, std::unique_ptr<ThreadState>> threads_;
  ThreadState *last_thread_ = nullptr;
  uint64_t last_thread_key_ = 0;
  std::map<uint64_t, ProcessState> processes_;  // by host << 32 | vpid
  NativeRegions native_;
  std::vector<DiscardRecord> discards_;
  std::vector<Damage> damages_;
  uint64_t discarded_events_ = 0;
  uint64_t discarded_packets_ = 0;
  uint64_t discard_records_ = 0;
  uint64_t events_ = 0;
  uint64_t first_ns_ = 0;
  uint64_t last_ns_ = 0;
  bool origin_set_ = false;
};

}  // namespace pinsight_reader
