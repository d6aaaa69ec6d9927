// Compact records passed from the decoding thread to the analysis thread.
//
// Decoding (babeltrace2) is the most expensive part of reading a trace, so
// it runs on its own thread and does as little as possible: it copies the
// fields the analysis needs into these records and nothing else. Strings are
// copied into the batch's arena; the analysis thread interns them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "format/wire.h"

namespace pinsight_reader {

enum class EventKind : uint8_t {
  FunctionBegin,
  FunctionEnd,
  CCallBegin,
  CCallEnd,
  ProcessInfo,
  ThreadStart,
  CodeInfo,      // compact payload: names of a code object
  CallableInfo,  // compact payload: name of a native callee
  ModeChange,    // str[0]: mode, str[1]: reason, code_id: config_generation
  ConfigInfo,    // str[0]: path ("" for the defaults), code_id: config_generation
  // lexgion_counts: str[0..1]: qualname, filename, lineno; code_id: executions,
  // extra: traced, transition: flags, aux: max_num_traces (-1: none; clamped to
  // int32), str[2]: section, str[3]: "tracing_rate trace_starts_at" in decimal
  LexgionCounts,
  Discarded,  // LTTng discarded events (ring buffer full)
  DiscardedPackets,
  Damage,       // the trace lost packets of `stream` here (damage.h); extra: where the loss ends
  ImportBegin,  // str[0]: module; transition: import_transition
  ImportEnd,
  AllocSample,     // code_id: address, extra: sampled_bytes, aux: size (capped), transition: source
  FreeSample,      // code_id: address
  GilSwitch,       // code_id: wait_ns, extra: released_ns, lineno: previous_thread_id
  GilReleased,     // code_id: wait_ns, extra: released_ns, before_ns: lineno (low 32 bits)
                   // and aux (high 32 bits), transition: source
  GeneratorEnd,    // a generator instance's end: extra: lifetime_ns, aux: segments,
                   // transition: generator_end_kind; compact when its names are empty
  NativeBegin,     // another provider's NAME_begin; str[0]: provider, str[1]: NAME;
                   // aux 1: OpenMP's enclosing parallel region is code_id (codeptr), extra
  NativeEnd,       // its NAME_end
  DeviceActivity,  // CUDA kernel or memcpy on the device (cupti_pinsight_lttng_ust): str[0]:
                   // provider, str[1]: kernel name / memcpy kind, str[2]: streamId in decimal;
                   // python_thread_id: devId; code_id: correlationId;
                   // extra: start_gpu; lineno | aux << 32: end_gpu (CUPTI ns)
  DeviceClock,     // cuda_clock_calibration: code_id: what to add to CUPTI ns for ns from origin
  Block,           // batched payload's event_block: vtid: its tid; code_id: first_sequence;
                   // extra: base_clock as ns from origin; aux: record_count; transition:
                   // flags; str[0]: the records' bytes, lineno: their length
  // asyncio tasks (task_events.h): code_id: task_id; str[0]: name (create, name);
  // extra: awaited_id (await), work_id (handoff); transition: how (done), kind (step,
  // handoff)
  TaskCreate,
  TaskName,
  TaskStep,
  TaskAwait,
  TaskDone,
  TaskHandoff,
  // A flight recorder's dump (open_frame): one frame open on thread vtid (the
  // event's tid field), python_thread_id; aux: dump_id; code_id; str[0..1]:
  // qualname, filename; lineno; str[2]: the native callee ("" for a Python
  // frame); str[3]: its depth in decimal; extra: begin_ns from origin (0: unknown).
  OpenFrame,
  DumpMarker,  // dump_marker: aux: dump_id; str[0]: reason; lineno: threads;
               // extra: frames; code_id: status (PINSIGHT_DUMP_* bits)
};
inline constexpr size_t kEventKinds = static_cast<size_t>(EventKind::DumpMarker) + 1;
inline bool is_task_event(EventKind kind) {
  return kind >= EventKind::TaskCreate && kind <= EventKind::TaskHandoff;
}

// The provider's enumerations (import_transition, alloc_source, frame_transition,
// c_call_transition), as the emitter writes them.
using pinsight::wire::kCall;
using pinsight::wire::kCRaise;
using pinsight::wire::kCReturn;
using pinsight::wire::kImportLoad;
using pinsight::wire::kImportRaise;
using pinsight::wire::kImportReturn;
using pinsight::wire::kNative;
using pinsight::wire::kPythonMem;
using pinsight::wire::kPythonObject;
using pinsight::wire::kPythonRaw;
using pinsight::wire::kResume;
using pinsight::wire::kReturn;
using pinsight::wire::kStart;
using pinsight::wire::kThrow;
using pinsight::wire::kUnwind;
using pinsight::wire::kYield;

// The stream an event was read from (TraceSet's numbering), as records carry
// it: kNoStreamRef when unknown, or past the first 65535 streams.
using StreamRef = uint16_t;
inline constexpr StreamRef kNoStreamRef = UINT16_MAX;
inline StreamRef stream_ref(uint32_t stream) {
  return stream < kNoStreamRef ? static_cast<StreamRef>(stream) : kNoStreamRef;
}

// An offset into EventBatch::arena; kNoString when absent.
using StringRef = uint32_t;
inline constexpr StringRef kNoString = UINT32_MAX;

struct RawEvent {
  uint64_t ts_ns;    // ns from origin; for Discarded, the end of the range
  uint64_t code_id;  // function_*/c_call_*/code_info; thread_ident; callable_info's
                     // callable_id; discarded count
  uint64_t extra;    // compact c_call_*: callable_id; Discarded: beginning of the range
  int32_t vpid;      // -1 when the vpid context is absent
  int32_t vtid;      // -1 when the vtid context is absent; Discarded: stream id
  int32_t python_thread_id;
  int32_t lineno;  // lineno / caller_lineno; process_info: mpi_rank
  int32_t aux;     // process_info: mpi_size, pid in `code_id`
  // function_*, code_info: qualname, filename; c_call_*: caller_qualname,
  // caller_filename, callee_name; callable_info: -, -, name; process_info:
  // hostname, argv, python_version, backend. Compact events carry no strings;
  // full frame and native-call events no filename (kNoString: code_info names
  // it) unless an earlier version wrote them.
  StringRef str[4];
  StringRef procname;  // first event of a vpid with the procname context; process_info
  uint16_t host;       // HostRegistry id of the trace's hostname
  EventKind kind;
  uint8_t transition;
  bool compact;      // a compact_* event: names by id (SymbolTable)
  StreamRef stream;  // in the padding: the record stays 72 bytes
};

// A run of consecutive events, recycled between the two threads.
struct EventBatch {
  std::vector<RawEvent> events;
  std::vector<char> arena;
  uint64_t bytes_read = 0;  // packet bytes begun while filling this batch

  void clear() {
    events.clear();
    arena.clear();
    bytes_read = 0;
  }

  StringRef add_string(const char *s, size_t len) {
    auto ref = static_cast<StringRef>(arena.size());
    arena.insert(arena.end(), s, s + len);
    arena.push_back('\0');
    return ref;
  }

  std::string_view string(StringRef ref) const {
    if (ref == kNoString) return {};
    return std::string_view(arena.data() + ref);
  }
};

}  // namespace pinsight_reader
