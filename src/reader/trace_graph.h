// A babeltrace2 graph that reads the trace: a source.ctf.fs per CTF trace
// directory, a filter.utils.muxer that orders their streams by time, and a
// simple sink that hands message batches to a callback.
//
// CTF 1.8 and CTF 2 (LTTng 2.15's default): source.ctf.fs reads CTF 2 from
// babeltrace2 2.1 on, in a graph of version 1 of its message interchange
// protocol (MIP). The module is built against Debian 12's babeltrace2 2.0 and
// runs with the libbabeltrace2 it finds (same soname): a trace with a CTF 2
// directory gets a MIP 1 graph where the library has one, else an error that
// says what to do; CTF 1.8 keeps MIP 0, whichever the library.
//
// A graph decodes on one thread. To decode on several, each of `groups`
// graphs reads every groups-th data stream (a stream is a per-CPU ring
// buffer of LTTng); their outputs, each in time order, are then merged.
#pragma once

#include <babeltrace2/babeltrace.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace pinsight_reader {

// A failure to open or read the trace, with babeltrace2's own causes.
class ReaderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure to write an export ("cannot write PATH: REASON"): Python's OSError.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TimeRange {
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
};

class TraceGraph {
 public:
  using Consumer = std::function<void(const bt_message *const *messages, uint64_t count)>;

  // trace_dirs: directories that each hold a CTF `metadata` file. Reads the
  // streams whose index (over all directories) modulo `groups` is `group`.
  explicit TraceGraph(const std::vector<std::string> &trace_dirs, size_t group = 0,
                      size_t groups = 1);
  ~TraceGraph();
  TraceGraph(const TraceGraph &) = delete;
  TraceGraph &operator=(const TraceGraph &) = delete;

  // Streams every message to `consumer`, in time order. Returns false when
  // interrupt() stopped it; throws ReaderError (or what consumer threw).
  bool run(Consumer consumer);

  // Thread-safe: makes run() return soon.
  void interrupt();

  // The time span of the streams, from the source's index (no decoding).
  TimeRange time_range() const;

  // Data streams in the trace directories (without decoding them).
  static size_t count_streams(const std::vector<std::string> &trace_dirs);

  // The CTF major version of a trace directory, from its metadata's first byte
  // (CTF 2's is a JSON text sequence's record separator): 1 or 2.
  static int ctf_version(const std::string &trace_dir);

 private:
  void release();
  void find_plugins();
  static bt_graph_simple_sink_component_consume_func_status consume(bt_message_iterator *iterator,
                                                                    void *self);

  std::vector<std::string> trace_dirs_;
  const bt_plugin *ctf_plugin_ = nullptr;
  const bt_plugin *utils_plugin_ = nullptr;
  bt_graph *graph_ = nullptr;
  std::vector<bt_value *> source_params_;  // one per trace directory
  size_t streams_ = 0;                     // data streams of all directories
  Consumer consumer_;
  std::exception_ptr consumer_error_;
};

// The messages of babeltrace2's current thread error, most specific first;
// clears that error.
std::string take_babeltrace_error();

}  // namespace pinsight_reader
