// Streams Chrome trace-event JSON (the format of chrome://tracing and
// Perfetto UI): a "B" event when a frame segment begins and an "E" event when
// it ends, written as the trace is read, so the file is in time order and
// nothing but the open stacks is kept in memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "symbol_table.h"

namespace pinsight_reader {

// Why a frame segment ended; recorded in the event's args.
enum class FrameExit : uint8_t {
  Return,
  Yield,
  Unwind,     // left by an exception
  Raise,      // native call that raised
  Implicit,   // closed because an end event of an outer frame came first
  OpenAtEnd,  // still open when the trace ended
};

class ChromeTraceWriter {
 public:
  explicit ChromeTraceWriter(const std::string &path);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter &) = delete;
  ChromeTraceWriter &operator=(const ChromeTraceWriter &) = delete;

  // Timestamps are written relative to this one (the first event).
  void set_origin(uint64_t ns) { origin_ns_ = ns; }

  void begin_frame(int64_t pid, int32_t tid, const SymbolTable &symbols, SymbolId symbol,
                   uint64_t ts_ns);
  void end_frame(int64_t pid, int32_t tid, uint64_t ts_ns, FrameExit exit);
  void discarded(uint64_t ts_ns, uint64_t count, bool packets, int32_t stream_id);
  // Another provider's region, a complete ("X") slice on its own thread; written at
  // its end. With flow_from_tid >= 0, an arrow from that thread (the Python call
  // that opened it) at its start.
  void native_region(int64_t pid, int32_t tid, const std::string &label, const std::string &domain,
                     uint64_t begin_ns, uint64_t end_ns, int32_t flow_from_tid);
  // events = gil: a thread's GIL state ("holding", "waiting", "released"), a
  // complete slice on the thread's GIL track (its own tid, gil_track()).
  void gil_slice(int64_t pid, int32_t track, const char *state, uint64_t begin_ns, uint64_t end_ns);
  static int32_t gil_track(int32_t vtid) { return vtid | 0x40000000; }  // above any Linux tid
  void process_metadata(int64_t pid, const std::string &label, int64_t sort_index);
  void thread_metadata(int64_t pid, int32_t tid, const std::string &label, int64_t sort_index);

  // Writes the closing part with `other_data` (a JSON object) and closes the
  // file. Throws ReaderError when the data could not be written.
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
};

}  // namespace pinsight_reader
