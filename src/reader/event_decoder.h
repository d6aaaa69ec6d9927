// Turns babeltrace2 messages into RawEvent records (decoding thread).
//
// Field positions are looked up by name once per event class, so the
// per-event work is a handful of borrow/get calls and string copies.
#pragma once

#include <babeltrace2/babeltrace.h>

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_set>

#include "host_registry.h"
#include "raw_event.h"
#include "trace_graph.h"

namespace pinsight_reader {

// Where a field sits in its structure; looked up once per event class.
struct FieldSlot {
  int index = -1;  // member index in the structure, -1 if absent
  bool is_signed = false;
};

class EventDecoder {
 public:
  explicit EventDecoder(HostRegistry &hosts) : hosts_(hosts) {}

  // Appends the record for `message` (of `stream`, TraceSet's numbering) to
  // `batch` when it is one of ours.
  void decode(const bt_message *message, uint32_t stream, EventBatch &batch);
  // A loss the graph reports beside the messages (damage, or LTTng's discards
  // around it); `stream_id` is the stream's id as babeltrace2 reports it.
  void decode_loss(const StreamLoss &loss, int64_t stream_id, EventBatch &batch);
  // The graph was built anew: its event classes are new objects.
  void forget_classes() {
    classes_.clear();
    last_class_ = nullptr;
  }

  // Events of other providers (or with other names) seen so far.
  // Events of other providers that are not NAME_begin / NAME_end regions.
  uint64_t foreign_events() const { return foreign_events_; }
  uint64_t last_ts_ns() const { return last_ts_ns_; }

  static constexpr int kMaxFields = 11;

  // What is known of one event class, found once.
  struct ClassInfo {
    const bt_event_class *event_class = nullptr;
    bool ours = false;
    bool native = false;           // another provider's NAME_begin / NAME_end
    std::string provider, region;  // native: PROVIDER and NAME
    // native, OpenMP: the enclosing parallel region's identity (OMPT's
    // parallel_codeptr and PInsight's parallel_record_id), joining a worker
    // thread's regions to the thread that opened the parallel region.
    FieldSlot parallel_codeptr, parallel_record_id;
    // native, CUDA: the launch's correlationId, joining the device activity it caused.
    FieldSlot correlation;
    // CUDA device activity (cudaKernelActivity, cudaMemcpyActivity) and the CUPTI
    // clock's calibration: their fields.
    FieldSlot start_gpu, end_gpu, kernel_name, copy_kind, device, stream, monotonic_ns, cupti_ns;
    bool has_clock = false;
    uint16_t host = 0;  // events without a clock get the previous timestamp
    EventKind kind = EventKind::FunctionBegin;
    bool compact = false;
    FieldSlot payload[kMaxFields];
    FieldSlot vpid, vtid, procname;
  };

 private:
  const ClassInfo &class_info(const bt_event *event);
  void decode_event(const bt_message *message, uint32_t stream, EventBatch &batch);
  void decode_discarded(const bt_message *message, EventBatch &batch, bool packets);

  HostRegistry &hosts_;
  std::deque<ClassInfo> classes_;  // a deque: class_info() hands out references
  const ClassInfo *last_class_ = nullptr;
  // Processes (host << 32 | vpid) whose name was already passed on.
  std::unordered_set<uint64_t> processes_named_;
  uint64_t last_process_ = UINT64_MAX;
  uint64_t foreign_events_ = 0;
  uint64_t last_ts_ns_ = 0;
};

}  // namespace pinsight_reader
