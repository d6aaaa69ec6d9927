#include "trace_graph.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>

namespace pinsight_reader {
namespace {

// babeltrace2's log lines on stderr would garble our output; its errors
// still reach us through take_babeltrace_error().
constexpr bt_logging_level kLogLevel = BT_LOGGING_LEVEL_NONE;
constexpr uint32_t kNoSlot = UINT32_MAX;
// The trace name each source gets: "HOSTNAME/" kTraceName DIR, which tells a
// stream's directory from its trace.
constexpr const char *kTraceName = "pinsight-python-";
constexpr const char *kSourceName = "source-";

[[noreturn]] void fail(const std::string &what) {
  std::string detail = take_babeltrace_error();
  throw ReaderError(detail.empty() ? what : what + ": " + detail);
}

const bt_plugin *find_plugin(const char *name) {
  const bt_plugin *plugin = nullptr;
  if (bt_plugin_find(name, BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, &plugin) !=
          BT_PLUGIN_FIND_STATUS_OK ||
      plugin == nullptr) {
    std::string detail = take_babeltrace_error();
    throw ReaderError(std::string("babeltrace2 plugin '") + name +
                      "' was not found (is the babeltrace2 package installed?)" +
                      (detail.empty() ? "" : ": " + detail));
  }
  return plugin;
}

// babeltrace2 counts references without atomics: the component classes every
// graph shares must see one thread at a time make or destroy components of
// them (the decoding threads build their graphs anew past damage).
std::mutex &components_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The component classes, found once per process (finding them loads the plugins).
struct Classes {
  const bt_component_class_source *fs;
  const bt_component_class_filter *muxer;
};

const Classes &classes() {
  static std::once_flag once;
  static Classes found{};
  static std::string error;
  std::call_once(once, [] {
    try {
      // Kept for the life of the process, as the classes they own.
      const bt_plugin *ctf = find_plugin("ctf");
      const bt_plugin *utils = find_plugin("utils");
      found.fs = bt_plugin_borrow_source_component_class_by_name_const(ctf, "fs");
      found.muxer = bt_plugin_borrow_filter_component_class_by_name_const(utils, "muxer");
      if (found.fs == nullptr || found.muxer == nullptr) {
        error = "babeltrace2's source.ctf.fs or filter.utils.muxer is missing";
      }
    } catch (const ReaderError &e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw ReaderError(error);
  return found;
}

bt_value *source_params(const std::string &path, size_t dir) {
  bt_value *params = bt_value_map_create();
  bt_value *inputs = nullptr;
  std::string name = kTraceName + std::to_string(dir);
  if (params == nullptr ||
      bt_value_map_insert_empty_array_entry(params, "inputs", &inputs) !=
          BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK ||
      bt_value_array_append_string_element(inputs, path.c_str()) !=
          BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK ||
      bt_value_map_insert_string_entry(params, "trace-name", name.c_str()) !=
          BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK ||
      // Traces of several hosts (MPI) have clocks of different identities;
      // LTTng's clocks all count from the Unix epoch, so they can be muxed.
      bt_value_map_insert_bool_entry(params, "force-clock-class-origin-unix-epoch", BT_TRUE) !=
          BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK) {
    BT_VALUE_PUT_REF_AND_RESET(params);
    fail("out of memory");
  }
  return params;
}

// The graph's MIP version: 1 where a trace directory is CTF 2 (babeltrace2 2.1
// reads CTF 2 under MIP 1 only), else 0 as always.
uint64_t mip_version_for(const std::vector<std::string> &trace_dirs) {
  for (const std::string &dir : trace_dirs) {
    if (TraceGraph::ctf_version(dir) < 2) continue;
    if (bt_get_maximal_mip_version() >= 1) return 1;
    throw ReaderError(dir + ": this trace is CTF 2; babeltrace2 " +
                      std::to_string(bt_version_get_major()) + "." +
                      std::to_string(bt_version_get_minor()) +
                      " cannot read it; record with --trace-format=ctf-1.8 or install "
                      "babeltrace2 2.1");
  }
  return 0;
}

// A message's time in ns from the origin, for the messages that carry one
// (events and packet boundaries).
bool message_ns(const bt_message *m, int64_t *ns) {
  const bt_clock_snapshot *snapshot = nullptr;
  switch (bt_message_get_type(m)) {
    case BT_MESSAGE_TYPE_EVENT:
      if (bt_message_event_borrow_stream_class_default_clock_class_const(m) == nullptr) {
        return false;
      }
      snapshot = bt_message_event_borrow_default_clock_snapshot_const(m);
      break;
    case BT_MESSAGE_TYPE_PACKET_BEGINNING:
      if (!bt_stream_class_packets_have_beginning_default_clock_snapshot(
              bt_stream_borrow_class_const(bt_packet_borrow_stream_const(
                  bt_message_packet_beginning_borrow_packet_const(m))))) {
        return false;
      }
      snapshot = bt_message_packet_beginning_borrow_default_clock_snapshot_const(m);
      break;
    case BT_MESSAGE_TYPE_PACKET_END:
      if (!bt_stream_class_packets_have_end_default_clock_snapshot(bt_stream_borrow_class_const(
              bt_packet_borrow_stream_const(bt_message_packet_end_borrow_packet_const(m))))) {
        return false;
      }
      snapshot = bt_message_packet_end_borrow_default_clock_snapshot_const(m);
      break;
    default:
      return false;
  }
  return bt_clock_snapshot_get_ns_from_origin(snapshot, ns) ==
         BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK;
}

const bt_stream *message_stream(const bt_message *m) {
  switch (bt_message_get_type(m)) {
    case BT_MESSAGE_TYPE_STREAM_BEGINNING:
      return bt_message_stream_beginning_borrow_stream_const(m);
    case BT_MESSAGE_TYPE_STREAM_END:
      return bt_message_stream_end_borrow_stream_const(m);
    case BT_MESSAGE_TYPE_PACKET_BEGINNING:
      return bt_packet_borrow_stream_const(bt_message_packet_beginning_borrow_packet_const(m));
    case BT_MESSAGE_TYPE_PACKET_END:
      return bt_packet_borrow_stream_const(bt_message_packet_end_borrow_packet_const(m));
    case BT_MESSAGE_TYPE_DISCARDED_EVENTS:
      return bt_message_discarded_events_borrow_stream_const(m);
    case BT_MESSAGE_TYPE_DISCARDED_PACKETS:
      return bt_message_discarded_packets_borrow_stream_const(m);
    case BT_MESSAGE_TYPE_EVENT:
      return bt_event_borrow_stream_const(bt_message_event_borrow_event_const(m));
    default:
      return nullptr;
  }
}

// The directory a source was made for, from its name ("source-DIR").
bool source_dir(const char *component, size_t *dir) {
  std::string name = component ? component : "";
  if (name.compare(0, std::char_traits<char>::length(kSourceName), kSourceName) != 0) return false;
  std::string digits = name.substr(std::char_traits<char>::length(kSourceName));
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *dir = std::stoul(digits);
  return true;
}

// babeltrace2's cause without its addresses ("Text: msg-it-addr=0x..., key=value").
std::string plain_cause(const std::string &message) {
  size_t colon = message.find(": ");
  if (colon == std::string::npos) return message;
  std::string out = message.substr(0, colon);
  std::string rest = message.substr(colon + 2);
  std::string kept;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(", ", start);
    std::string part =
        rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = part.find('=');
    bool address = eq != std::string::npos && part.compare(0, eq, "") != 0 && eq >= 5 &&
                   part.compare(eq - 5, 5, "-addr") == 0;
    if (!address && !part.empty()) kept += (kept.empty() ? "" : ", ") + part;
    if (comma == std::string::npos) break;
    start = comma + 2;
  }
  return kept.empty() ? out : out + ": " + kept;
}

}  // namespace

// A stream this graph reads, and where the sink saw it last.
struct TraceGraph::Slot {
  uint32_t stream = kNoStream;  // TraceSet's numbering
  // The packets this graph's view of it holds: indexes into TraceStream::packets.
  std::vector<size_t> packets;
  size_t begun = 0;         // packet beginnings seen in this graph
  bool open = false;        // inside a packet
  bool ended = false;       // its stream end was seen (or nothing is left to read)
  bool touched = false;     // a packet of it began, in this graph or an earlier one
  int64_t last_begun = -1;  // the last packet that began (index into TraceStream::packets)
  uint64_t events = 0;      // events of the current packet seen
  uint64_t skip = 0;        // events of its first packet an earlier graph delivered
  bool quiet = false;       // drops babeltrace2's discard reports before its first packet
  // The current packet's time span (clock cycles), when its events must lie in it.
  bool bounded = false;
  uint64_t low = 0, high = 0;
  uint64_t outside = 0;  // events of the current packet left out: outside that span
};

struct TraceGraph::Build {
  bt_graph *graph = nullptr;
  std::vector<bt_value *> params;  // one per source
  std::vector<std::unique_ptr<TraceView>> views;

  ~Build() {
    BT_GRAPH_PUT_REF_AND_RESET(graph);
    for (bt_value *&p : params) BT_VALUE_PUT_REF_AND_RESET(p);
  }
};

int TraceGraph::ctf_version(const std::string &trace_dir) {
  constexpr int kRecordSeparator = 0x1e;  // RFC 7464: CTF 2's metadata stream
  std::FILE *metadata = std::fopen((trace_dir + "/metadata").c_str(), "rb");
  if (metadata == nullptr) return 1;
  const int first = std::fgetc(metadata);
  std::fclose(metadata);
  return first == kRecordSeparator ? 2 : 1;
}

std::string take_babeltrace_error() {
  const bt_error *error = bt_current_thread_take_error();
  if (error == nullptr) return {};
  std::string text;
  uint64_t count = bt_error_get_cause_count(error);
  // The library's own causes ("Component initialization method failed:
  // comp-addr=...") only restate the plugins' ones with internal details.
  bool plugin_causes = false;
  for (uint64_t i = 0; i < count; ++i) {
    plugin_causes |= bt_error_cause_get_actor_type(bt_error_borrow_cause_by_index(error, i)) !=
                     BT_ERROR_CAUSE_ACTOR_TYPE_UNKNOWN;
  }
  for (uint64_t i = 0; i < count; ++i) {
    const bt_error_cause *cause = bt_error_borrow_cause_by_index(error, i);
    if (plugin_causes &&
        bt_error_cause_get_actor_type(cause) == BT_ERROR_CAUSE_ACTOR_TYPE_UNKNOWN) {
      continue;
    }
    if (!text.empty()) text += "; ";
    text += bt_error_cause_get_message(cause);
  }
  bt_error_release(error);
  return text;
}

std::vector<std::string> source_ports(const std::string &path, size_t dir) {
  const Classes &c = classes();
  uint64_t mip = mip_version_for({path});
  std::lock_guard<std::mutex> lock(components_mutex());
  bt_graph *graph = bt_graph_create(mip);
  if (graph == nullptr) fail("cannot create a babeltrace2 graph");
  bt_value *params = nullptr;
  std::vector<std::string> ports;
  try {
    params = source_params(path, dir);
    const bt_component_source *source = nullptr;
    std::string name = kSourceName + std::to_string(dir);
    if (bt_graph_add_source_component(graph, c.fs, name.c_str(), params, kLogLevel, &source) !=
        BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
      fail("cannot open the CTF trace in " + path);
    }
    uint64_t outputs = bt_component_source_get_output_port_count(source);
    for (uint64_t i = 0; i < outputs; ++i) {
      ports.emplace_back(bt_port_get_name(bt_port_output_as_port_const(
          bt_component_source_borrow_output_port_by_index_const(source, i))));
    }
  } catch (...) {
    BT_VALUE_PUT_REF_AND_RESET(params);
    BT_GRAPH_PUT_REF_AND_RESET(graph);
    throw;
  }
  BT_VALUE_PUT_REF_AND_RESET(params);
  BT_GRAPH_PUT_REF_AND_RESET(graph);
  return ports;
}

TraceGraph::TraceGraph(const TraceSet &set, size_t group, size_t groups)
    : set_(set), group_(group), groups_(std::max<size_t>(groups, 1)) {
  interrupter_ = bt_interrupter_create();
  if (interrupter_ == nullptr) fail("out of memory");
  try {
    std::vector<std::pair<size_t, std::string>> sources;
    for (size_t d = 0; d < set_.dirs(); ++d) {
      if (set_.read_path(d).empty()) continue;
      // Only the directories holding a stream of this group.
      bool mine = false;
      for (size_t s = 0; s < set_.streams().size(); ++s) {
        mine |= set_.streams()[s].dir == d && s % groups_ == group_;
      }
      if (mine) sources.emplace_back(d, set_.read_path(d));
    }
    if (!sources.empty()) build(sources, false);
  } catch (...) {
    release();
    BT_INTERRUPTER_PUT_REF_AND_RESET(interrupter_);
    throw;
  }
}

TraceGraph::~TraceGraph() {
  release();
  BT_INTERRUPTER_PUT_REF_AND_RESET(interrupter_);
}

void TraceGraph::release() {
  std::lock_guard<std::mutex> lock(components_mutex());
  build_.reset();
}

void TraceGraph::build(const std::vector<std::pair<size_t, std::string>> &sources, bool all_ports) {
  const Classes &c = classes();
  std::vector<std::string> paths;
  for (const auto &source : sources) paths.push_back(source.second);
  uint64_t mip = mip_version_for(paths);
  std::unique_lock<std::mutex> lock(components_mutex());
  auto b = std::make_unique<Build>();
  b->graph = bt_graph_create(mip);
  if (b->graph == nullptr) fail("cannot create a babeltrace2 graph");
  if (bt_graph_add_interrupter(b->graph, interrupter_) != BT_GRAPH_ADD_INTERRUPTER_STATUS_OK) {
    fail("out of memory");
  }
  const bt_component_filter *muxer = nullptr;
  if (bt_graph_add_filter_component(b->graph, c.muxer, "muxer", nullptr, kLogLevel, &muxer) !=
      BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
    fail("cannot create filter.utils.muxer");
  }
  const bt_component_sink *sink = nullptr;
  if (bt_graph_add_simple_sink_component(b->graph, "sink", nullptr, &TraceGraph::consume, nullptr,
                                         this, &sink) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
    fail("cannot create the sink");
  }
  // One source per trace directory: source.ctf.fs only merges directories
  // of one trace (same UUID), and LTTng writes one trace per ABI/process.
  for (const auto &[dir, path] : sources) {
    b->params.push_back(source_params(path, dir));
    const bt_component_source *source = nullptr;
    std::string name = kSourceName + std::to_string(dir);
    if (bt_graph_add_source_component(b->graph, c.fs, name.c_str(), b->params.back(), kLogLevel,
                                      &source) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
      fail("cannot open the CTF trace in " + path);
    }
    // One muxer input per data stream; the muxer always offers one free port.
    uint64_t outputs = bt_component_source_get_output_port_count(source);
    for (uint64_t port = 0; port < outputs; ++port) {
      const bt_port_output *out =
          bt_component_source_borrow_output_port_by_index_const(source, port);
      uint32_t stream =
          set_.stream_of_port(dir, bt_port_get_name(bt_port_output_as_port_const(out)));
      if (!all_ports && (stream == kNoStream || stream % groups_ != group_)) continue;
      if (!all_ports) {
        Slot slot;
        slot.stream = stream;
        const TraceStream &s = set_.streams()[stream];
        for (size_t i = 0; i < s.packets.size(); ++i) slot.packets.push_back(i);
        slots_.push_back(std::move(slot));
      }
      uint64_t free_input = bt_component_filter_get_input_port_count(muxer) - 1;
      const bt_port_input *in =
          bt_component_filter_borrow_input_port_by_index_const(muxer, free_input);
      if (bt_graph_connect_ports(b->graph, out, in, nullptr) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
        fail("cannot connect a trace stream to the muxer");
      }
    }
  }
  if (bt_graph_connect_ports(b->graph,
                             bt_component_filter_borrow_output_port_by_index_const(muxer, 0),
                             bt_component_sink_borrow_input_port_by_index_const(sink, 0),
                             nullptr) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
    fail("cannot connect the muxer to the sink");
  }
  build_ = std::move(b);
}

TraceGraph::Slot *TraceGraph::slot_of(const bt_stream *stream) {
  auto found = bt_streams_.find(stream);
  uint32_t index;
  if (found != bt_streams_.end()) {
    index = found->second;
  } else {
    // First seen: its directory from its trace's name, then the set's stream.
    uint32_t set_stream = kNoStream;
    const char *trace = bt_trace_get_name(bt_stream_borrow_trace_const(stream));
    std::string name = trace ? trace : "";
    size_t at = name.rfind(kTraceName);
    if (at != std::string::npos) {
      size_t dir = std::stoul(name.substr(at + std::char_traits<char>::length(kTraceName)));
      const bt_stream_class *sc = bt_stream_borrow_class_const(stream);
      const char *stream_name = bt_stream_get_name(stream);
      set_stream = set_.stream_of(dir, bt_stream_class_get_id(sc), bt_stream_get_id(stream),
                                  stream_name ? stream_name : "");
    }
    index = kNoSlot;
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (set_stream != kNoStream && slots_[i].stream == set_stream) index = i;
    }
    if (index == kNoSlot) {
      // Not one the set knows: read, without resuming past damage.
      slots_.emplace_back();
      index = static_cast<uint32_t>(slots_.size() - 1);
    }
    bt_streams_[stream] = index;
  }
  last_bt_stream_ = stream;
  last_slot_ = index;
  return &slots_[index];
}

bt_graph_simple_sink_component_consume_func_status TraceGraph::consume(
    bt_message_iterator *iterator, void *self_ptr) {
  auto *self = static_cast<TraceGraph *>(self_ptr);
  bt_message_array_const messages;
  uint64_t count = 0;
  switch (bt_message_iterator_next(iterator, &messages, &count)) {
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_OK:
      break;
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_END:
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_END;
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_AGAIN:
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_AGAIN;
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_MEMORY_ERROR:
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_MEMORY_ERROR;
    default:
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR;
  }
  bt_graph_simple_sink_component_consume_func_status status =
      BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_OK;
  // C++ exceptions must not cross babeltrace2's C frames.
  try {
    self->consume_batch(messages, count);
  } catch (...) {
    self->consumer_error_ = std::current_exception();
    status = BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR;
  }
  for (uint64_t i = 0; i < count; ++i) bt_message_put_ref(messages[i]);
  return status;
}

void TraceGraph::deliver_pending() {
  std::vector<StreamLoss> losses;
  losses.swap(pending_);
  if (!client_.loss) return;
  for (const StreamLoss &loss : losses) client_.loss(loss);
}

void TraceGraph::consume_batch(const bt_message *const *messages, uint64_t count) {
  if (!pending_.empty()) deliver_pending();
  if (batch_streams_.size() < count) batch_streams_.resize(count);
  uint64_t run = 0;  // the first message not handed over yet
  uint64_t last_timed = UINT64_MAX;
  auto hand_over = [&](uint64_t end) {
    if (end > run) client_.messages(messages + run, batch_streams_.data() + run, end - run);
    run = end;
  };
  for (uint64_t i = 0; i < count; ++i) {
    const bt_message *m = messages[i];
    bt_message_type type = bt_message_get_type(m);
    bool keep = true;
    Slot *slot;
    if (type == BT_MESSAGE_TYPE_EVENT) {
      // The hot path: one stream lookup, a count.
      const bt_stream *stream =
          bt_event_borrow_stream_const(bt_message_event_borrow_event_const(m));
      slot = stream == last_bt_stream_ ? &slots_[last_slot_] : slot_of(stream);
      ++slot->events;
      if (slot->skip > 0) {
        --slot->skip;  // delivered by the graph before this one
        keep = false;
      } else if (slot->bounded && !within(m, *slot)) {
        keep = false;  // decoded from garbled bytes
      } else if (catching_up_) {
        int64_t ns = 0;
        if (message_ns(m, &ns) && ns < catch_up_ns_) {
          // Older than what was read already: its stream's clock jumped in the
          // damaged packet. Lost, as the packet.
          if (!damages_.empty()) ++damages_.back().events_lost;
          keep = false;
        } else {
          catching_up_ = false;
        }
      }
    } else {
      const bt_stream *stream = message_stream(m);
      if (stream == nullptr) {
        batch_streams_[i] = kNoStream;
        continue;
      }
      slot = slot_of(stream);
      switch (type) {
        case BT_MESSAGE_TYPE_PACKET_BEGINNING:
          slot->bounded = false;
          if (slot->begun < slot->packets.size()) {
            slot->last_begun = static_cast<int64_t>(slot->packets[slot->begun]);
            const TraceStream &s = set_.streams()[slot->stream];
            const PacketInfo &p = set_.packet(s, slot->packets[slot->begun]);
            slot->bounded = set_.scan(s.dir).metadata.events_within_packets && p.ts_end != 0 &&
                            bt_stream_class_borrow_default_clock_class_const(
                                bt_stream_borrow_class_const(stream)) != nullptr;
            slot->low = p.ts_begin;
            slot->high = p.ts_end;
          }
          ++slot->begun;
          slot->open = true;
          slot->touched = true;
          slot->events = 0;
          slot->outside = 0;
          break;
        case BT_MESSAGE_TYPE_PACKET_END:
          slot->open = false;
          if (slot->outside > 0) garbled_packet(*slot);
          if (slot->stream != kNoStream && slot->begun > 0 && slot->begun <= slot->packets.size()) {
            // Damage the pre-scan found right after this packet: its place in time.
            const TraceStream &s = set_.streams()[slot->stream];
            size_t index = slot->packets[slot->begun - 1];
            if (!s.damage_after.empty() && s.damage_after[index]) {
              hand_over(i + 1);
              const Damage &d = set_.damages()[s.damage_index[index]];
              StreamLoss loss{StreamLoss::Damage, slot->stream, set_.packet(s, index).end_ns,
                              d.end_ns, 0};
              if (client_.loss) client_.loss(loss);
            }
          }
          break;
        case BT_MESSAGE_TYPE_STREAM_END:
          slot->ended = true;
          break;
        case BT_MESSAGE_TYPE_DISCARDED_EVENTS:
          keep = !(slot->quiet && slot->begun == 0);
          break;
        case BT_MESSAGE_TYPE_DISCARDED_PACKETS: {
          if (slot->quiet && slot->begun == 0) {
            keep = false;
            break;
          }
          // The packets the reader left out look discarded to babeltrace2 (a
          // gap in the sequence numbers): only the rest were LTTng's.
          if (slot->stream == kNoStream || slot->begun == 0 ||
              slot->begun >= slot->packets.size()) {
            break;
          }
          const TraceStream &s = set_.streams()[slot->stream];
          size_t before = slot->packets[slot->begun - 1], next = slot->packets[slot->begun];
          uint64_t ours = next - before - 1;
          for (size_t k = before + 1; k <= next; ++k) ours += s.skipped_before[k];
          if (ours == 0) break;
          uint64_t reported = 0;
          if (bt_message_discarded_packets_get_count(m, &reported) !=
              BT_PROPERTY_AVAILABILITY_AVAILABLE) {
            reported = ours;
          }
          keep = false;
          if (reported > ours) {
            hand_over(i);
            StreamLoss loss{StreamLoss::DiscardedPackets, slot->stream,
                            set_.packet(s, before).end_ns, set_.packet(s, next).begin_ns,
                            reported - ours};
            if (client_.loss) client_.loss(loss);
          }
          break;
        }
        default:
          break;
      }
    }
    batch_streams_[i] = slot->stream;
    last_message_slot_ = static_cast<uint32_t>(slot - slots_.data());
    if (keep && (type == BT_MESSAGE_TYPE_EVENT || type == BT_MESSAGE_TYPE_PACKET_BEGINNING ||
                 type == BT_MESSAGE_TYPE_PACKET_END)) {
      last_timed = i;
    }
    if (!keep) {
      hand_over(i);
      run = i + 1;
    }
  }
  hand_over(count);
  // The time reached: the last message handed over that carries one.
  int64_t ns = 0;
  if (last_timed < count && message_ns(messages[last_timed], &ns))
    last_ns_ = std::max(last_ns_, ns);
}

bool TraceGraph::within(const bt_message *event, Slot &slot) {
  uint64_t value =
      bt_clock_snapshot_get_value(bt_message_event_borrow_default_clock_snapshot_const(event));
  if (value >= slot.low && value <= slot.high) return true;
  ++slot.outside;
  return false;
}

void TraceGraph::garbled_packet(Slot &slot) {
  // babeltrace2 decoded the packet whole, but some of its "events" lie outside
  // it in time: garbled bytes, read as events. They were left out.
  const TraceStream &s = set_.streams()[slot.stream];
  const PacketInfo &packet = set_.packet(s, slot.packets[slot.begun - 1]);
  Damage d;
  d.file = set_.original(s.dir) + "/" + set_.file_of(s, slot.packets[slot.begun - 1]);
  d.kind = DamageKind::Undecodable;
  d.detail = "events decoded with times outside their packet (garbled bytes): left out";
  d.stream = slot.stream;
  d.begin_ns = packet.begin_ns;
  d.end_ns = packet.end_ns;
  d.offset = packet.offset;
  d.events_read = slot.events - slot.outside;
  d.events_lost = slot.outside;
  d.host = set_.scan(s.dir).metadata.hostname;
  d.vpid = set_.scan(s.dir).metadata.vpid;
  damages_.push_back(d);
  slot.outside = 0;
}

bool TraceGraph::run(Client client) {
  client_ = std::move(client);
  for (;;) {
    if (!build_) {  // the damage left nothing to read
      deliver_pending();
      return true;
    }
    bt_graph_run_status status = bt_graph_run(build_->graph);
    if (consumer_error_) {
      take_babeltrace_error();
      std::rethrow_exception(consumer_error_);
    }
    switch (status) {
      case BT_GRAPH_RUN_STATUS_OK:
        deliver_pending();
        return true;
      case BT_GRAPH_RUN_STATUS_AGAIN:
        if (bt_interrupter_is_set(interrupter_)) return false;
        continue;
      case BT_GRAPH_RUN_STATUS_MEMORY_ERROR:
        fail("out of memory while reading the trace");
      default:
        if (bt_interrupter_is_set(interrupter_)) {
          take_babeltrace_error();
          return false;
        }
        if (!recover()) {
          deliver_pending();
          return true;
        }
    }
  }
}

uint32_t TraceGraph::culprit_from(const bt_error *error, std::string *cause) {
  uint32_t culprit = kNoSlot;
  uint64_t count = error ? bt_error_get_cause_count(error) : 0;
  for (uint64_t i = 0; i < count; ++i) {
    const bt_error_cause *c = bt_error_borrow_cause_by_index(error, i);
    bt_error_cause_actor_type actor = bt_error_cause_get_actor_type(c);
    // The most specific plugin cause says what was wrong.
    if (cause->empty() && actor != BT_ERROR_CAUSE_ACTOR_TYPE_UNKNOWN) {
      *cause = plain_cause(bt_error_cause_get_message(c));
    }
    if (culprit != kNoSlot || actor != BT_ERROR_CAUSE_ACTOR_TYPE_MESSAGE_ITERATOR) continue;
    size_t dir = 0;
    if (!source_dir(bt_error_cause_message_iterator_actor_get_component_name(c), &dir)) continue;
    uint32_t stream = set_.stream_of_port(
        dir, bt_error_cause_message_iterator_actor_get_component_output_port_name(c));
    for (uint32_t s = 0; s < slots_.size(); ++s) {
      if (stream != kNoStream && slots_[s].stream == stream) culprit = s;
    }
  }
  return culprit;
}

bool TraceGraph::recover() {
  const bt_error *error = bt_current_thread_take_error();
  std::string cause;
  uint32_t culprit = culprit_from(error, &cause);
  if (error != nullptr) bt_error_release(error);
  if (cause.empty()) cause = "babeltrace2 could not read the trace";
  if (culprit == kNoSlot && cause.find("timestamp is less than") != std::string::npos) {
    // The muxer saw a stream's time go back: a packet whose events left their
    // packet's span (garbled), or else, which one each stream alone says.
    for (uint32_t s = 0; s < slots_.size() && culprit == kNoSlot; ++s) {
      if (!slots_[s].ended && slots_[s].open && slots_[s].outside > 0) culprit = s;
    }
    for (uint32_t s = 0; s < slots_.size() && culprit == kNoSlot; ++s) {
      if (!slots_[s].ended && probe(s)) culprit = s;
    }
  }
  if (culprit == kNoSlot && last_message_slot_ < slots_.size() &&
      !slots_[last_message_slot_].ended) {
    // The muxer asks a stream for more right after handing over its last message.
    culprit = last_message_slot_;
  }
  if (culprit == kNoSlot || slots_[culprit].stream == kNoStream ||
      set_.streams()[slots_[culprit].stream].packets.empty()) {
    stop(cause);
    return false;
  }
  try {
    resume(culprit, cause);
  } catch (const ReaderError &e) {
    stop(cause + "; then: " + e.what());
    return false;
  }
  return true;
}

bool TraceGraph::probe(uint32_t index) {
  const Slot &slot = slots_[index];
  if (slot.stream == kNoStream || slot.packets.empty()) return false;
  const TraceStream &s = set_.streams()[slot.stream];
  size_t from = slot.open ? slot.begun - 1 : slot.begun;
  if (from >= slot.packets.size()) return false;
  std::vector<size_t> packets(
      slot.packets.begin() + static_cast<std::ptrdiff_t>(from),
      slot.packets.begin() + static_cast<std::ptrdiff_t>(std::min(from + 2, slot.packets.size())));
  struct Probe {
    uint64_t skip;
    int64_t last_ns;
    bool bad = false;
    bool done = false;
  } state{slot.open ? slot.events : 0, last_ns_};
  auto view = set_.view(s.dir, {{slot.stream, packets}});
  const Classes &c = classes();
  uint64_t mip = mip_version_for({view->path()});
  // Rare (a failure the error does not place): the lock held throughout.
  std::lock_guard<std::mutex> lock(components_mutex());
  bt_graph *graph = bt_graph_create(mip);
  bt_value *params = source_params(view->path(), s.dir);
  bool culprit = false;
  const bt_component_source *source = nullptr;
  const bt_component_sink *sink = nullptr;
  auto consume = [](bt_message_iterator *iterator,
                    void *data) -> bt_graph_simple_sink_component_consume_func_status {
    auto *p = static_cast<Probe *>(data);
    bt_message_array_const messages;
    uint64_t count = 0;
    bt_message_iterator_next_status status = bt_message_iterator_next(iterator, &messages, &count);
    if (status == BT_MESSAGE_ITERATOR_NEXT_STATUS_END) {
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_END;
    }
    if (status != BT_MESSAGE_ITERATOR_NEXT_STATUS_OK) {
      p->bad = true;
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR;
    }
    for (uint64_t i = 0; i < count; ++i) {
      int64_t ns = 0;
      bool event = bt_message_get_type(messages[i]) == BT_MESSAGE_TYPE_EVENT;
      if (event && p->skip > 0) {
        --p->skip;
      } else if (!p->done && message_ns(messages[i], &ns)) {
        p->bad |= ns < p->last_ns;
        p->done = event;  // its first event not read yet tells
      }
      bt_message_put_ref(messages[i]);
    }
    return p->bad || p->done ? BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_END
                             : BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_OK;
  };
  if (graph != nullptr && params != nullptr &&
      bt_graph_add_source_component(graph, c.fs, (kSourceName + std::to_string(s.dir)).c_str(),
                                    params, kLogLevel,
                                    &source) == BT_GRAPH_ADD_COMPONENT_STATUS_OK &&
      bt_component_source_get_output_port_count(source) == 1 &&
      bt_graph_add_simple_sink_component(graph, "probe", nullptr, consume, nullptr, &state,
                                         &sink) == BT_GRAPH_ADD_COMPONENT_STATUS_OK &&
      bt_graph_connect_ports(graph,
                             bt_component_source_borrow_output_port_by_index_const(source, 0),
                             bt_component_sink_borrow_input_port_by_index_const(sink, 0),
                             nullptr) == BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
    bt_graph_run_status status = bt_graph_run(graph);
    culprit =
        state.bad || (status != BT_GRAPH_RUN_STATUS_OK && status != BT_GRAPH_RUN_STATUS_AGAIN);
  }
  take_babeltrace_error();
  BT_VALUE_PUT_REF_AND_RESET(params);
  BT_GRAPH_PUT_REF_AND_RESET(graph);
  return culprit;
}

void TraceGraph::resume(uint32_t culprit, const std::string &cause) {
  Slot &c = slots_[culprit];
  const TraceStream &cs = set_.streams()[c.stream];
  // The damaged packet: the one open at the failure (its events up to the
  // damage were delivered), or else the next, whose header failed.
  size_t bad = c.open ? c.begun - 1 : c.begun;
  if (bad >= c.packets.size()) {
    stop(cause);
    return;
  }
  const PacketInfo &packet = set_.packet(cs, c.packets[bad]);
  Damage d;
  d.file = set_.original(cs.dir) + "/" + set_.file_of(cs, c.packets[bad]);
  // Not open: the packet's header or context failed, before it began.
  d.kind = c.open ? DamageKind::Undecodable : DamageKind::BadPacketHeader;
  d.detail = cause;
  if (c.open && c.outside > 0) {
    d.detail =
        "events decoded with times outside their packet (garbled bytes): left out, "
        "and the rest of the packet with them";
  } else if (set_.scan(cs.dir).metadata.cut && cause.find("No event class") != std::string::npos) {
    d.detail = "an event of a class the cut metadata does not declare (" + cause + ")";
  }
  d.stream = c.stream;
  // Read up to the last time delivered, within the packet's own span (garbled
  // bytes may have decoded as events of any time before babeltrace2 failed).
  uint64_t now = last_ns_ > 0 ? static_cast<uint64_t>(last_ns_) : 0;
  d.begin_ns = c.open ? std::clamp(now, packet.begin_ns, std::max(packet.begin_ns, packet.end_ns))
                      : packet.begin_ns;
  d.end_ns = packet.end_ns;
  d.packets = 1;
  d.offset = packet.offset;
  d.bytes = packet.size;
  d.events_read = c.open ? c.events - c.outside : 0;
  d.events_lost = c.open ? c.outside : 0;
  d.host = set_.scan(cs.dir).metadata.hostname;
  d.vpid = set_.scan(cs.dir).metadata.vpid;
  damages_.push_back(d);
  pending_.push_back({StreamLoss::Damage, c.stream, d.begin_ns, d.end_ns, 0});
  // What the new graph may hand over: what was not read yet. The damaged
  // stream's next packets start at the damaged one's end, even where garbled
  // events it read seemed later.
  catch_up_ns_ = last_ns_;
  if (c.open && packet.end_ns != 0) {
    catch_up_ns_ = std::min(last_ns_, static_cast<int64_t>(packet.end_ns));
  }

  // Every stream resumes where it stopped; the damaged one after that packet.
  std::map<size_t, std::vector<std::pair<uint32_t, std::vector<size_t>>>> selection;
  for (uint32_t k = 0; k < slots_.size(); ++k) {
    Slot &t = slots_[k];
    if (t.ended) continue;
    if (t.stream == kNoStream || set_.streams()[t.stream].packets.empty()) {
      t.ended = true;  // no packets known: it cannot resume (reported by stop())
      Damage lost;
      lost.kind = DamageKind::Stopped;
      lost.detail = "not read past another stream's damage (its packets are unknown): " + cause;
      lost.begin_ns = now;
      damages_.push_back(lost);
      continue;
    }
    const TraceStream &s = set_.streams()[t.stream];
    size_t from;
    uint64_t skip = 0;
    bool deltas = true;
    if (k == culprit) {
      from = bad + 1;
    } else if (t.open) {
      from = t.begun - 1;
      skip = t.events;
      deltas = false;  // its packet began: what babeltrace2 said before it was delivered
    } else {
      from = t.begun;
    }
    if (from >= t.packets.size()) {
      t.ended = true;
      continue;
    }
    std::vector<size_t> packets(t.packets.begin() + static_cast<std::ptrdiff_t>(from),
                                t.packets.end());
    if (deltas && t.last_begun >= 0) {
      // What babeltrace2 would have said between the last packet delivered and
      // the first of the new graph (it says nothing before a stream's first).
      const PacketInfo &prev = set_.packet(s, static_cast<size_t>(t.last_begun));
      const PacketInfo &next = set_.packet(s, packets.front());
      uint64_t at = prev.end_ns;
      if (next.discarded > prev.discarded) {
        pending_.push_back({StreamLoss::DiscardedEvents, t.stream, at, next.begin_ns,
                            next.discarded - prev.discarded});
      }
      if (prev.seq != UINT64_MAX && next.seq != UINT64_MAX && next.seq > prev.seq) {
        uint64_t ours = packets.front() - static_cast<size_t>(t.last_begun) - 1;
        for (size_t j = static_cast<size_t>(t.last_begun) + 1; j <= packets.front(); ++j) {
          ours += s.skipped_before[j];
        }
        uint64_t gap = next.seq - prev.seq - 1;
        if (gap > ours) {
          pending_.push_back(
              {StreamLoss::DiscardedPackets, t.stream, at, next.begin_ns, gap - ours});
        }
      }
    }
    t.packets = packets;
    t.begun = 0;
    t.open = false;
    t.events = 0;
    t.skip = skip;
    t.quiet = t.touched;
    selection[s.dir].emplace_back(t.stream, std::move(packets));
  }
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const StreamLoss &a, const StreamLoss &b) { return a.ts_ns < b.ts_ns; });

  // The new graph, over views of just these packets.
  release();
  bt_streams_.clear();
  last_bt_stream_ = nullptr;
  last_message_slot_ = kNoSlot;
  if (client_.graph_replaced) client_.graph_replaced();
  if (selection.empty()) return;  // nothing left to read
  std::vector<std::unique_ptr<TraceView>> views;
  std::vector<std::pair<size_t, std::string>> sources;
  for (const auto &[dir, streams] : selection) {
    views.push_back(set_.view(dir, streams));
    sources.emplace_back(dir, views.back()->path());
  }
  build(sources, true);
  build_->views = std::move(views);
  catching_up_ = true;
}

void TraceGraph::stop(const std::string &cause) {
  uint64_t now = last_ns_ > 0 ? static_cast<uint64_t>(last_ns_) : 0;
  for (Slot &t : slots_) {
    if (t.ended) continue;
    t.ended = true;
    Damage d;
    d.kind = DamageKind::Stopped;
    d.detail = "babeltrace2 stopped, and the reader could not place the failure: " + cause;
    d.begin_ns = now;
    d.stream = t.stream;
    if (t.stream != kNoStream) {
      const TraceStream &s = set_.streams()[t.stream];
      size_t from = t.open ? t.begun - 1 : t.begun;
      d.file = set_.original(s.dir);
      d.host = set_.scan(s.dir).metadata.hostname;
      d.vpid = set_.scan(s.dir).metadata.vpid;
      if (from < t.packets.size()) {
        d.file += "/" + set_.file_of(s, t.packets[from]);
        d.packets = t.packets.size() - from;
        d.end_ns = set_.packet(s, t.packets.back()).end_ns;
        d.offset = set_.packet(s, t.packets[from]).offset;
      }
    }
    damages_.push_back(d);
  }
  release();
}

void TraceGraph::interrupt() { bt_interrupter_set(interrupter_); }

TimeRange TraceGraph::time_range() const {
  TimeRange range{std::numeric_limits<uint64_t>::max(), 0};
  if (!build_) return {};
  const bt_component_class_source *fs_class = classes().fs;
  std::lock_guard<std::mutex> lock(components_mutex());
  auto integer = [](const bt_value *v) -> uint64_t {
    if (v == nullptr) return 0;
    if (bt_value_is_signed_integer(v)) return static_cast<uint64_t>(bt_value_integer_signed_get(v));
    if (bt_value_is_unsigned_integer(v)) return bt_value_integer_unsigned_get(v);
    return 0;
  };
  for (const bt_value *params : build_->params) {
    bt_query_executor *executor =
        bt_query_executor_create(bt_component_class_source_as_component_class_const(fs_class),
                                 "babeltrace.trace-infos", params);
    const bt_value *result = nullptr;
    if (executor == nullptr ||
        bt_query_executor_query(executor, &result) != BT_QUERY_EXECUTOR_QUERY_STATUS_OK) {
      BT_QUERY_EXECUTOR_PUT_REF_AND_RESET(executor);
      take_babeltrace_error();
      continue;
    }
    // [{"stream-infos": [{"range-ns": {"begin": N, "end": N}}, ...]}, ...]
    for (uint64_t t = 0; bt_value_is_array(result) && t < bt_value_array_get_length(result); ++t) {
      const bt_value *trace = bt_value_array_borrow_element_by_index_const(result, t);
      const bt_value *streams = bt_value_is_map(trace)
                                    ? bt_value_map_borrow_entry_value_const(trace, "stream-infos")
                                    : nullptr;
      if (streams == nullptr || !bt_value_is_array(streams)) continue;
      for (uint64_t s = 0; s < bt_value_array_get_length(streams); ++s) {
        const bt_value *stream = bt_value_array_borrow_element_by_index_const(streams, s);
        const bt_value *ns = bt_value_is_map(stream)
                                 ? bt_value_map_borrow_entry_value_const(stream, "range-ns")
                                 : nullptr;
        if (ns == nullptr || !bt_value_is_map(ns)) continue;
        range.begin_ns =
            std::min(range.begin_ns, integer(bt_value_map_borrow_entry_value_const(ns, "begin")));
        range.end_ns =
            std::max(range.end_ns, integer(bt_value_map_borrow_entry_value_const(ns, "end")));
      }
    }
    BT_VALUE_PUT_REF_AND_RESET(result);
    BT_QUERY_EXECUTOR_PUT_REF_AND_RESET(executor);
  }
  if (range.end_ns < range.begin_ns) return {};
  return range;
}

}  // namespace pinsight_reader
