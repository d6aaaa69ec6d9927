// What the stack replay produces as it goes, besides its aggregates: the
// program's timeline (frame segments, native regions, GIL states, LTTng's
// discards), in time order, to whichever writer wants it. The Chrome trace
// writer is one; the replay knows none of them, and a read without an export
// has none (the replay's output pointer is null).
#pragma once

#include <cstdint>
#include <string>

#include "symbol_table.h"

namespace pinsight_reader {

// Why a frame segment ended.
enum class FrameExit : uint8_t {
  Return,
  Yield,
  Unwind,     // left by an exception
  Raise,      // native call that raised
  Implicit,   // closed because an end event of an outer frame came first
  OpenAtEnd,  // still open when the trace ended
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
  virtual void discarded(uint64_t ts_ns, uint64_t count, bool packets, int32_t stream_id) = 0;
  // Another provider's region on thread `tid`, at its end; flow_from_tid >= 0: the
  // thread of the Python call that opened it.
  virtual void native_region(int64_t pid, int32_t tid, const std::string &label,
                             const std::string &domain, uint64_t begin_ns, uint64_t end_ns,
                             int32_t flow_from_tid) = 0;
  // A CUDA kernel or copy on the process's device, in trace time.
  virtual void device_activity(int64_t pid, const std::string &label, const std::string &domain,
                               uint64_t begin_ns, uint64_t end_ns, int32_t flow_from_tid) = 0;
  // events = gil: thread `vtid` was "holding", "waiting" or "released" over [begin, end).
  virtual void gil_state(int64_t pid, int32_t vtid, const char *state, uint64_t begin_ns,
                         uint64_t end_ns) = 0;
};

}  // namespace pinsight_reader
