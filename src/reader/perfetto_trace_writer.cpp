#include "perfetto_trace_writer.h"

#include <algorithm>

#include "proto_encoder.h"

namespace pinsight_reader {
namespace {

// Field numbers of protos/perfetto/trace (trace_packet.proto and what it holds).
namespace packet {
constexpr uint32_t kOuter = 1;  // Trace.packet
constexpr uint32_t kClockSnapshot = 6;
constexpr uint32_t kTimestamp = 8;
constexpr uint32_t kSequenceId = 10;  // trusted_packet_sequence_id
constexpr uint32_t kTrackEvent = 11;
constexpr uint32_t kInternedData = 12;
constexpr uint32_t kSequenceFlags = 13;
constexpr uint32_t kTimestampClockId = 58;
constexpr uint32_t kDefaults = 59;  // trace_packet_defaults
constexpr uint32_t kTrackDescriptor = 60;
constexpr uint64_t kIncrementalStateCleared = 1;
}  // namespace packet
namespace defaults {
constexpr uint32_t kTimestampClockId = 58;
constexpr uint32_t kTrackEventDefaults = 11;
constexpr uint32_t kTrackUuid = 11;
}  // namespace defaults
namespace clock {
constexpr uint32_t kClocks = 1;
constexpr uint32_t kPrimaryTraceClock = 2;
constexpr uint32_t kId = 1;
constexpr uint32_t kTimestamp = 2;
constexpr uint32_t kIsIncremental = 3;
// BUILTIN_CLOCK_BOOTTIME, the clock trace_processor takes for trace time;
// ours counts from the trace's first event. 64: the first sequence-scoped id.
constexpr uint64_t kTraceClock = 6;
constexpr uint64_t kIncremental = 64;
}  // namespace clock
namespace track {
constexpr uint32_t kUuid = 1;
constexpr uint32_t kName = 2;
constexpr uint32_t kProcess = 3;
constexpr uint32_t kThread = 4;
constexpr uint32_t kParentUuid = 5;
constexpr uint32_t kCounter = 8;
constexpr uint32_t kChildOrdering = 11;
constexpr uint64_t kChronological = 2;  // ChildTracksOrdering: by their first events
constexpr uint32_t kProcessPid = 1;
constexpr uint32_t kProcessCmdline = 2;
constexpr uint32_t kProcessName = 6;
constexpr uint32_t kProcessLabels = 8;
constexpr uint32_t kThreadPid = 1;
constexpr uint32_t kThreadTid = 2;
constexpr uint32_t kThreadName = 5;
constexpr uint32_t kCounterUnit = 3;
constexpr uint64_t kUnitSizeBytes = 3;
}  // namespace track
namespace interned {
constexpr uint32_t kCategories = 1;
constexpr uint32_t kNames = 2;
constexpr uint32_t kAnnotationNames = 3;
constexpr uint32_t kSourceLocations = 4;
constexpr uint32_t kAnnotationStrings = 29;
constexpr uint32_t kIid = 1;
constexpr uint32_t kName = 2;  // EventName.name, EventCategory.name, InternedString.str
constexpr uint32_t kFileName = 2;
constexpr uint32_t kFunctionName = 3;
constexpr uint32_t kLineNumber = 4;
}  // namespace interned
namespace event {
constexpr uint32_t kCategoryIids = 3;
constexpr uint32_t kAnnotations = 4;
constexpr uint32_t kType = 9;
constexpr uint32_t kNameIid = 10;
constexpr uint32_t kTrackUuid = 11;
constexpr uint32_t kName = 23;
constexpr uint32_t kCounterValue = 30;
constexpr uint32_t kSourceLocationIid = 34;
constexpr uint32_t kFlowIds = 47;
constexpr int kSliceBegin = 1;
constexpr int kSliceEnd = 2;
constexpr int kInstant = 3;
constexpr int kCounter = 4;
}  // namespace event
namespace annotation {
constexpr uint32_t kNameIid = 1;
constexpr uint32_t kIntValue = 4;
constexpr uint32_t kStringValue = 6;
constexpr uint32_t kName = 10;
constexpr uint32_t kStringValueIid = 17;
}  // namespace annotation

// The reader's pseudo-file of import frames (resource_events.cpp).
constexpr std::string_view kImportFile = "<import>";

const char *exit_text(FrameExit exit) {
  switch (exit) {
    case FrameExit::Return:
      break;
    case FrameExit::Yield:
      return "yield";
    case FrameExit::Unwind:
      return "unwind";
    case FrameExit::Raise:
      return "raise";
    case FrameExit::Implicit:
      return "unmatched (closed by an outer frame's end)";
    case FrameExit::OpenAtEnd:
      return "open at trace end";
    case FrameExit::Damaged:
      return "cut off by damage to the trace";
  }
  return nullptr;
}

// "[OpenMP] parallel" -> "OpenMP": the track of the region's domain.
std::string domain_track_name(const std::string &label, const std::string &domain) {
  if (label.size() > 2 && label[0] == '[') {
    size_t close = label.find(']');
    if (close != std::string::npos) return label.substr(1, close - 1);
  }
  return domain;
}

}  // namespace

PerfettoTraceWriter::PerfettoTraceWriter(const std::string &path, bool compress)
    : sink_(path, compress) {
  chunk_.reserve(PacketSink::kChunkBytes + 4096);
}

PerfettoTraceWriter::~PerfettoTraceWriter() = default;

// --- packets ---------------------------------------------------------------

void PerfettoTraceWriter::start_sequence(Sequence &seq, uint64_t ts) {
  // Its incremental state cleared, its defaults (track, incremental clock), and
  // the clock's first value: events then carry the ns since the previous one.
  ProtoEncoder out(chunk_);
  size_t p = out.begin(packet::kOuter);
  out.uint_field(packet::kSequenceId, seq.id);
  out.uint_field(packet::kSequenceFlags, packet::kIncrementalStateCleared);
  size_t d = out.begin(packet::kDefaults);
  out.uint_field(defaults::kTimestampClockId, clock::kIncremental);
  size_t e = out.begin(defaults::kTrackEventDefaults);
  out.uint_field(defaults::kTrackUuid, seq.default_track);
  out.end(e);
  out.end(d);
  size_t snapshot = out.begin(packet::kClockSnapshot);
  size_t c = out.begin(clock::kClocks);
  out.uint_field(clock::kId, clock::kTraceClock);
  out.uint_field(clock::kTimestamp, ts);
  out.end(c);
  c = out.begin(clock::kClocks);
  out.uint_field(clock::kId, clock::kIncremental);
  out.uint_field(clock::kTimestamp, ts);
  out.bool_field(clock::kIsIncremental, true);
  out.end(c);
  out.uint_field(clock::kPrimaryTraceClock, clock::kTraceClock);
  out.end(snapshot);
  seq.cleared = true;
  seq.last_ts = ts;
  end_packet(p);
}

size_t PerfettoTraceWriter::begin_packet(Sequence &seq, uint64_t ts_ns) {
  uint64_t ts = relative(ts_ns);
  if (!seq.cleared) start_sequence(seq, ts);
  ProtoEncoder out(chunk_);
  size_t p = out.begin(packet::kOuter);
  if (ts >= seq.last_ts) {
    out.uint_field(packet::kTimestamp, ts - seq.last_ts);
    seq.last_ts = ts;
  } else {
    // Earlier than the sequence's clock: absolute, on the trace's clock.
    out.uint_field(packet::kTimestamp, ts);
    out.uint_field(packet::kTimestampClockId, clock::kTraceClock);
  }
  out.uint_field(packet::kSequenceId, seq.id);
  return p;
}

size_t PerfettoTraceWriter::begin_untimed_packet(uint32_t sequence_id) {
  ProtoEncoder out(chunk_);
  size_t p = out.begin(packet::kOuter);
  out.uint_field(packet::kSequenceId, sequence_id);
  return p;
}

void PerfettoTraceWriter::end_packet(size_t packet) {
  ProtoEncoder(chunk_).end(packet);
  ++packets_;
  if (chunk_.size() >= PacketSink::kChunkBytes) sink_.write(chunk_);
}

// --- interning -------------------------------------------------------------

void PerfettoTraceWriter::flush_interned() {
  if (interned_.empty()) return;
  ProtoEncoder out(chunk_);
  out.tag(packet::kInternedData, ProtoEncoder::kLength);
  out.varint(interned_.size());
  chunk_ += interned_;
  interned_.clear();
}

void PerfettoTraceWriter::fixed(Sequence &seq, uint32_t bit, uint32_t table, uint32_t iid,
                                const char *name) {
  if (seq.defined & bit) return;
  seq.defined |= bit;
  ProtoEncoder out(interned_);
  size_t entry = out.begin(table);
  out.uint_field(interned::kIid, iid);
  out.string_field(interned::kName, name);
  out.end(entry);
}

uint32_t PerfettoTraceWriter::intern(std::unordered_map<std::string, uint32_t> &ids, uint32_t &next,
                                     uint32_t table, const std::string &text) {
  auto [it, added] = ids.try_emplace(text, 0);
  if (added) {
    it->second = next++;
    ProtoEncoder out(interned_);
    size_t entry = out.begin(table);
    out.uint_field(interned::kIid, it->second);
    out.string_field(interned::kName, text);
    out.end(entry);
  }
  return it->second;
}

uint32_t PerfettoTraceWriter::name_iid(Sequence &seq, const std::string &name) {
  return intern(seq.names, seq.next_name, interned::kNames, name);
}

uint32_t PerfettoTraceWriter::string_iid(Sequence &seq, const std::string &text) {
  return intern(seq.strings, seq.next_string, interned::kAnnotationStrings, text);
}

uint32_t PerfettoTraceWriter::category_iid(Sequence &seq, const std::string &name) {
  return intern(seq.categories, seq.next_category, interned::kCategories, name);
}

void PerfettoTraceWriter::renamed(SymbolId symbol) {
  if (symbol >= generations_.size()) generations_.resize(symbol + 1, 1);
  ++generations_[symbol];
}

const PerfettoTraceWriter::Sequence::Interned &PerfettoTraceWriter::symbol_iid(
    Sequence &seq, const SymbolTable &symbols, SymbolId symbol) {
  if (symbol >= seq.symbols.size()) seq.symbols.resize(symbols.size(), {0, 0, 0});
  if (symbol >= generations_.size()) generations_.resize(symbols.size(), 1);
  Sequence::Interned &interned = seq.symbols[symbol];
  if (interned.generation == generations_[symbol]) return interned;
  // New on this sequence, or renamed since: a new id (an id keeps its names).
  const Symbol &s = symbols[symbol];
  bool import = !s.native && s.filename == kImportFile;
  uint32_t iid = interned.iid = seq.next_name++;
  interned.generation = generations_[symbol];
  // The module: the import's, or the Python function's file's.
  const std::string &module = import ? s.qualname : s.module;
  interned.module = 0;
  if (!s.native && !module.empty()) {
    fixed(seq, 1u << (16 + kAnnotationModule), interned::kAnnotationNames, kAnnotationModule,
          "module");
    interned.module = string_iid(seq, module);
  }
  ProtoEncoder out(interned_);
  size_t entry = out.begin(interned::kNames);
  out.uint_field(interned::kIid, iid);
  out.string_field(interned::kName, import ? "import " + s.qualname : s.qualname);
  out.end(entry);
  if (!s.native && !import) {
    entry = out.begin(interned::kSourceLocations);
    out.uint_field(interned::kIid, iid);
    out.string_field(interned::kFileName, s.filename);
    out.string_field(interned::kFunctionName, s.qualname);
    if (s.lineno >= 0) out.uint_field(interned::kLineNumber, static_cast<uint64_t>(s.lineno));
    out.end(entry);
  }
  return interned;
}

// --- tracks ----------------------------------------------------------------

PerfettoTraceWriter::Process &PerfettoTraceWriter::process(int64_t pid) {
  auto &slot = processes_[pid];
  if (!slot) {
    slot = std::make_unique<Process>();
    slot->pid = pid;
    slot->uuid = next_uuid_++;
    slot->seq.id = next_sequence_++;
    slot->seq.default_track = slot->uuid;
    describe_process(*slot, nullptr, nullptr, nullptr);
  }
  return *slot;
}

PerfettoTraceWriter::Thread &PerfettoTraceWriter::thread(int64_t pid, int32_t tid) {
  uint64_t key = (static_cast<uint64_t>(pid) << 32) | static_cast<uint32_t>(tid);
  if (key == last_thread_key_) return *last_thread_;
  auto &slot = threads_[key];
  if (!slot) {
    process(pid);
    slot = std::make_unique<Thread>();
    slot->pid = pid;
    slot->tid = tid;
    slot->uuid = next_uuid_++;
    slot->seq.id = next_sequence_++;
    slot->seq.default_track = slot->uuid;
    describe_thread(*slot, nullptr);
  }
  last_thread_key_ = key;
  last_thread_ = slot.get();
  return *slot;
}

void PerfettoTraceWriter::describe_process(const Process &p, const std::string *name,
                                           const std::string *command,
                                           const std::vector<std::string> *labels) {
  ProtoEncoder out(chunk_);
  size_t pkt = begin_untimed_packet(kMetadataSequence);
  size_t d = out.begin(packet::kTrackDescriptor);
  out.uint_field(track::kUuid, p.uuid);
  size_t proc = out.begin(track::kProcess);
  out.int_field(track::kProcessPid, p.pid);
  if (command != nullptr && !command->empty()) out.string_field(track::kProcessCmdline, *command);
  if (name != nullptr) out.string_field(track::kProcessName, *name);
  if (labels != nullptr) {
    for (const std::string &label : *labels) out.string_field(track::kProcessLabels, label);
  }
  out.end(proc);
  out.end(d);
  end_packet(pkt);
}

void PerfettoTraceWriter::describe_thread(const Thread &t, const std::string *name) {
  ProtoEncoder out(chunk_);
  size_t pkt = begin_untimed_packet(kMetadataSequence);
  size_t d = out.begin(packet::kTrackDescriptor);
  out.uint_field(track::kUuid, t.uuid);
  size_t thr = out.begin(track::kThread);
  out.int_field(track::kThreadPid, t.pid);
  out.int_field(track::kThreadTid, t.tid);
  if (name != nullptr) out.string_field(track::kThreadName, *name);
  out.end(thr);
  // Its GIL, domain and task tracks in the order they began (tasks: as they first ran).
  out.uint_field(track::kChildOrdering, track::kChronological);
  out.end(d);
  end_packet(pkt);
}

uint64_t PerfettoTraceWriter::child_track(uint64_t parent, const std::string &name,
                                          bool bytes_counter) {
  uint64_t uuid = next_uuid_++;
  ProtoEncoder out(chunk_);
  size_t pkt = begin_untimed_packet(kMetadataSequence);
  size_t d = out.begin(packet::kTrackDescriptor);
  out.uint_field(track::kUuid, uuid);
  if (parent != 0) out.uint_field(track::kParentUuid, parent);
  out.string_field(track::kName, name);
  if (bytes_counter) {
    size_t counter = out.begin(track::kCounter);
    out.uint_field(track::kCounterUnit, track::kUnitSizeBytes);
    out.end(counter);
  }
  out.end(d);
  end_packet(pkt);
  return uuid;
}

void PerfettoTraceWriter::process_metadata(int64_t pid, const std::string &name,
                                           const std::string &command,
                                           const std::vector<std::string> &labels) {
  describe_process(process(pid), &name, &command, &labels);
}

void PerfettoTraceWriter::thread_metadata(int64_t pid, int32_t tid, const std::string &name) {
  describe_thread(thread(pid, tid), &name);
}

// --- events ----------------------------------------------------------------

void PerfettoTraceWriter::begin_frame(int64_t pid, int32_t tid, const SymbolTable &symbols,
                                      SymbolId symbol, uint64_t ts_ns) {
  Thread &t = thread(pid, tid);
  ++t.depth;
  Sequence &seq = t.seq;
  const Sequence::Interned &interned = symbol_iid(seq, symbols, symbol);
  uint32_t iid = interned.iid, module_iid = interned.module;
  const Symbol &s = symbols[symbol];
  bool import = !s.native && s.filename == kImportFile;
  uint32_t category = s.native ? kCategoryNative : import ? kCategoryImport : kCategoryPython;
  fixed(seq, 1u << category, interned::kCategories, category,
        s.native ? "native"
        : import ? "import"
                 : "python");
  size_t pkt = begin_packet(seq, ts_ns);
  flush_interned();
  ProtoEncoder out(chunk_);
  size_t ev = out.begin(packet::kTrackEvent);
  out.uint_field(event::kType, event::kSliceBegin);
  out.uint_field(event::kCategoryIids, category);
  out.uint_field(event::kNameIid, iid);
  if (!s.native && !import) out.uint_field(event::kSourceLocationIid, iid);
  if (module_iid != 0) {
    size_t a = out.begin(event::kAnnotations);
    out.uint_field(annotation::kNameIid, kAnnotationModule);
    out.uint_field(annotation::kStringValueIid, module_iid);
    out.end(a);
  }
  out.end(ev);
  end_packet(pkt);
}

void PerfettoTraceWriter::end_frame(int64_t pid, int32_t tid, uint64_t ts_ns, FrameExit exit) {
  Thread &t = thread(pid, tid);
  Sequence &seq = t.seq;
  const char *why = exit_text(exit);
  uint32_t why_iid = 0;
  if (why != nullptr) {
    fixed(seq, 1u << (16 + kAnnotationExit), interned::kAnnotationNames, kAnnotationExit, "exit");
    why_iid = string_iid(seq, why);
  }
  size_t pkt = begin_packet(seq, ts_ns);
  flush_interned();
  ProtoEncoder out(chunk_);
  size_t ev = out.begin(packet::kTrackEvent);
  out.uint_field(event::kType, event::kSliceEnd);
  if (why_iid != 0) {
    size_t a = out.begin(event::kAnnotations);
    out.uint_field(annotation::kNameIid, kAnnotationExit);
    out.uint_field(annotation::kStringValueIid, why_iid);
    out.end(a);
  }
  // Flows leaving this frame to the regions and kernels it caused.
  while (!t.pending.empty() && t.pending.back().depth >= t.depth) {
    out.fixed64_field(event::kFlowIds, t.pending.back().flow);
    t.pending.pop_back();
  }
  out.end(ev);
  end_packet(pkt);
  if (t.depth > 0) --t.depth;
}

uint64_t PerfettoTraceWriter::join(int64_t pid, int32_t tid) {
  auto it = threads_.find((static_cast<uint64_t>(pid) << 32) | static_cast<uint32_t>(tid));
  if (it == threads_.end() || it->second->depth == 0) return 0;
  uint64_t flow = next_flow_++;
  it->second->pending.push_back(Pending{it->second->depth, flow});
  return flow;
}

void PerfettoTraceWriter::slice(Sequence &seq, uint64_t track_uuid, uint64_t ts_ns, int type,
                                const std::string &name, const std::string &category,
                                uint64_t flow) {
  uint32_t name_id = name.empty() ? 0 : name_iid(seq, name);
  uint32_t category_id = category.empty() ? 0 : category_iid(seq, category);
  size_t pkt = begin_packet(seq, ts_ns);
  flush_interned();
  ProtoEncoder out(chunk_);
  size_t ev = out.begin(packet::kTrackEvent);
  out.uint_field(event::kType, static_cast<uint64_t>(type));
  if (track_uuid != seq.default_track) out.uint_field(event::kTrackUuid, track_uuid);
  if (category_id != 0) out.uint_field(event::kCategoryIids, category_id);
  if (name_id != 0) out.uint_field(event::kNameIid, name_id);
  if (flow != 0) out.fixed64_field(event::kFlowIds, flow);
  out.end(ev);
  end_packet(pkt);
}

void PerfettoTraceWriter::native_region(int64_t pid, int32_t tid, const std::string &label,
                                        const std::string &domain, uint64_t begin_ns,
                                        uint64_t end_ns, int32_t /*flow_from_tid*/, uint64_t join) {
  Thread &t = thread(pid, tid);
  std::string name = domain_track_name(label, domain);
  auto [it, added] = t.domains.try_emplace(name, 0);
  if (added) it->second = child_track(t.uuid, name, false);
  slice(t.seq, it->second, begin_ns, event::kSliceBegin, label, domain, join);
  slice(t.seq, it->second, end_ns > begin_ns ? end_ns : begin_ns, event::kSliceEnd, {}, {}, 0);
}

void PerfettoTraceWriter::device_activity(int64_t pid, const DeviceActivity &a) {
  Process &p = process(pid);
  auto &lanes = p.devices[{a.device, a.stream}];
  auto lane = std::find_if(lanes.begin(), lanes.end(),
                           [&](const auto &l) { return l.second <= a.begin_ns; });
  if (lane == lanes.end()) {
    std::string name = "GPU " + std::to_string(a.device) + ", stream " + std::to_string(a.stream);
    if (!lanes.empty()) name += " (overlapping " + std::to_string(lanes.size() + 1) + ")";
    lanes.emplace_back(child_track(p.uuid, name, false), 0);
    lane = lanes.end() - 1;
  }
  lane->second = a.end_ns;
  slice(p.seq, lane->first, a.begin_ns, event::kSliceBegin, a.label, a.domain, a.join);
  slice(p.seq, lane->first, a.end_ns, event::kSliceEnd, {}, {}, 0);
}

void PerfettoTraceWriter::gil_state(int64_t pid, int32_t vtid, const char *state, uint64_t begin_ns,
                                    uint64_t end_ns) {
  Thread &t = thread(pid, vtid);
  if (!t.gil) {
    // A sequence of its own: the states come in time order, a step behind the thread's.
    t.gil = std::make_unique<Sequence>();
    t.gil->id = next_sequence_++;
    t.gil->default_track = child_track(t.uuid, "GIL", false);
  }
  Sequence &seq = *t.gil;
  slice(seq, seq.default_track, begin_ns, event::kSliceBegin, state, "gil", 0);
  slice(seq, seq.default_track, end_ns, event::kSliceEnd, {}, {}, 0);
}

void PerfettoTraceWriter::instant(Sequence &seq, uint64_t track_uuid, uint64_t ts_ns,
                                  const std::string &name, const Args &texts,
                                  const Numbers &numbers) {
  // Rare events: names written out rather than interned.
  size_t pkt = begin_packet(seq, ts_ns);
  ProtoEncoder out(chunk_);
  size_t ev = out.begin(packet::kTrackEvent);
  out.uint_field(event::kType, event::kInstant);
  if (track_uuid != seq.default_track) out.uint_field(event::kTrackUuid, track_uuid);
  out.string_field(event::kName, name);
  for (const auto &[key, value] : texts) {
    size_t a = out.begin(event::kAnnotations);
    out.string_field(annotation::kName, key);
    out.string_field(annotation::kStringValue, value);
    out.end(a);
  }
  for (const auto &[key, value] : numbers) {
    size_t a = out.begin(event::kAnnotations);
    out.string_field(annotation::kName, key);
    out.int_field(annotation::kIntValue, value);
    out.end(a);
  }
  out.end(ev);
  end_packet(pkt);
}

void PerfettoTraceWriter::discarded(uint64_t ts_ns, uint64_t count, bool packets,
                                    int32_t stream_id) {
  if (lttng_track_ == 0) {
    lttng_track_ = child_track(0, "LTTng: discarded events", false);
    metadata_.id = kMetadataSequence;
    metadata_.default_track = lttng_track_;
  }
  std::string what = packets ? " packets" : " events";
  instant(metadata_, lttng_track_, ts_ns, "LTTng discarded " + std::to_string(count) + what, {},
          {{"count", static_cast<int64_t>(count)}, {"stream_id", stream_id}});
}

void PerfettoTraceWriter::mode_change(int64_t pid, uint64_t ts_ns, const std::string &mode,
                                      const std::string &reason, uint64_t generation) {
  Process &p = process(pid);
  instant(p.seq, p.uuid, ts_ns, mode + " (" + reason + ")", {{"mode", mode}, {"reason", reason}},
          {{"config_generation", static_cast<int64_t>(generation)}});
}

void PerfettoTraceWriter::config_loaded(int64_t pid, uint64_t ts_ns, const std::string &path,
                                        uint64_t generation) {
  Process &p = process(pid);
  std::string shown = path.empty() ? "built-in defaults" : path;
  instant(p.seq, p.uuid, ts_ns, "configuration " + shown, {{"path", shown}},
          {{"config_generation", static_cast<int64_t>(generation)}});
}

void PerfettoTraceWriter::rate_counts(int64_t pid, uint64_t ts_ns, const std::string &function,
                                      const RateCounts &c) {
  // Only a function whose cap was reached: its last traced execution is where it stopped.
  if (c.max_num_traces < 0 || c.traced < static_cast<uint64_t>(c.max_num_traces)) return;
  Process &p = process(pid);
  instant(p.seq, p.uuid, ts_ns, "capped: " + function,
          {{"function", function}, {"section", c.section}},
          {{"traced", static_cast<int64_t>(c.traced)},
           {"executions", static_cast<int64_t>(c.executions)},
           {"max_num_traces", c.max_num_traces}});
}

void PerfettoTraceWriter::sampled_memory(int64_t pid, uint64_t ts_ns, uint64_t live_bytes) {
  Process &p = process(pid);
  if (p.memory_track == 0) p.memory_track = child_track(p.uuid, "sampled heap (live)", true);
  size_t pkt = begin_packet(p.seq, ts_ns);
  ProtoEncoder out(chunk_);
  size_t ev = out.begin(packet::kTrackEvent);
  out.uint_field(event::kType, event::kCounter);
  out.uint_field(event::kTrackUuid, p.memory_track);
  out.int_field(event::kCounterValue, static_cast<int64_t>(live_bytes));
  out.end(ev);
  end_packet(pkt);
}

// --- asyncio tasks -----------------------------------------------------------

PerfettoTraceWriter::TaskTrack &PerfettoTraceWriter::live_task(Process &p, uint64_t serial) {
  TaskTrack &t = p.tasks[serial];
  t.serial = serial;
  return t;
}

uint64_t PerfettoTraceWriter::task_track(int64_t pid, const TaskRecord &task) {
  Thread &loop = thread(pid, task.vtid);
  if (task_has_track(task)) return child_track(loop.uuid, task_track_name(task), false);
  if (loop.shared_task_track == 0) {
    loop.shared_task_track = child_track(loop.uuid, task_track_name(task), false);
  }
  return loop.shared_task_track;
}

void PerfettoTraceWriter::write_task_step(Process &p, TaskTrack &task, const char *outcome) {
  Thread &loop = thread(p.pid, task.vtid);
  if (!loop.tasks) {
    // A sequence of its own: a step is written once the next one (or the task's
    // end) comes, behind the thread's frames.
    loop.tasks = std::make_unique<Sequence>();
    loop.tasks->id = next_sequence_++;
    loop.tasks->default_track = loop.uuid;
  }
  Sequence &seq = *loop.tasks;
  fixed(seq, 1u << kCategoryAsyncio, interned::kCategories, kCategoryAsyncio, "asyncio");
  fixed(seq, 1u << (16 + kAnnotationTask), interned::kAnnotationNames, kAnnotationTask, "task");
  uint32_t outcome_iid = 0;
  if (outcome != nullptr) {
    fixed(seq, 1u << (16 + kAnnotationOutcome), interned::kAnnotationNames, kAnnotationOutcome,
          "outcome");
    outcome_iid = string_iid(seq, outcome);
  }
  size_t pkt = begin_packet(seq, task.begin_ns);
  flush_interned();
  ProtoEncoder out(chunk_);
  size_t ev = out.begin(packet::kTrackEvent);
  out.uint_field(event::kType, event::kSliceBegin);
  out.uint_field(event::kTrackUuid, task.track);
  out.uint_field(event::kCategoryIids, kCategoryAsyncio);
  // Its name written out: tasks' names are as many as the tasks.
  out.string_field(event::kName, task.name.empty() ? std::string_view("task") : task.name);
  size_t a = out.begin(event::kAnnotations);
  out.uint_field(annotation::kNameIid, kAnnotationTask);
  out.uint_field(annotation::kIntValue, task.serial);
  out.end(a);
  if (outcome_iid != 0) {
    a = out.begin(event::kAnnotations);
    out.uint_field(annotation::kNameIid, kAnnotationOutcome);
    out.uint_field(annotation::kStringValueIid, outcome_iid);
    out.end(a);
  }
  for (uint64_t flow : task.flows) out.fixed64_field(event::kFlowIds, flow);
  out.end(ev);
  end_packet(pkt);
  pkt = begin_packet(seq, std::max(task.end_ns, task.begin_ns));
  ev = out.begin(packet::kTrackEvent);
  out.uint_field(event::kType, event::kSliceEnd);
  out.uint_field(event::kTrackUuid, task.track);
  out.end(ev);
  end_packet(pkt);
  task.held = false;
  task.flows.clear();
}

void PerfettoTraceWriter::task_step(int64_t pid, int32_t /*vtid*/, const TaskRecord &task,
                                    uint64_t begin_ns, uint64_t end_ns, bool offloaded) {
  // Work run for the task on another thread: its frames are there, and the
  // flow from the step that handed it over (task_handoff) points at them.
  if (offloaded) return;
  Process &p = process(pid);
  TaskTrack &t = live_task(p, task.serial);
  t.name = task.name;
  if (t.held && t.steps == task.steps) {
    // No new step began: the task's coroutine went on with the step an awaited
    // one began (a throw() into it). One slice, as report counts one step.
    t.end_ns = end_ns;
  } else {
    if (t.held) write_task_step(p, t, nullptr);
    if (t.track == 0) {
      t.vtid = task.vtid;
      t.track = task_track(pid, task);
    }
    t.held = true;
    t.begin_ns = begin_ns;
    t.end_ns = end_ns;
    t.steps = task.steps;
  }
  t.flows.insert(t.flows.end(), t.next_flows.begin(), t.next_flows.end());
  t.next_flows.clear();
}

void PerfettoTraceWriter::task_created(int64_t pid, const TaskRecord &task,
                                       const TaskRecord *creator) {
  if (creator == nullptr) return;
  Process &p = process(pid);
  TaskTrack &made = live_task(p, task.serial);
  // The flow ends at its first step: over already (an eager task's), or to come.
  std::vector<uint64_t> *first = made.held && made.steps == 1 ? &made.flows
                                 : made.track == 0            ? &made.next_flows
                                                              : nullptr;
  if (first == nullptr) return;
  uint64_t flow = next_flow_++;
  first->push_back(flow);
  // (This may rehash the table: `made` is not used after.)
  live_task(p, creator->serial).next_flows.push_back(flow);
}

void PerfettoTraceWriter::task_handoff(int64_t pid, int32_t vtid, const TaskRecord &task,
                                       uint64_t work, bool run) {
  Process &p = process(pid);
  if (!run) {
    TaskTrack &t = live_task(p, task.serial);
    uint64_t flow = next_flow_++;
    t.next_flows.push_back(flow);
    t.work.emplace_back(work, flow);
    return;
  }
  auto found = p.tasks.find(task.serial);
  if (found == p.tasks.end()) return;
  auto &handed = found->second.work;
  auto item =
      std::find_if(handed.begin(), handed.end(), [&](const auto &w) { return w.first == work; });
  if (item == handed.end()) return;
  uint64_t flow = item->second;
  handed.erase(item);
  // To the work item's frame, the innermost on its thread now: written at its end.
  Thread &t = thread(pid, vtid);
  if (t.depth != 0) t.pending.push_back(Pending{t.depth, flow});
}

void PerfettoTraceWriter::task_done(int64_t pid, const TaskRecord &task) {
  Process &p = process(pid);
  auto found = p.tasks.find(task.serial);
  if (found == p.tasks.end()) return;
  TaskTrack &done = found->second;
  if (done.held) {
    // Its last step: a flow to the next step of each task that awaited it.
    for (uint64_t serial : task.awaited_by) {
      auto waiter = p.tasks.find(serial);
      if (waiter == p.tasks.end() || serial == task.serial) continue;
      uint64_t flow = next_flow_++;
      done.flows.push_back(flow);
      waiter->second.next_flows.push_back(flow);
    }
    done.name = task.name;
    write_task_step(p, done, task_outcome_name(task.outcome));
  }
  p.tasks.erase(found);
}

void PerfettoTraceWriter::finish() {
  // Tasks not done when the trace ended: their last step, pending.
  for (auto &[pid, p] : processes_) {
    for (auto &[serial, task] : p->tasks) {
      if (task.held) write_task_step(*p, task, task_outcome_name(TaskOutcome::Pending));
    }
    p->tasks.clear();
  }
  sink_.write(chunk_);
  sink_.finish();
}

}  // namespace pinsight_reader
