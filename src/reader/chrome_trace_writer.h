// Streams Chrome trace-event JSON (the format of chrome://tracing and
// Perfetto UI): a "B" event when a frame segment begins and an "E" event when
// it ends, written as the trace is read, so the file is in time order and
// nothing but the open stacks is kept in memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "replay_output.h"
#include "symbol_table.h"

namespace pinsight_reader {

// Fed by the stack replay (ReplayOutput); the frame exit is recorded in the event's args.
class ChromeTraceWriter final : public ReplayOutput {
 public:
  explicit ChromeTraceWriter(const std::string &path);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter &) = delete;
  ChromeTraceWriter &operator=(const ChromeTraceWriter &) = delete;

  // Timestamps are written relative to this one (the first event).
  void set_origin(uint64_t ns) override { origin_ns_ = ns; }

  void begin_frame(int64_t pid, int32_t tid, const SymbolTable &symbols, SymbolId symbol,
                   uint64_t ts_ns) override;
  void end_frame(int64_t pid, int32_t tid, uint64_t ts_ns, FrameExit exit) override;
  void discarded(uint64_t ts_ns, uint64_t count, bool packets, int32_t stream_id) override;
  // Another provider's region, a complete ("X") slice on its own thread; written at
  // its end. With flow_from_tid >= 0, an arrow from that thread (the Python call
  // that opened it) at its start.
  void native_region(int64_t pid, int32_t tid, const std::string &label, const std::string &domain,
                     uint64_t begin_ns, uint64_t end_ns, int32_t flow_from_tid,
                     uint64_t join) override;
  // On the process's device track (kDeviceTrackTid), named in its metadata.
  void device_activity(int64_t pid, const DeviceActivity &activity) override;
  // Its name fragment is made again at its next use.
  void renamed(SymbolId symbol) override {
    if (symbol < fragments_.size()) fragments_[symbol].clear();
  }
  // events = gil: a complete slice on the thread's GIL track (gil_track()).
  void gil_state(int64_t pid, int32_t vtid, const char *state, uint64_t begin_ns,
                 uint64_t end_ns) override {
    gil_slice(pid, gil_track(vtid), state, begin_ns, end_ns);
  }
  void gil_slice(int64_t pid, int32_t track, const char *state, uint64_t begin_ns, uint64_t end_ns);
  static int32_t gil_track(int32_t vtid) { return vtid | 0x40000000; }  // above any Linux tid
  // The track of a process's device activity (a thread id no thread has).
  static constexpr int32_t kDeviceTrackTid = 2000000000;
  // Whether device_activity() drew on the process's device track.
  bool has_device_track(int64_t pid) const { return device_pids_.count(pid) != 0; }
  // asyncio: a task's step, a complete slice on the task's own track (task_track()).
  void task_step(int64_t pid, int32_t vtid, const TaskRecord &task, uint64_t begin_ns,
                 uint64_t end_ns, bool offloaded) override;
  // A task's track: one per task among the first kKeptTasks of its process,
  // then one per loop thread for the rest (below gil_track's bit).
  static int32_t task_track(const TaskRecord &task);
  // The task tracks drawn under loop thread `vtid`: (track, name), in order.
  std::vector<std::pair<int32_t, std::string>> task_tracks(int64_t pid, int32_t vtid) const;
  void process_metadata(int64_t pid, const std::string &label, int64_t sort_index);
  void thread_metadata(int64_t pid, int32_t tid, const std::string &label, int64_t sort_index);

  // Writes the closing part with `other_data` (a JSON object) and closes the
  // file. Throws OutputError when the data could not be written.
  void finish(const std::string &other_data);
  // Trace events written so far (metadata records included).
  uint64_t events_written() const { return events_written_; }

 private:
  void begin_event();
  // {"ph":PH,"pid":..,"tid":..,"ts":.. (the object left open)
  void event_head(const char *ph, int64_t pid, int32_t tid, uint64_t ts_ns);
  void flush_if_full();
  void flush();
  const std::string &fragment(const SymbolTable &symbols, SymbolId symbol);

  std::string path_;
  std::FILE *file_ = nullptr;
  std::string buffer_;
  std::vector<std::string> fragments_;  // per symbol: "name", "cat" and args, escaped once
  uint64_t origin_ns_ = 0;
  bool first_event_ = true;
  uint64_t events_written_ = 0;
  bool write_failed_ = false;
  uint64_t next_flow_id_ = 1;
  std::set<int64_t> device_pids_;
  // (pid, loop thread) -> track -> its name
  std::map<std::pair<int64_t, int32_t>, std::map<int32_t, std::string>> task_tracks_;
};

}  // namespace pinsight_reader
