#include "bindings/config_dict.h"

#include <pybind11/stl.h>

#include <utility>

namespace py = pybind11;

namespace pinsight {
namespace {

constexpr std::pair<const char *, uint32_t> kEventNames[] = {
    {"pysysmon_py_start", kEventPyStart},
    {"pysysmon_py_return", kEventPyReturn},
    {"pysysmon_c_start", kEventCStart},
    {"pysysmon_c_return", kEventCReturn},
    {"pysysmon_import", kEventImport},
    {"alloc", kEventAlloc},
    {"gil", kEventGil},
};

}  // namespace

py::list event_list(uint32_t mask) {
  py::list names;
  for (const auto &[name, bits] : kEventNames) {
    if (mask & bits) names.append(name);
  }
  return names;
}

namespace {

py::object thread_list(const ThreadSet &threads) {
  if (threads.everything) return py::none();
  py::list ranges;
  for (const auto &[low, high] : threads.ranges) ranges.append(py::make_tuple(low, high));
  return std::move(ranges);
}

py::dict window_end_dict(const WindowEndAction &action) {
  py::dict out;
  out["python_mode"] = action.has_python_mode
                           ? py::object(py::str(trace_mode_name(action.python_mode)))
                           : py::object(py::none());
  out["introspect"] = action.introspect;
  if (action.introspect) {
    out["introspect_pause"] = action.introspect_pause_s;
    out["introspect_script"] = action.introspect_script;
  }
  return out;
}

py::dict settings_dict(const LexgionSettings &settings) {
  py::dict out;
  out["section"] = settings.section;
  out["line"] = settings.line;
  out["trace_starts_at"] = settings.trace_starts_at;
  out["max_num_traces"] = settings.max_num_traces;
  out["tracing_rate"] = settings.tracing_rate;
  out["events"] =
      settings.events_given ? py::object(event_list(settings.events)) : py::object(py::none());
  out["threads"] = thread_list(settings.threads);
  out["window_end_action"] = window_end_dict(settings.window_end);
  out["window_end_trigger"] =
      settings.window_end_trigger == WindowEndTrigger::All ? "all" : "first";
  out["window_timeout"] = settings.window_timeout_s;
  out["never_traced"] = settings.never_traced;
  return out;
}

}  // namespace

std::vector<std::string> messages(const std::vector<ConfigDiagnostic> &diagnostics) {
  std::vector<std::string> out;
  for (const ConfigDiagnostic &diagnostic : diagnostics) out.push_back(diagnostic.to_string());
  return out;
}

std::string error_text(const ParseResult &result) {
  std::string text;
  for (const std::string &message : messages(result.errors)) {
    text += (text.empty() ? "" : "\n") + message;
  }
  return text;
}

const Config &checked(const ParseResult &result) {
  if (!result.config) throw py::value_error(error_text(result));
  return *result.config;
}

py::dict config_dict(const ParseResult &result) {
  const Config &config = checked(result);
  py::dict out;
  out["path"] = config.path;
  out["mode"] = trace_mode_name(config.mode);
  out["events"] = event_list(config.events);
  out["alloc_sample_interval"] = config.alloc_sample_interval;
  out["payload"] = payload_name(config.payload);
  out["threads"] = thread_list(config.threads);
  out["module_filter"] = config.module_filter;
  out["module_exclude"] = config.module_exclude;
  out["events_possible"] = event_list(config.events_possible);
  out["window_timeout"] = config.window_timeout_s;
  out["window_timeout_action"] = window_end_dict(config.window_timeout_action);
  py::list sections;
  for (const ThreadSection &section : config.thread_sections()) {
    py::dict item;
    item["threads"] = thread_list(section.threads);
    item["events"] = event_list(section.events);
    item["line"] = section.line;
    sections.append(item);
  }
  out["thread_sections"] = sections;
  out["lexgion_default"] = settings_dict(config.lexgion_default());
  out["python_lexgion_default"] = settings_dict(config.python_lexgion_default());
  py::list named;
  for (const NamedLexgion &lexgion : config.named_lexgions()) {
    py::dict item = settings_dict(lexgion.settings);
    item["qualname"] = lexgion.qualname;
    item["file"] = lexgion.file_hint;
    item["python_qualified"] = lexgion.python_qualified;
    named.append(item);
  }
  out["lexgions"] = named;
  out["warnings"] = messages(result.warnings);
  return out;
}

}  // namespace pinsight
