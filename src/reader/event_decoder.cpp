#include "event_decoder.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pinsight_reader {
namespace {

constexpr std::string_view kProviderPrefix = "python_pinsight_lttng_ust:";

struct EventLayout {
  std::string_view name;
  EventKind kind;
  bool compact;
  const char *fields[EventDecoder::kMaxFields];  // in the order RawEvent is filled, nullptr-padded
};

// Field names of the provider (tracepoints/python_pinsight_lttng_ust.h).
constexpr EventLayout kLayouts[] = {
    {"function_begin",
     EventKind::FunctionBegin,
     false,
     {"qualname", "filename", "lineno", "code_id", "python_thread_id", "transition", nullptr,
      nullptr}},
    {"function_end",
     EventKind::FunctionEnd,
     false,
     {"qualname", "filename", "lineno", "code_id", "python_thread_id", "transition", nullptr,
      nullptr}},
    {"c_call_begin",
     EventKind::CCallBegin,
     false,
     {"caller_qualname", "caller_filename", "caller_lineno", "code_id", "python_thread_id",
      "transition", "callee_name", nullptr}},
    {"c_call_end",
     EventKind::CCallEnd,
     false,
     {"caller_qualname", "caller_filename", "caller_lineno", "code_id", "python_thread_id",
      "transition", "callee_name", nullptr}},
    {"compact_function_begin",
     EventKind::FunctionBegin,
     true,
     {nullptr, nullptr, nullptr, "code_id", "python_thread_id", "transition", nullptr, nullptr}},
    {"compact_function_end",
     EventKind::FunctionEnd,
     true,
     {nullptr, nullptr, nullptr, "code_id", "python_thread_id", "transition", nullptr, nullptr}},
    {"compact_c_call_begin",
     EventKind::CCallBegin,
     true,
     {nullptr, nullptr, "caller_lineno", "code_id", "python_thread_id", "transition", nullptr,
      "callable_id"}},
    {"compact_c_call_end",
     EventKind::CCallEnd,
     true,
     {nullptr, nullptr, "caller_lineno", "code_id", "python_thread_id", "transition", nullptr,
      "callable_id"}},
    {"code_info",
     EventKind::CodeInfo,
     false,
     {"qualname", "filename", "lineno", "code_id", nullptr, nullptr, nullptr, nullptr}},
    {"callable_info",
     EventKind::CallableInfo,
     false,
     {nullptr, nullptr, nullptr, "callable_id", nullptr, nullptr, "name", nullptr}},
    {"process_info",
     EventKind::ProcessInfo,
     false,
     {"hostname", "argv", "mpi_rank", "pid", "mpi_size", "python_version", "backend", "procname"}},
    {"thread_start",
     EventKind::ThreadStart,
     false,
     {"python_thread_id", "thread_ident", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}},
    {"import_begin",
     EventKind::ImportBegin,
     false,
     {"module", nullptr, nullptr, nullptr, "python_thread_id", "transition", nullptr, nullptr}},
    {"import_end",
     EventKind::ImportEnd,
     false,
     {"module", nullptr, nullptr, nullptr, "python_thread_id", "transition", nullptr, nullptr}},
    {"alloc_sample",
     EventKind::AllocSample,
     false,
     {"qualname", "filename", "lineno", "address", "python_thread_id", "source", "sampled_bytes",
      nullptr}},
    {"free_sample",
     EventKind::FreeSample,
     false,
     {nullptr, nullptr, nullptr, "address", nullptr, nullptr, nullptr, nullptr}},
    {"gil_switch",
     EventKind::GilSwitch,
     false,
     {nullptr, nullptr, "previous_thread_id", "wait_ns", "python_thread_id", nullptr, "released_ns",
      nullptr}},
    {"gil_released",
     EventKind::GilReleased,
     false,
     {nullptr, nullptr, nullptr, "wait_ns", "python_thread_id", "source", "released_ns",
      "before_ns"}},
    {"generator_end",
     EventKind::GeneratorEnd,
     false,
     {"qualname", "filename", "lineno", "code_id", "python_thread_id", "how", "lifetime_ns",
      "segments"}},
    {"event_block",
     EventKind::Block,
     true,
     {"python_thread_id", "tid", "first_sequence", "record_count", "base_clock", "flags", "records",
      nullptr}},
    {"mode_change",
     EventKind::ModeChange,
     false,
     {"mode", "reason", "config_generation", nullptr, nullptr, nullptr, nullptr, nullptr}},
    {"config_info",
     EventKind::ConfigInfo,
     false,
     {"path", "config_generation", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}},
    {"task_create",
     EventKind::TaskCreate,
     false,
     {"name", nullptr, nullptr, "task_id", "python_thread_id", nullptr, nullptr, nullptr}},
    {"task_name",
     EventKind::TaskName,
     false,
     {"name", nullptr, nullptr, "task_id", "python_thread_id", nullptr, nullptr, nullptr}},
    {"task_step",
     EventKind::TaskStep,
     false,
     {nullptr, nullptr, nullptr, "task_id", "python_thread_id", "transition", nullptr, nullptr}},
    {"task_await",
     EventKind::TaskAwait,
     false,
     {nullptr, nullptr, nullptr, "task_id", "python_thread_id", nullptr, "awaited_id", nullptr}},
    {"task_done",
     EventKind::TaskDone,
     false,
     {nullptr, nullptr, nullptr, "task_id", "python_thread_id", "how", nullptr, nullptr}},
    {"task_handoff",
     EventKind::TaskHandoff,
     false,
     {nullptr, nullptr, nullptr, "task_id", "python_thread_id", "transition", "work_id", nullptr}},
    {"lexgion_counts",
     EventKind::LexgionCounts,
     false,
     {"qualname", "filename", "lineno", "executions", "traced", "flags", "max_num_traces",
      "tracing_rate", "trace_starts_at", "section", nullptr}},
    {"open_frame",
     EventKind::OpenFrame,
     false,
     {"qualname", "filename", "lineno", "code_id", "python_thread_id", "tid", "callee", "depth",
      "dump_id", "begin_ns", nullptr}},
    {"dump_marker",
     EventKind::DumpMarker,
     false,
     {"reason", "threads", "frames", "status", "dump_id", nullptr, nullptr, nullptr}},
};

// Positions in EventLayout::fields of function_*, c_call_*, code_info and
// callable_info events.
enum FrameSlot {
  kQualname = 0,  // qualname / caller_qualname
  kFilename = 1,  // filename / caller_filename
  kLineno = 2,
  kCodeId = 3,  // code_id; callable_info: callable_id
  kThreadId = 4,
  kTransition = 5,
  kCallee = 6,      // callee_name; callable_info: name
  kCallableId = 7,  // compact c_call_*
};

int member_index(const bt_field_class *structure, const char *name, bool *is_signed) {
  if (structure == nullptr || name == nullptr) return -1;
  uint64_t count = bt_field_class_structure_get_member_count(structure);
  for (uint64_t i = 0; i < count; ++i) {
    const bt_field_class_structure_member *member =
        bt_field_class_structure_borrow_member_by_index_const(structure, i);
    if (std::strcmp(bt_field_class_structure_member_get_name(member), name) == 0) {
      const bt_field_class *member_class =
          bt_field_class_structure_member_borrow_field_class_const(member);
      *is_signed = bt_field_class_type_is(bt_field_class_get_type(member_class),
                                          BT_FIELD_CLASS_TYPE_SIGNED_INTEGER);
      return static_cast<int>(i);
    }
  }
  return -1;
}

inline const bt_field *member(const bt_field *structure, int index) {
  return bt_field_structure_borrow_member_field_by_index_const(structure,
                                                               static_cast<uint64_t>(index));
}

inline int64_t read_integer(const bt_field *structure, const FieldSlot &slot, int64_t absent) {
  if (slot.index < 0) return absent;
  const bt_field *field = member(structure, slot.index);
  return slot.is_signed ? bt_field_integer_signed_get_value(field)
                        : static_cast<int64_t>(bt_field_integer_unsigned_get_value(field));
}

// A string field as its length says: Babeltrace 2.0.4 leaves an empty string's
// value at the field's previous one.
inline std::string_view string_of(const bt_field *field) {
  return {bt_field_string_get_value(field), bt_field_string_get_length(field)};
}

inline StringRef read_string(const bt_field *structure, const FieldSlot &slot, EventBatch &batch) {
  if (slot.index < 0) return kNoString;
  const std::string_view text = string_of(member(structure, slot.index));
  return batch.add_string(text.data(), text.size());
}

// PInsight's CUDA provider: its device activity and clock calibration are single
// events, not _begin/_end pairs (cupti_lttng_ust_tracepoint.h).
constexpr std::string_view kCuptiPrefix = "cupti_pinsight_lttng_ust:";

bool device_event(std::string_view name, EventDecoder::ClassInfo &info) {
  const bt_field_class *payload = bt_event_class_borrow_payload_field_class_const(info.event_class);
  auto slot = [payload](const char *field, FieldSlot &out) {
    out.index = member_index(payload, field, &out.is_signed);
  };
  if (name == "cudaKernelActivity" || name == "cudaMemcpyActivity") {
    info.kind = EventKind::DeviceActivity;
    info.provider = std::string(kCuptiPrefix.substr(0, kCuptiPrefix.size() - 1));
    info.region = name == "cudaKernelActivity" ? "kernel" : "memcpy";
    slot("correlationId", info.correlation);
    slot("start_gpu", info.start_gpu);
    slot("end_gpu", info.end_gpu);
    slot("kernelName", info.kernel_name);
    slot("cudaMemcpyKind", info.copy_kind);
    slot("devId", info.device);
    slot("streamId", info.stream);
    return true;
  }
  if (name == "cuda_clock_calibration") {
    info.kind = EventKind::DeviceClock;
    info.provider = std::string(kCuptiPrefix.substr(0, kCuptiPrefix.size() - 1));
    slot("clock_monotonic_ns", info.monotonic_ns);
    slot("cupti_timestamp_ns", info.cupti_ns);
    return true;
  }
  return false;
}

// cudaMemcpyKind (cupti_lttng_ust_tracepoint.h's enumeration).
std::string_view memcpy_name(int64_t kind) {
  constexpr std::string_view kNames[] = {"memcpy HtoH", "memcpy HtoD", "memcpy DtoH", "memcpy DtoD",
                                         "memcpy"};
  return kind >= 0 && kind < 5 ? kNames[kind] : "memcpy";
}

// `reading`, a value of the clock of `message`'s event read by the traced
// process before the event (CLOCK_MONOTONIC: a block's base_clock, CUDA's
// calibration), as ns from origin like the event's `ts`. `ts` itself when the
// event has no clock or the reading is later than the event.
uint64_t reading_from_origin(const bt_message *message, uint64_t ts, uint64_t reading) {
  const bt_clock_snapshot *snapshot = bt_message_event_borrow_default_clock_snapshot_const(message);
  if (snapshot == nullptr) return ts;
  uint64_t frequency =
      bt_clock_class_get_frequency(bt_clock_snapshot_borrow_clock_class_const(snapshot));
  uint64_t value = bt_clock_snapshot_get_value(snapshot);
  if (value < reading) return ts;
  auto to_ns = [frequency](uint64_t cycles) {
    return frequency == 1000000000u ? cycles
                                    : static_cast<uint64_t>(static_cast<double>(cycles) * 1e9 /
                                                            static_cast<double>(frequency));
  };
  return ts - (to_ns(value) - to_ns(reading));
}

uint64_t ns_from_origin(const bt_clock_snapshot *snapshot) {
  int64_t ns = 0;
  if (snapshot == nullptr || bt_clock_snapshot_get_ns_from_origin(snapshot, &ns) !=
                                 BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK) {
    return 0;
  }
  return static_cast<uint64_t>(ns);
}

}  // namespace

const EventDecoder::ClassInfo &EventDecoder::class_info(const bt_event *event) {
  const bt_event_class *event_class = bt_event_borrow_class_const(event);
  if (last_class_ != nullptr && last_class_->event_class == event_class) return *last_class_;
  for (const ClassInfo &info : classes_) {
    if (info.event_class == event_class) return *(last_class_ = &info);
  }
  ClassInfo info;
  info.event_class = event_class;
  info.has_clock = bt_stream_class_borrow_default_clock_class_const(
                       bt_event_class_borrow_stream_class_const(event_class)) != nullptr;
  // An event class belongs to one trace: its host is the class's host.
  const bt_value *hostname = bt_trace_borrow_environment_entry_value_by_name_const(
      bt_stream_borrow_trace_const(bt_event_borrow_stream_const(event)), "hostname");
  info.host = hosts_.id(
      hostname != nullptr && bt_value_is_string(hostname) ? bt_value_string_get(hostname) : "");
  const char *name = bt_event_class_get_name(event_class);
  std::string_view full = name ? name : "";
  if (full.substr(0, kProviderPrefix.size()) == kProviderPrefix) {
    std::string_view short_name = full.substr(kProviderPrefix.size());
    for (const EventLayout &layout : kLayouts) {
      if (layout.name != short_name) continue;
      info.ours = true;
      info.kind = layout.kind;
      info.compact = layout.compact;
      const bt_field_class *payload = bt_event_class_borrow_payload_field_class_const(event_class);
      for (int i = 0; i < kMaxFields; ++i) {
        info.payload[i].index = member_index(payload, layout.fields[i], &info.payload[i].is_signed);
      }
    }
  } else if (full.substr(0, kCuptiPrefix.size()) == kCuptiPrefix &&
             device_event(full.substr(kCuptiPrefix.size()), info)) {
    info.native = true;
  } else {
    // Another provider's PROVIDER:NAME_begin / PROVIDER:NAME_end: a native region
    // (PInsight's OpenMP, MPI and CUDA domains, or any provider following the rule).
    size_t colon = full.find(':');
    std::string_view event_name = colon == std::string_view::npos ? "" : full.substr(colon + 1);
    for (auto [suffix, kind] : {std::pair{std::string_view("_begin"), EventKind::NativeBegin},
                                std::pair{std::string_view("_end"), EventKind::NativeEnd}}) {
      if (event_name.size() > suffix.size() &&
          event_name.substr(event_name.size() - suffix.size()) == suffix) {
        info.native = true;
        info.kind = kind;
        info.provider = std::string(full.substr(0, colon));
        info.region = std::string(event_name.substr(0, event_name.size() - suffix.size()));
        const bt_field_class *payload =
            bt_event_class_borrow_payload_field_class_const(event_class);
        info.parallel_codeptr.index =
            member_index(payload, "parallel_codeptr", &info.parallel_codeptr.is_signed);
        info.parallel_record_id.index =
            member_index(payload, "parallel_record_id", &info.parallel_record_id.is_signed);
        info.correlation.index =
            member_index(payload, "correlationId", &info.correlation.is_signed);
      }
    }
  }
  if (info.ours || info.native) {
    const bt_field_class *context = bt_stream_class_borrow_event_common_context_field_class_const(
        bt_event_class_borrow_stream_class_const(event_class));
    info.vpid.index = member_index(context, "vpid", &info.vpid.is_signed);
    info.vtid.index = member_index(context, "vtid", &info.vtid.is_signed);
    info.procname.index = member_index(context, "procname", &info.procname.is_signed);
  }
  classes_.push_back(info);
  return *(last_class_ = &classes_.back());
}

void EventDecoder::decode(const bt_message *message, uint32_t stream, EventBatch &batch) {
  switch (bt_message_get_type(message)) {
    case BT_MESSAGE_TYPE_EVENT:
      decode_event(message, stream, batch);
      break;
    case BT_MESSAGE_TYPE_DISCARDED_EVENTS:
      decode_discarded(message, batch, false);
      break;
    case BT_MESSAGE_TYPE_DISCARDED_PACKETS:
      decode_discarded(message, batch, true);
      break;
    default:
      break;
  }
}

void EventDecoder::decode_event(const bt_message *message, uint32_t stream, EventBatch &batch) {
  const bt_event *event = bt_message_event_borrow_event_const(message);
  const ClassInfo &info = class_info(event);
  uint64_t ts = info.has_clock
                    ? ns_from_origin(bt_message_event_borrow_default_clock_snapshot_const(message))
                    : last_ts_ns_;
  last_ts_ns_ = ts;
  if (!info.ours && !info.native) {
    ++foreign_events_;
    return;
  }
  RawEvent &out = batch.events.emplace_back();
  out.ts_ns = ts;
  out.kind = info.kind;
  out.host = info.host;
  out.stream = stream_ref(stream);
  out.extra = 0;
  out.str[0] = out.str[1] = out.str[2] = out.str[3] = kNoString;
  out.procname = kNoString;
  out.compact = info.compact;

  const bt_field *context = bt_event_borrow_common_context_field_const(event);
  if (context != nullptr) {
    out.vpid = static_cast<int32_t>(read_integer(context, info.vpid, -1));
    out.vtid = static_cast<int32_t>(read_integer(context, info.vtid, -1));
  } else {
    out.vpid = out.vtid = -1;
  }
  // The process name is needed once per process, not per event.
  uint64_t process = (static_cast<uint64_t>(out.host) << 32) | static_cast<uint32_t>(out.vpid);
  if (process != last_process_) {
    last_process_ = process;
    if (context != nullptr && info.procname.index >= 0 && processes_named_.insert(process).second) {
      out.procname = read_string(context, info.procname, batch);
    }
  }

  const bt_field *payload = bt_event_borrow_payload_field_const(event);
  const FieldSlot *slot = info.payload;
  switch (info.kind) {
    case EventKind::FunctionBegin:
    case EventKind::FunctionEnd:
    case EventKind::CCallBegin:
    case EventKind::CCallEnd:
    case EventKind::CodeInfo:
    case EventKind::CallableInfo:
      // A native call's end is matched by its callee alone.
      if (info.kind != EventKind::CCallEnd) {
        out.str[0] = read_string(payload, slot[kQualname], batch);
        out.str[1] = read_string(payload, slot[kFilename], batch);
      }
      out.str[2] = read_string(payload, slot[kCallee], batch);
      out.extra = static_cast<uint64_t>(read_integer(payload, slot[kCallableId], 0));
      out.lineno = static_cast<int32_t>(read_integer(payload, slot[kLineno], 0));
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[kCodeId], 0));
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, slot[kThreadId], -1));
      out.transition = static_cast<uint8_t>(read_integer(payload, slot[kTransition], 0));
      out.aux = 0;
      break;
    case EventKind::ImportBegin:
    case EventKind::ImportEnd:
    case EventKind::AllocSample:
    case EventKind::FreeSample: {
      out.str[0] = read_string(payload, slot[kQualname], batch);
      out.str[1] = read_string(payload, slot[kFilename], batch);
      out.lineno = static_cast<int32_t>(read_integer(payload, slot[kLineno], 0));
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[kCodeId], 0));
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, slot[kThreadId], -1));
      out.transition = static_cast<uint8_t>(read_integer(payload, slot[kTransition], 0));
      out.extra = static_cast<uint64_t>(read_integer(payload, slot[kCallee], 0));
      out.aux = 0;
      break;
    }
    case EventKind::GeneratorEnd:
      out.str[0] = read_string(payload, slot[kQualname], batch);
      out.str[1] = read_string(payload, slot[kFilename], batch);
      // The compact payload leaves the names out, the full one the file:
      // code_info gives them (kNoString: as a full frame event without one).
      out.compact = batch.string(out.str[0]).empty();
      if (batch.string(out.str[1]).empty()) out.str[1] = kNoString;
      out.lineno = static_cast<int32_t>(read_integer(payload, slot[kLineno], 0));
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[kCodeId], 0));
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, slot[kThreadId], -1));
      out.transition = static_cast<uint8_t>(read_integer(payload, slot[kTransition], 0));
      out.extra = static_cast<uint64_t>(read_integer(payload, slot[6], 0));
      out.aux = static_cast<int32_t>(read_integer(payload, slot[7], 0));
      break;
    case EventKind::ProcessInfo:
      // hostname, argv, mpi_rank, pid, mpi_size, python_version, backend
      out.str[0] = read_string(payload, slot[0], batch);
      out.str[1] = read_string(payload, slot[1], batch);
      out.lineno = static_cast<int32_t>(read_integer(payload, slot[2], -1));
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[3], -1));
      out.aux = static_cast<int32_t>(read_integer(payload, slot[4], -1));
      out.str[2] = read_string(payload, slot[5], batch);
      out.str[3] = read_string(payload, slot[6], batch);
      if (slot[7].index >= 0) out.procname = read_string(payload, slot[7], batch);
      out.python_thread_id = -1;
      out.transition = 0;
      break;
    case EventKind::NativeBegin:
    case EventKind::NativeEnd:
      out.str[0] = batch.add_string(info.provider.data(), info.provider.size());
      out.str[1] = batch.add_string(info.region.data(), info.region.size());
      out.python_thread_id = -1;
      out.lineno = 0;
      // aux: 1 when the region names its enclosing parallel region (code_id, extra).
      out.aux = info.parallel_codeptr.index >= 0 && info.parallel_record_id.index >= 0 ? 1 : 0;
      out.code_id = static_cast<uint64_t>(read_integer(payload, info.parallel_codeptr, 0));
      out.extra = static_cast<uint64_t>(read_integer(payload, info.parallel_record_id, 0));
      out.transition = 0;
      // aux 2: a CUDA launch's correlationId, in lineno.
      if (info.correlation.index >= 0) {
        out.aux |= 2;
        out.lineno = static_cast<int32_t>(read_integer(payload, info.correlation, 0));
      }
      break;
    case EventKind::GilSwitch:
    case EventKind::GilReleased: {
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[3], 0));
      out.extra = static_cast<uint64_t>(read_integer(payload, slot[6], 0));
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, slot[4], -1));
      out.transition = static_cast<uint8_t>(read_integer(payload, slot[5], 0));
      if (info.kind == EventKind::GilSwitch) {
        out.lineno = static_cast<int32_t>(read_integer(payload, slot[2], -1));
        out.aux = 0;
      } else {
        // No 64-bit field is left in a record: before_ns is split over two.
        auto before = static_cast<uint64_t>(read_integer(payload, slot[7], 0));
        out.lineno = static_cast<int32_t>(static_cast<uint32_t>(before));
        out.aux = static_cast<int32_t>(static_cast<uint32_t>(before >> 32));
      }
      break;
    }
    case EventKind::DeviceActivity: {
      out.str[0] = batch.add_string(info.provider.data(), info.provider.size());
      std::string_view name = info.kernel_name.index >= 0
                                  ? string_of(member(payload, info.kernel_name.index))
                                  : memcpy_name(read_integer(payload, info.copy_kind, -1));
      out.str[1] = batch.add_string(name.data(), name.size());
      char stream[16];
      auto written = std::to_chars(stream, stream + sizeof stream,
                                   static_cast<uint32_t>(read_integer(payload, info.stream, 0)));
      out.str[2] = batch.add_string(stream, static_cast<size_t>(written.ptr - stream));
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, info.device, 0));
      out.code_id = static_cast<uint64_t>(read_integer(payload, info.correlation, 0));
      out.extra = static_cast<uint64_t>(read_integer(payload, info.start_gpu, 0));
      auto end = static_cast<uint64_t>(read_integer(payload, info.end_gpu, 0));
      out.lineno = static_cast<int32_t>(static_cast<uint32_t>(end));
      out.aux = static_cast<int32_t>(static_cast<uint32_t>(end >> 32));
      out.transition = 0;
      break;
    }
    case EventKind::DeviceClock: {
      out.str[0] = batch.add_string(info.provider.data(), info.provider.size());
      out.str[1] = batch.add_string("clock", 5);
      auto monotonic = read_integer(payload, info.monotonic_ns, 0);
      auto cupti = read_integer(payload, info.cupti_ns, 0);
      out.code_id = reading_from_origin(message, ts, static_cast<uint64_t>(monotonic)) -
                    static_cast<uint64_t>(cupti);
      out.python_thread_id = -1;
      out.lineno = out.aux = 0;
      out.extra = 0;
      out.transition = 0;
      break;
    }
    case EventKind::ConfigInfo:
      out.str[0] = read_string(payload, slot[0], batch);
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[1], 0));
      out.python_thread_id = -1;
      out.lineno = out.aux = 0;
      out.transition = 0;
      break;
    case EventKind::LexgionCounts: {
      auto clamp = [](int64_t v) {
        return static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(v, INT32_MIN), INT32_MAX));
      };
      out.str[0] = read_string(payload, slot[0], batch);
      out.str[1] = read_string(payload, slot[1], batch);
      out.lineno = static_cast<int32_t>(read_integer(payload, slot[2], 0));
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[3], 0));
      out.extra = static_cast<uint64_t>(read_integer(payload, slot[4], 0));
      out.transition = static_cast<uint8_t>(read_integer(payload, slot[5], 0));
      out.aux = clamp(read_integer(payload, slot[6], -1));
      out.python_thread_id = -1;
      std::string settings = std::to_string(read_integer(payload, slot[7], 1)) + " " +
                             std::to_string(read_integer(payload, slot[8], 0));
      out.str[3] = batch.add_string(settings.data(), settings.size());
      out.str[2] = read_string(payload, slot[9], batch);
      break;
    }
    case EventKind::ModeChange:
      out.str[0] = read_string(payload, slot[0], batch);
      out.str[1] = read_string(payload, slot[1], batch);
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[2], 0));
      out.python_thread_id = -1;
      out.lineno = out.aux = 0;
      out.transition = 0;
      break;
    case EventKind::Block: {
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, slot[0], -1));
      // The records' thread: the control thread flushes an idle thread's block.
      int64_t tid = read_integer(payload, slot[1], -1);
      if (tid > 0) out.vtid = static_cast<int32_t>(tid);
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[2], 0));
      out.aux = static_cast<int32_t>(read_integer(payload, slot[3], 0));
      out.transition = static_cast<uint8_t>(read_integer(payload, slot[5], 0));
      // base_clock is a raw value of the event's own clock: placed on the same
      // origin as the event's timestamp.
      auto base_clock = static_cast<uint64_t>(read_integer(payload, slot[4], 0));
      out.extra =
          info.has_clock && base_clock != 0 ? reading_from_origin(message, ts, base_clock) : ts;
      out.lineno = 0;
      if (slot[6].index >= 0) {
        const bt_field *records = member(payload, slot[6].index);
        uint64_t length = bt_field_array_get_length(records);
        size_t at = batch.arena.size();
        batch.arena.resize(at + length);
        for (uint64_t i = 0; i < length; ++i) {
          batch.arena[at + i] = static_cast<char>(bt_field_integer_unsigned_get_value(
              bt_field_array_borrow_element_field_by_index_const(records, i)));
        }
        out.str[0] = static_cast<StringRef>(at);
        out.lineno = static_cast<int32_t>(length);
      }
      break;
    }
    case EventKind::TaskCreate:
    case EventKind::TaskName:
    case EventKind::TaskStep:
    case EventKind::TaskAwait:
    case EventKind::TaskDone:
    case EventKind::TaskHandoff:
      out.str[0] = read_string(payload, slot[kQualname], batch);
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[kCodeId], 0));
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, slot[kThreadId], -1));
      out.transition = static_cast<uint8_t>(read_integer(payload, slot[kTransition], 0));
      out.extra = static_cast<uint64_t>(read_integer(payload, slot[kCallee], 0));
      out.lineno = out.aux = 0;
      break;
    case EventKind::OpenFrame: {
      out.str[0] = read_string(payload, slot[0], batch);
      out.str[1] = read_string(payload, slot[1], batch);
      out.lineno = static_cast<int32_t>(read_integer(payload, slot[2], 0));
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[3], 0));
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, slot[4], -1));
      // The frame's thread: the event is written by whichever thread took the dump.
      int64_t tid = read_integer(payload, slot[5], -1);
      if (tid > 0) out.vtid = static_cast<int32_t>(tid);
      out.str[2] = read_string(payload, slot[6], batch);
      std::string depth = std::to_string(read_integer(payload, slot[7], 0));
      out.str[3] = batch.add_string(depth.data(), depth.size());
      out.aux = static_cast<int32_t>(read_integer(payload, slot[8], 0));
      // On the event's clock, placed on the origin as event_block's base_clock is.
      auto begin = static_cast<uint64_t>(read_integer(payload, slot[9], 0));
      out.extra = info.has_clock && begin != 0 ? reading_from_origin(message, ts, begin) : 0;
      out.transition = 0;
      break;
    }
    case EventKind::DumpMarker:
      out.str[0] = read_string(payload, slot[0], batch);
      out.lineno = static_cast<int32_t>(read_integer(payload, slot[1], 0));
      out.extra = static_cast<uint64_t>(read_integer(payload, slot[2], 0));
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[3], 0));
      out.aux = static_cast<int32_t>(read_integer(payload, slot[4], 0));
      out.python_thread_id = -1;
      out.transition = 0;
      break;
    case EventKind::ThreadStart:
      out.python_thread_id = static_cast<int32_t>(read_integer(payload, slot[0], -1));
      out.code_id = static_cast<uint64_t>(read_integer(payload, slot[1], 0));
      out.lineno = out.aux = 0;
      out.transition = 0;
      break;
    default:
      out.code_id = 0;
      out.python_thread_id = -1;
      out.lineno = out.aux = 0;
      out.transition = 0;
      break;
  }
}

void EventDecoder::decode_discarded(const bt_message *message, EventBatch &batch, bool packets) {
  uint64_t count = 0;
  const bt_stream *stream;
  uint64_t begin = 0, end = 0;
  bool has_count;
  if (packets) {
    has_count = bt_message_discarded_packets_get_count(message, &count) ==
                BT_PROPERTY_AVAILABILITY_AVAILABLE;
    stream = bt_message_discarded_packets_borrow_stream_const(message);
    if (bt_stream_class_discarded_packets_have_default_clock_snapshots(
            bt_stream_borrow_class_const(stream))) {
      begin = ns_from_origin(
          bt_message_discarded_packets_borrow_beginning_default_clock_snapshot_const(message));
      end = ns_from_origin(
          bt_message_discarded_packets_borrow_end_default_clock_snapshot_const(message));
    }
  } else {
    has_count = bt_message_discarded_events_get_count(message, &count) ==
                BT_PROPERTY_AVAILABILITY_AVAILABLE;
    stream = bt_message_discarded_events_borrow_stream_const(message);
    if (bt_stream_class_discarded_events_have_default_clock_snapshots(
            bt_stream_borrow_class_const(stream))) {
      begin = ns_from_origin(
          bt_message_discarded_events_borrow_beginning_default_clock_snapshot_const(message));
      end = ns_from_origin(
          bt_message_discarded_events_borrow_end_default_clock_snapshot_const(message));
    }
  }
  RawEvent &out = batch.events.emplace_back();
  out = RawEvent{};
  out.kind = packets ? EventKind::DiscardedPackets : EventKind::Discarded;
  // Unknown counts are reported as 1: something was lost.
  out.code_id = has_count ? count : 1;
  // Placed at the range's beginning: the time babeltrace's muxer orders it by,
  // so that each decoding thread's events stay in time order (the events of
  // the packet after the loss, earlier than the range's end, follow it).
  out.ts_ns = begin != 0 ? begin : last_ts_ns_;
  out.extra = end != 0 ? end : out.ts_ns;
  out.vpid = -1;
  out.host = 0;
  out.vtid = static_cast<int32_t>(bt_stream_get_id(stream));
  out.str[0] = out.str[1] = out.str[2] = out.str[3] = kNoString;
  out.procname = kNoString;
  out.compact = false;
  out.stream = kNoStreamRef;
}

void EventDecoder::decode_loss(const StreamLoss &loss, int64_t stream_id, EventBatch &batch) {
  RawEvent &out = batch.events.emplace_back();
  out = RawEvent{};
  out.ts_ns = loss.ts_ns;
  out.extra = loss.end_ns;
  out.code_id = loss.count;
  switch (loss.kind) {
    case StreamLoss::Damage:
      out.kind = EventKind::Damage;
      break;
    case StreamLoss::DiscardedEvents:
      out.kind = EventKind::Discarded;
      break;
    case StreamLoss::DiscardedPackets:
      out.kind = EventKind::DiscardedPackets;
      break;
  }
  out.vpid = -1;
  out.vtid = static_cast<int32_t>(stream_id);
  out.str[0] = out.str[1] = out.str[2] = out.str[3] = kNoString;
  out.procname = kNoString;
  out.stream = stream_ref(loss.stream);
}

}  // namespace pinsight_reader
