#include "trace_graph.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace pinsight_reader {
namespace {

// babeltrace2's log lines on stderr would garble our output; its errors
// still reach us through take_babeltrace_error().
constexpr bt_logging_level kLogLevel = BT_LOGGING_LEVEL_NONE;

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

[[noreturn]] void fail(const std::string &what) {
  std::string detail = take_babeltrace_error();
  throw ReaderError(detail.empty() ? what : what + ": " + detail);
}

bt_value *source_params(const std::string &dir) {
  bt_value *params = bt_value_map_create();
  bt_value *inputs = nullptr;
  if (params == nullptr ||
      bt_value_map_insert_empty_array_entry(params, "inputs", &inputs) !=
          BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK ||
      bt_value_array_append_string_element(inputs, dir.c_str()) !=
          BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK ||
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

}  // namespace

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

void TraceGraph::find_plugins() {
  ctf_plugin_ = find_plugin("ctf");
  utils_plugin_ = find_plugin("utils");
}

size_t TraceGraph::count_streams(const std::vector<std::string> &trace_dirs) {
  TraceGraph probe(trace_dirs, 0, 0);
  return probe.streams_;
}

TraceGraph::TraceGraph(const std::vector<std::string> &trace_dirs, size_t group, size_t groups)
    : trace_dirs_(trace_dirs) {
  if (trace_dirs_.empty()) throw ReaderError("no trace directory given");
  // groups == 0: only count the streams (count_streams()).
  bool connect = groups > 0;
  try {
    find_plugins();

    const bt_component_class_source *fs_class =
        bt_plugin_borrow_source_component_class_by_name_const(ctf_plugin_, "fs");
    const bt_component_class_filter *muxer_class =
        bt_plugin_borrow_filter_component_class_by_name_const(utils_plugin_, "muxer");
    if (fs_class == nullptr || muxer_class == nullptr) {
      throw ReaderError("babeltrace2's source.ctf.fs or filter.utils.muxer is missing");
    }

    graph_ = bt_graph_create(mip_version_for(trace_dirs_));
    if (graph_ == nullptr) fail("cannot create a babeltrace2 graph");

    const bt_component_filter *muxer = nullptr;
    if (bt_graph_add_filter_component(graph_, muxer_class, "muxer", nullptr, kLogLevel, &muxer) !=
        BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
      fail("cannot create filter.utils.muxer");
    }
    const bt_component_sink *sink = nullptr;
    if (bt_graph_add_simple_sink_component(graph_, "sink", nullptr, &TraceGraph::consume, nullptr,
                                           this, &sink) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
      fail("cannot create the sink");
    }

    // One source per trace directory: source.ctf.fs only merges directories
    // of one trace (same UUID), and LTTng writes one trace per ABI/process.
    for (size_t i = 0; i < trace_dirs_.size(); ++i) {
      bt_value *params = source_params(trace_dirs_[i]);
      source_params_.push_back(params);
      const bt_component_source *source = nullptr;
      std::string name = "source-" + std::to_string(i);
      if (bt_graph_add_source_component(graph_, fs_class, name.c_str(), params, kLogLevel,
                                        &source) != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
        fail("cannot open the CTF trace in " + trace_dirs_[i]);
      }
      // One muxer input per data stream; the muxer always offers one free port.
      uint64_t outputs = bt_component_source_get_output_port_count(source);
      for (uint64_t port = 0; port < outputs; ++port) {
        size_t index = streams_++;
        if (!connect || index % groups != group) continue;
        const bt_port_output *out =
            bt_component_source_borrow_output_port_by_index_const(source, port);
        uint64_t free_input = bt_component_filter_get_input_port_count(muxer) - 1;
        const bt_port_input *in =
            bt_component_filter_borrow_input_port_by_index_const(muxer, free_input);
        if (bt_graph_connect_ports(graph_, out, in, nullptr) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
          fail("cannot connect a trace stream to the muxer");
        }
      }
    }
    if (connect && bt_graph_connect_ports(
                       graph_, bt_component_filter_borrow_output_port_by_index_const(muxer, 0),
                       bt_component_sink_borrow_input_port_by_index_const(sink, 0),
                       nullptr) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
      fail("cannot connect the muxer to the sink");
    }
  } catch (...) {
    release();
    throw;
  }
}

TraceGraph::~TraceGraph() { release(); }

void TraceGraph::release() {
  BT_GRAPH_PUT_REF_AND_RESET(graph_);
  for (bt_value *&params : source_params_) BT_VALUE_PUT_REF_AND_RESET(params);
  source_params_.clear();
  BT_PLUGIN_PUT_REF_AND_RESET(ctf_plugin_);
  BT_PLUGIN_PUT_REF_AND_RESET(utils_plugin_);
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
    self->consumer_(messages, count);
  } catch (...) {
    self->consumer_error_ = std::current_exception();
    status = BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR;
  }
  for (uint64_t i = 0; i < count; ++i) bt_message_put_ref(messages[i]);
  return status;
}

bool TraceGraph::run(Consumer consumer) {
  consumer_ = std::move(consumer);
  bt_interrupter *interrupter = bt_graph_borrow_default_interrupter(graph_);
  for (;;) {
    bt_graph_run_status status = bt_graph_run(graph_);
    if (consumer_error_) {
      take_babeltrace_error();
      std::rethrow_exception(consumer_error_);
    }
    switch (status) {
      case BT_GRAPH_RUN_STATUS_OK:
        return true;
      case BT_GRAPH_RUN_STATUS_AGAIN:
        if (bt_interrupter_is_set(interrupter)) return false;
        continue;
      case BT_GRAPH_RUN_STATUS_MEMORY_ERROR:
        fail("out of memory while reading the trace");
      default:
        fail("babeltrace2 could not read the trace");
    }
  }
}

void TraceGraph::interrupt() { bt_interrupter_set(bt_graph_borrow_default_interrupter(graph_)); }

TimeRange TraceGraph::time_range() const {
  TimeRange range{std::numeric_limits<uint64_t>::max(), 0};
  const bt_component_class_source *fs_class =
      bt_plugin_borrow_source_component_class_by_name_const(ctf_plugin_, "fs");
  auto integer = [](const bt_value *v) -> uint64_t {
    if (v == nullptr) return 0;
    if (bt_value_is_signed_integer(v)) return static_cast<uint64_t>(bt_value_integer_signed_get(v));
    if (bt_value_is_unsigned_integer(v)) return bt_value_integer_unsigned_get(v);
    return 0;
  };
  for (const bt_value *params : source_params_) {
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
