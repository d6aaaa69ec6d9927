// What the stack replay produces as it goes, besides its aggregates: the
// program's timeline (frame segments, native regions, GIL states, LTTng's
// discards), in time order, to whichever writer wants it. The Chrome trace
// writer and the Perfetto writer are two; the replay knows none of them, and a
// read without an export has none (the replay's output pointer is null). The
// hooks with a body are the ones a writer may do without.
#pragma once

#include <cstdint>
#include <string>

#include "symbol_table.h"
#include "task_events.h"

namespace pinsight_reader {

// Why a frame segment ended.
enum class FrameExit : uint8_t {
  Return,
  Yield,
  Unwind,     // left by an exception
  Raise,      // native call that raised
  Implicit,   // closed because an end event of an outer frame came first
  OpenAtEnd,  // still open when the trace ended
  Damaged,    // cut off by damage to the trace: closed where its stream lost packets
};

// A CUDA kernel or copy on the process's device, in trace time.
struct DeviceActivity {
  std::string label, domain;
  uint64_t begin_ns, end_ns;
  uint32_t device, stream;
  int32_t flow_from_tid;  // the launching thread, -1: unknown
  uint64_t join;          // the flow join() gave its launch, 0: none
};

// Rate control's counts of one function (lexgion_counts), as the process wrote them.
struct RateCounts {
  uint64_t executions, traced;
  int64_t max_num_traces;  // -1: no cap
  std::string section;
};

class ReplayOutput {
 public:
  virtual ~ReplayOutput() = default;

  // The first event's time, before any other call.
  virtual void set_origin(uint64_t ns) = 0;
  // A frame segment of thread `tid` of process `pid` (a process id unique across hosts).
  virtual void begin_frame(int64_t pid, int32_t tid, const SymbolTable &symbols, SymbolId symbol,
                           uint64_t ts_ns) = 0;
  virtual void end_frame(int64_t pid, int32_t tid, uint64_t ts_ns, FrameExit exit) = 0;
  // A symbol's names changed (the compact payload named it after its first use).
  virtual void renamed(SymbolId) {}
  // A region about to be attributed to the frame open innermost on thread `tid`
  // now: an id joining the two (a flow), 0 when the writer draws none.
  virtual uint64_t join(int64_t /*pid*/, int32_t /*tid*/) { return 0; }
  virtual void discarded(uint64_t ts_ns, uint64_t count, bool packets, int32_t stream_id) = 0;
  // Another provider's region on thread `tid`, at its end; flow_from_tid >= 0: the
  // thread of the Python call that opened it (an OpenMP worker's region); `join`:
  // what join() gave at its begin, for the call it is attributed to, or 0.
  virtual void native_region(int64_t pid, int32_t tid, const std::string &label,
                             const std::string &domain, uint64_t begin_ns, uint64_t end_ns,
                             int32_t flow_from_tid, uint64_t join) = 0;
  virtual void device_activity(int64_t pid, const DeviceActivity &activity) = 0;
  // events = gil: thread `vtid` was "holding", "waiting" or "released" over [begin, end).
  virtual void gil_state(int64_t pid, int32_t vtid, const char *state, uint64_t begin_ns,
                         uint64_t end_ns) = 0;
  // The Python domain's mode changed (mode_change), a configuration was put in
  // force (config_info: activation, reload), a function's rate control counts.
  virtual void mode_change(int64_t /*pid*/, uint64_t /*ts_ns*/, const std::string & /*mode*/,
                           const std::string & /*reason*/, uint64_t /*generation*/) {}
  virtual void config_loaded(int64_t /*pid*/, uint64_t /*ts_ns*/, const std::string & /*path*/,
                             uint64_t /*generation*/) {}
  virtual void rate_counts(int64_t /*pid*/, uint64_t /*ts_ns*/, const std::string & /*function*/,
                           const RateCounts & /*counts*/) {}
  // Sampled allocations: the sampled bytes of the process not freed yet.
  virtual void sampled_memory(int64_t /*pid*/, uint64_t /*ts_ns*/, uint64_t /*live_bytes*/) {}
  // asyncio: a step of `task` on thread `vtid` over [begin, end), at its end; or,
  // offloaded, its work run by thread `vtid` (an executor's work item). A
  // writer draws each task as a track under its loop's thread (task.vtid).
  virtual void task_step(int64_t /*pid*/, int32_t /*vtid*/, const TaskRecord & /*task*/,
                         uint64_t /*begin_ns*/, uint64_t /*end_ns*/, bool /*offloaded*/) {}
  // `task` was made (once per task) in the step of `creator` running now (null:
  // outside any task's step); an eager task's first step may be over already.
  virtual void task_created(int64_t /*pid*/, const TaskRecord & /*task*/,
                            const TaskRecord * /*creator*/) {}
  // Work item `work` handed to a thread by the step of `task` running now on
  // thread `vtid`; run: its start on thread `vtid`, whose innermost frame it is.
  virtual void task_handoff(int64_t /*pid*/, int32_t /*vtid*/, const TaskRecord & /*task*/,
                            uint64_t /*work*/, bool /*run*/) {}
  // `task` is done (task.outcome), after its last step's task_step (only work
  // it handed to a thread may still run for it).
  virtual void task_done(int64_t /*pid*/, const TaskRecord & /*task*/) {}
};

}  // namespace pinsight_reader
