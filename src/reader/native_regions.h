// Native regions: another provider's NAME_begin .. NAME_end on one thread (e.g.
// PInsight's OpenMP parallel regions and MPI calls), per process, attributed to
// the innermost frame open on that thread at the region's begin: a Python
// function, or the native callee (ctypes, pybind11) it was in. A worker
// thread's regions inside an OpenMP parallel region go to the call that opened
// it; CUDA kernels and copies (device activity) to the call that launched them.
// With call trees, a region that ended on its frame's thread is drawn as a
// child of that frame's node.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "raw_event.h"
#include "replay_output.h"
#include "symbol_table.h"

namespace pinsight_reader {

struct ThreadState;
struct Frame;

inline constexpr SymbolId kNoCaller = UINT32_MAX;

struct NativeRegionStats {
  uint64_t count = 0;
  uint64_t total_ns = 0;
};
// How a region found its caller, or why it has none.
enum class Attributed : uint8_t {
  kOwnThread,       // the stack of its own thread (or, an OpenMP worker's, of the opener)
  kBlockedCall,     // a CUDA launch on a thread without Python (PyTorch's autograd
                    // engine): the one Python call of the process blocked in a native
                    // call then (loss.backward() waiting for the engine)
  kNoBlockedCall,   // such a launch, and no Python call was in a native call then
  kSeveralBlocked,  // such a launch, and several were: none is chosen
  kNoLaunch,        // device activity whose launch is not in the trace
};
const char *attributed_name(Attributed how);

// Who a region is attributed to: the Python function whose call made it, and
// the native callee that call went through (mpi4py's Comm.Allreduce, a ctypes
// function), kNoCaller when the region began in the Python function itself.
struct Attribution {
  SymbolId caller = kNoCaller;
  SymbolId via = kNoCaller;
  Attributed how = Attributed::kOwnThread;
  bool operator<(const Attribution &o) const {
    if (caller != o.caller) return caller < o.caller;
    return via != o.via ? via < o.via : how < o.how;
  }
};

// For a CUDA launch on a thread without Python frames: the process's threads
// blocked in a native call at that time (the replay counts them).
struct BlockedCalls {
  const ThreadState *only = nullptr;  // the one such thread, if exactly one
  size_t count = 0;
};

struct NativeOpen {
  uint32_t provider;  // index into NativeProcess::names
  uint32_t region;
  Attribution by;
  uint64_t start_ns;
  // The caller's frame on this thread (call trees): its index on the stack, its
  // start (which frame it is) and its child time at the region's begin.
  int32_t opener_tid = -1;  // a worker's region: the thread of the call that opened it
  uint32_t depth = UINT32_MAX;
  uint64_t frame_start_ns = 0;
  uint64_t child_ns = 0;
  uint64_t join = 0;  // the output's join to the call it is attributed to (0: none)
};
// A CUDA launch waiting for its device activity.
struct Launch {
  Attribution by;
  int32_t tid;    // the thread of the call it is attributed to
  uint64_t join;  // the output's join to that call, for the activity (0: none)
};
struct NativeProcess {
  std::vector<std::string> names;  // providers and region names, interned
  // Region -> the mangled name it was demangled from (CUDA kernels: names[] holds
  // the C++ name, as Nsight Systems shows it).
  std::unordered_map<uint32_t, std::string> mangled;
  // (caller, provider, region) -> stats
  std::map<std::tuple<Attribution, uint32_t, uint32_t>, NativeRegionStats> regions;
  // (provider, region) -> begins that never ended (listed, never timed)
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> unmatched;
  uint64_t ends_without_begin = 0;
  std::unordered_map<int32_t, std::vector<NativeOpen>> open;  // by vtid
  // Open OpenMP parallel regions (codeptr, record id) -> the caller that opened
  // them: a worker thread's regions inside them go to that caller.
  std::map<std::pair<uint64_t, uint64_t>, std::pair<Attribution, int32_t>> parallel_callers;
  // provider << 32 | region -> the call-tree symbol "[OpenMP] parallel"
  std::unordered_map<uint64_t, SymbolId> tree_symbols;
  // CUDA: launches (correlationId) waiting for their device activity -> the
  // caller and thread of the launch; what turns CUPTI ns into ns from origin.
  std::unordered_map<uint32_t, Launch> launches;
  int64_t gpu_to_origin = 0;
  bool gpu_clock = false;
  std::string domain(uint32_t provider) const;                  // "openmp", or the provider
  std::string domain_label(uint32_t provider) const;            // "OpenMP", or the provider
  std::string label(uint32_t provider, uint32_t region) const;  // "[OpenMP] parallel"
};

// A native region that ended on the thread of the frame it belongs to (call
// trees): drawn, when that frame ends, as a child of its node, nested by time.
struct EndedRegion {
  uint64_t start_ns, end_ns;
  uint64_t python_ns;  // Python called back inside it: the frame's child, not the region's
  SymbolId symbol;     // "[OpenMP] parallel"
};
// Per stack depth of a thread: native regions of the frame there.
struct FrameRegions {
  std::vector<EndedRegion> ended;  // not drawn yet: a region of theirs may still be open
  uint64_t drawn_ns = 0;           // drawn: taken from the frame's self time at its end
};

class NativeRegions {
 public:
  // output may be null.
  NativeRegions(SymbolTable &symbols, bool build_call_trees, ReplayOutput *output)
      : symbols_(symbols), build_call_trees_(build_call_trees), output_(output) {}

  // A native_begin, native_end, device_activity or device_clock of the process
  // host << 32 | vpid (output_pid: its pid in the replay's output); `t` is the
  // event's thread when the replay knows it (its stack names the caller).
  void on_event(uint64_t process_key, int64_t output_pid, const RawEvent &e,
                const EventBatch &batch, ThreadState *t, const BlockedCalls &blocked);
  // The begins still open are unmatched.
  void finish();
  // host << 32 | vpid -> the process's native regions
  const std::map<uint64_t, NativeProcess> &processes() const { return processes_; }

 private:
  // The Python function and native callee at the top of `stack` (hidden frames
  // skipped); false when it holds no visible frame.
  bool attribute(const std::vector<Frame> &stack, Attribution *by) const;
  // A CUDA kernel or copy on the device: to the launch's caller.
  void on_device_activity(const RawEvent &e, const EventBatch &batch, int64_t output_pid,
                          NativeProcess &p, uint32_t provider, uint32_t region);
  // The output's join to the call `by` names, open innermost on thread `tid` now.
  uint64_t join(int64_t output_pid, int32_t tid, const Attribution &by) const {
    bool attributed = by.caller != kNoCaller || by.via != kNoCaller;
    return output_ != nullptr && attributed && tid >= 0 ? output_->join(output_pid, tid) : 0;
  }
  // Logs a region that ended for its frame's drawing; false when the frame is gone.
  bool region_ended(ThreadState &t, NativeProcess &p, const NativeOpen &region, uint64_t ts);

  SymbolTable &symbols_;
  bool build_call_trees_;
  ReplayOutput *output_;
  std::map<uint64_t, NativeProcess> processes_;
};

// The logged regions of the frame at `depth` become nodes under `node`, nested by
// time (none of them may still have an open region around it); the replay calls
// it when that frame ends.
void draw_regions(ThreadState &t, size_t depth, uint32_t node);

}  // namespace pinsight_reader
