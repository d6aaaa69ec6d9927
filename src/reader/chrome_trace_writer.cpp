#include "chrome_trace_writer.h"

#include <cerrno>
#include <cstring>

#include "json_text.h"
#include "trace_graph.h"

namespace pinsight_reader {
namespace {

constexpr size_t kFlushSize = 1 << 20;

// The args of an "E" event, merged by viewers into the slice's.
const char *exit_args(FrameExit exit) {
  switch (exit) {
    case FrameExit::Return:
      return "}";
    case FrameExit::Yield:
      return ",\"args\":{\"exit\":\"yield\"}}";
    case FrameExit::Unwind:
      return ",\"args\":{\"exit\":\"unwind\"}}";
    case FrameExit::Raise:
      return ",\"args\":{\"exit\":\"raise\"}}";
    case FrameExit::Implicit:
      return ",\"args\":{\"exit\":\"unmatched (closed by an outer frame's end)\"}}";
    case FrameExit::OpenAtEnd:
      return ",\"args\":{\"exit\":\"open at trace end\"}}";
    case FrameExit::Damaged:
      return ",\"args\":{\"exit\":\"cut off by damage to the trace\"}}";
  }
  return "}";
}

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(const std::string &path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) {
    throw OutputError("cannot write " + path + ": " + std::strerror(errno));
  }
  buffer_.reserve(kFlushSize + 4096);
  buffer_ += "{\"traceEvents\":[\n";
}

ChromeTraceWriter::~ChromeTraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void ChromeTraceWriter::begin_event() {
  if (!first_event_) buffer_ += ",\n";
  first_event_ = false;
  ++events_written_;
}

void ChromeTraceWriter::flush() {
  if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
    write_failed_ = true;
  }
  buffer_.clear();
}

void ChromeTraceWriter::flush_if_full() {
  if (buffer_.size() >= kFlushSize) flush();
}

const std::string &ChromeTraceWriter::fragment(const SymbolTable &symbols, SymbolId symbol) {
  if (symbol >= fragments_.size()) fragments_.resize(symbols.size());
  std::string &text = fragments_[symbol];
  if (text.empty()) {
    const Symbol &s = symbols[symbol];
    text += "\"name\":";
    if (!s.native && s.filename == "<import>") {  // resource_events.cpp
      append_json_string(text, "import " + s.qualname);
      text += ",\"cat\":\"import\",\"args\":{\"kind\":\"import\",\"module\":";
      append_json_string(text, s.qualname);
      return text;
    }
    append_json_string(text, s.qualname);
    if (s.native) {
      text += ",\"cat\":\"native\",\"args\":{\"kind\":\"native\"";
    } else {
      text += ",\"cat\":\"python\",\"args\":{\"kind\":\"python\",\"file\":";
      append_json_string(text, s.filename);
      if (s.lineno >= 0) {
        text += ",\"line\":";
        append_int(text, s.lineno);
      }
    }
  }
  return text;
}

void ChromeTraceWriter::event_head(const char *ph, int64_t pid, int32_t tid, uint64_t ts_ns) {
  begin_event();
  buffer_ += "{\"ph\":\"";
  buffer_ += ph;
  buffer_ += "\",\"pid\":";
  append_int(buffer_, pid);
  buffer_ += ",\"tid\":";
  append_int(buffer_, tid);
  buffer_ += ",\"ts\":";
  append_ns_as_us(buffer_, static_cast<int64_t>(ts_ns - origin_ns_));
}

void ChromeTraceWriter::begin_frame(int64_t pid, int32_t tid, const SymbolTable &symbols,
                                    SymbolId symbol, uint64_t ts_ns) {
  event_head("B", pid, tid, ts_ns);
  buffer_.push_back(',');
  buffer_ += fragment(symbols, symbol);
  buffer_ += "}}";
  flush_if_full();
}

void ChromeTraceWriter::end_frame(int64_t pid, int32_t tid, uint64_t ts_ns, FrameExit exit) {
  event_head("E", pid, tid, ts_ns);
  buffer_ += exit_args(exit);
  flush_if_full();
}

void ChromeTraceWriter::discarded(uint64_t ts_ns, uint64_t count, bool packets, int32_t stream_id) {
  begin_event();
  // A global instant event: the loss is per ring buffer, not per thread.
  buffer_ += "{\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":";
  append_ns_as_us(buffer_, static_cast<int64_t>(ts_ns - origin_ns_));
  buffer_ += ",\"name\":\"LTTng discarded ";
  append_int(buffer_, count);
  buffer_ += packets ? " packets\"" : " events\"";
  buffer_ += ",\"cat\":\"lttng\",\"args\":{\"count\":";
  append_int(buffer_, count);
  buffer_ += ",\"stream_id\":";
  append_int(buffer_, stream_id);
  buffer_ += "}}";
  flush_if_full();
}

void ChromeTraceWriter::native_region(int64_t pid, int32_t tid, const std::string &label,
                                      const std::string &domain, uint64_t begin_ns, uint64_t end_ns,
                                      int32_t flow_from_tid, uint64_t /*join*/) {
  event_head("X", pid, tid, begin_ns);
  buffer_ += ",\"dur\":";
  append_ns_as_us(buffer_, static_cast<int64_t>(end_ns > begin_ns ? end_ns - begin_ns : 0));
  buffer_ += ",\"name\":";
  append_json_string(buffer_, label);
  buffer_ += ",\"cat\":";
  append_json_string(buffer_, domain);
  buffer_ += ",\"args\":{\"kind\":\"native_region\"}}";
  if (flow_from_tid >= 0) {
    uint64_t id = next_flow_id_++;
    for (const char *ph : {"s", "f"}) {
      event_head(ph, pid, *ph == 's' ? flow_from_tid : tid, begin_ns);
      buffer_ += ",\"id\":";
      append_int(buffer_, static_cast<int64_t>(id));
      buffer_ += ",\"name\":\"started\",\"cat\":\"native_flow\"";
      buffer_ += *ph == 'f' ? ",\"bp\":\"e\"}" : "}";
    }
  }
  flush_if_full();
}

void ChromeTraceWriter::device_activity(int64_t pid, const DeviceActivity &a) {
  device_pids_.insert(pid);
  native_region(pid, kDeviceTrackTid, a.label, a.domain, a.begin_ns, a.end_ns, a.flow_from_tid,
                a.join);
}

void ChromeTraceWriter::gil_slice(int64_t pid, int32_t track, const char *state, uint64_t begin_ns,
                                  uint64_t end_ns) {
  event_head("X", pid, track, begin_ns);
  buffer_ += ",\"dur\":";
  append_ns_as_us(buffer_, static_cast<int64_t>(end_ns > begin_ns ? end_ns - begin_ns : 0));
  buffer_ += ",\"name\":\"";
  buffer_ += state;
  buffer_ += "\",\"cat\":\"gil\",\"args\":{\"kind\":\"gil\"}}";
  flush_if_full();
}

int32_t ChromeTraceWriter::task_track(const TaskRecord &task) {
  if (task_has_track(task)) return 0x20000000 | static_cast<int32_t>(task.serial);
  return 0x28000000 | (task.vtid & 0x3fffff);
}

void ChromeTraceWriter::task_step(int64_t pid, int32_t vtid, const TaskRecord &task,
                                  uint64_t begin_ns, uint64_t end_ns, bool offloaded) {
  (void)vtid;
  if (offloaded) return;  // concurrent with the task's steps: its thread's track shows it
  const int32_t track = task_track(task);
  auto &tracks = task_tracks_[{pid, task.vtid}];
  if (tracks.count(track) == 0) tracks[track] = task_track_name(task);
  event_head("X", pid, track, begin_ns);
  buffer_ += ",\"dur\":";
  append_ns_as_us(buffer_, static_cast<int64_t>(end_ns > begin_ns ? end_ns - begin_ns : 0));
  buffer_ += ",\"name\":";
  append_json_string(buffer_, task.name.empty() ? std::string("task") : task.name);
  buffer_ += ",\"cat\":\"asyncio\",\"args\":{\"kind\":\"task_step\",\"task\":";
  append_int(buffer_, static_cast<int64_t>(task.serial));
  buffer_ += "}}";
  flush_if_full();
}

std::vector<std::pair<int32_t, std::string>> ChromeTraceWriter::task_tracks(int64_t pid,
                                                                            int32_t vtid) const {
  std::vector<std::pair<int32_t, std::string>> out;
  auto found = task_tracks_.find({pid, vtid});
  if (found != task_tracks_.end()) out.assign(found->second.begin(), found->second.end());
  return out;
}

void ChromeTraceWriter::process_metadata(int64_t pid, const std::string &label,
                                         int64_t sort_index) {
  begin_event();
  buffer_ += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
  append_int(buffer_, pid);
  buffer_ += ",\"args\":{\"name\":";
  append_json_string(buffer_, label);
  ++events_written_;  // the second object of this pair
  buffer_ += "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":";
  append_int(buffer_, pid);
  buffer_ += ",\"args\":{\"sort_index\":";
  append_int(buffer_, sort_index);
  buffer_ += "}}";
}

void ChromeTraceWriter::thread_metadata(int64_t pid, int32_t tid, const std::string &label,
                                        int64_t sort_index) {
  begin_event();
  buffer_ += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":";
  append_int(buffer_, pid);
  buffer_ += ",\"tid\":";
  append_int(buffer_, tid);
  buffer_ += ",\"args\":{\"name\":";
  append_json_string(buffer_, label);
  ++events_written_;  // the second object of this pair
  buffer_ += "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":";
  append_int(buffer_, pid);
  buffer_ += ",\"tid\":";
  append_int(buffer_, tid);
  buffer_ += ",\"args\":{\"sort_index\":";
  append_int(buffer_, sort_index);
  buffer_ += "}}";
}

void ChromeTraceWriter::finish(const std::string &other_data) {
  buffer_ += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":";
  buffer_ += other_data;
  buffer_ += "}\n";
  flush();
  int close_status = std::fclose(file_);
  file_ = nullptr;
  if (write_failed_ || close_status != 0) {
    throw OutputError("cannot write " + path_ + ": " + std::strerror(errno));
  }
}

}  // namespace pinsight_reader
