// A babeltrace2 graph that reads the trace: a source.ctf.fs per CTF trace
// directory (or its trimmed view, trace_set.h), a filter.utils.muxer that
// orders their streams by time, and a simple sink that hands message batches
// to a client.
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
//
// babeltrace2 stops a graph at the first packet it cannot decode (an event
// class id it does not know, in garbled bytes): what came before is read. The
// sink counts each stream's packets and events as they pass, and the error's
// message iterator names the stream that failed; the graph is then built
// again over views that resume every stream where it stopped, that packet
// left out, and the read goes on (the client is told: graph_replaced). A
// failure it cannot place ends the read there, reported (Damage::Stopped).
#pragma once

#include <babeltrace2/babeltrace.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "damage.h"
#include "reader_error.h"
#include "trace_set.h"

namespace pinsight_reader {

// A failure to write an export ("cannot write PATH: REASON"): Python's OSError.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TimeRange {
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
};

// A loss the client learns beside babeltrace2's messages, in time order with them.
struct StreamLoss {
  enum Kind : uint8_t { Damage, DiscardedEvents, DiscardedPackets };
  Kind kind;
  uint32_t stream;  // TraceSet's numbering
  uint64_t ts_ns;   // where (ns since the epoch)
  uint64_t end_ns;  // the span lost ends (0: unknown)
  uint64_t count;   // discarded events or packets (LTTng's, around the damage)
};

class TraceGraph {
 public:
  struct Client {
    // A batch of messages and, per message, its stream (TraceSet's numbering, or
    // kNoStream where the message has none).
    std::function<void(const bt_message *const *messages, const uint32_t *streams, uint64_t count)>
        messages;
    std::function<void(const StreamLoss &loss)> loss;  // optional
    // The graph was built anew: pointers to its objects (event classes) are stale.
    std::function<void()> graph_replaced;  // optional
  };

  // Reads the streams of `set` whose index modulo `groups` is `group`.
  explicit TraceGraph(const TraceSet &set, size_t group = 0, size_t groups = 1);
  ~TraceGraph();
  TraceGraph(const TraceGraph &) = delete;
  TraceGraph &operator=(const TraceGraph &) = delete;

  // Streams every message to the client, in time order. Returns false when
  // interrupt() stopped it; throws ReaderError (or what the client threw).
  bool run(Client client);

  // Thread-safe: makes run() return soon.
  void interrupt();

  // The time span of the streams, from the source's index (no decoding).
  TimeRange time_range() const;

  // What reading found that the pre-scan could not (packets babeltrace2 failed on).
  const std::vector<Damage> &damages() const { return damages_; }

  // The CTF major version of a trace directory, from its metadata's first byte
  // (CTF 2's is a JSON text sequence's record separator): 1 or 2.
  static int ctf_version(const std::string &trace_dir);

 private:
  struct Slot;
  struct Build;

  void build(const std::vector<std::pair<size_t, std::string>> &sources, bool all_ports);
  void release();
  void consume_batch(const bt_message *const *messages, uint64_t count);
  Slot *slot_of(const bt_stream *stream);
  // Whether an event's time lies within its packet's (counts it if not).
  static bool within(const bt_message *event, Slot &slot);
  void garbled_packet(Slot &slot);
  void deliver_pending();
  // After an error: places it and builds the graph anew past it; false: the
  // read ends there (recorded).
  bool recover();
  uint32_t culprit_from(const bt_error *error, std::string *cause);
  bool probe(uint32_t slot);
  void resume(uint32_t culprit, const std::string &cause);
  void stop(const std::string &cause);
  static bt_graph_simple_sink_component_consume_func_status consume(bt_message_iterator *iterator,
                                                                    void *self);

  const TraceSet &set_;
  size_t group_, groups_;
  bt_interrupter *interrupter_ = nullptr;
  std::unique_ptr<Build> build_;
  std::vector<Slot> slots_;
  std::unordered_map<const bt_stream *, uint32_t> bt_streams_;  // -> slot
  const bt_stream *last_bt_stream_ = nullptr;
  uint32_t last_slot_ = 0;
  uint32_t last_message_slot_ = UINT32_MAX;  // the slot of the last message delivered
  std::vector<uint32_t> batch_streams_;
  std::vector<StreamLoss> pending_;
  int64_t last_ns_ = INT64_MIN;  // the last time delivered
  bool catching_up_ = false;     // a rebuilt graph: drops what is older than catch_up_ns_
  int64_t catch_up_ns_ = INT64_MIN;
  std::vector<Damage> damages_;
  Client client_;
  std::exception_ptr consumer_error_;
};

// The output ports of source.ctf.fs on the trace directory `path` (named as
// TraceGraph names directory `dir`'s source); throws ReaderError.
std::vector<std::string> source_ports(const std::string &path, size_t dir);

// The messages of babeltrace2's current thread error, most specific first;
// clears that error.
std::string take_babeltrace_error();

}  // namespace pinsight_reader
