#include "config_binding.h"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "lexgion.h"

namespace py = pybind11;

namespace pinsight {
namespace {

constexpr std::pair<const char *, uint32_t> kEventNames[] = {
    {"pysysmon_py_start", kEventPyStart}, {"pysysmon_py_return", kEventPyReturn},
    {"pysysmon_c_start", kEventCStart},   {"pysysmon_c_return", kEventCReturn},
    {"pysysmon_import", kEventImport},    {"alloc", kEventAlloc},
};

py::list event_list(uint32_t mask) {
  py::list names;
  for (const auto &[name, bits] : kEventNames) {
    if (mask & bits) names.append(name);
  }
  return names;
}

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
  out["window_timeout"] = settings.window_timeout_s;
  out["never_traced"] = settings.never_traced;
  return out;
}

std::vector<std::string> messages(const std::vector<ConfigDiagnostic> &diagnostics) {
  std::vector<std::string> out;
  for (const ConfigDiagnostic &diagnostic : diagnostics) out.push_back(diagnostic.to_string());
  return out;
}

// The Config of a ParseResult, or ValueError with every error, one a line.
const Config &checked(const ParseResult &result) {
  if (!result.config) {
    std::string text;
    for (const std::string &message : messages(result.errors)) {
      text += (text.empty() ? "" : "\n") + message;
    }
    throw py::value_error(text);
  }
  return *result.config;
}

py::dict config_dict(const ParseResult &result) {
  const Config &config = checked(result);
  py::dict out;
  out["path"] = config.path;
  out["mode"] = trace_mode_name(config.mode);
  out["events"] = event_list(config.events);
  out["alloc_sample_interval"] = config.alloc_sample_interval;
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

// A str is configuration text; an os.PathLike names a file.
ParseResult parse_argument(const py::object &config) {
  if (py::isinstance<py::str>(config)) {
    return parse_config_string(config.cast<std::string>(), "<string>");
  }
  const py::object path = py::module_::import("os").attr("fspath")(config);
  return parse_config_file(path.cast<std::string>());
}

// Executions 0..n_calls-1 of one code object on one thread, run through the
// same calls, in the same order, as the tracer's hot path (see lexgion.h).
py::dict simulate(const py::object &config_argument, const std::string &qualname,
                  const std::string &filename, const std::string &module, int thread_id,
                  int64_t n_calls) {
  if (n_calls < 0) throw py::value_error("n_calls must be >= 0");
  const ParseResult result = parse_argument(config_argument);
  const Config &config = checked(result);
  const CodeDecision decision = config.decide_code(qualname, filename, module);
  const LexgionSettings &settings = *decision.lexgion;
  const uint32_t events = decision.module_selected ? config.events_for(settings, thread_id) : 0;

  TraceMode mode = config.mode;
  LexgionCounters counters;
  std::vector<int64_t> traced;
  std::optional<int64_t> window_end_at, exhausted_after;
  if (lexgion_exhausted(settings, counters)) exhausted_after = -1;
  for (int64_t i = 0; i < n_calls && events != 0; ++i) {
    if (mode == TraceMode::Monitoring) lexgion_count(counters);
    if (mode != TraceMode::Tracing) continue;
    const bool exhausted_before = lexgion_exhausted(settings, counters);
    const bool is_traced = lexgion_begin(settings, counters);
    if (exhausted_before && is_traced) {
      throw std::logic_error("lexgion_exhausted was true before traced execution " +
                             std::to_string(i));
    }
    if (is_traced) traced.push_back(i);
    if (lexgion_window_ended(settings, counters)) {
      if (!window_end_at) window_end_at = i;
      if (settings.window_end.has_python_mode) mode = settings.window_end.python_mode;
    }
    if (!exhausted_after && lexgion_exhausted(settings, counters)) exhausted_after = i;
  }

  py::dict out;
  out["traced"] = traced;
  out["events"] = event_list(events);
  out["lexgion"] = settings.section;
  out["module_selected"] = decision.module_selected;
  out["never_traced"] = settings.never_traced;
  out["window_end_at"] =
      window_end_at ? py::object(py::int_(*window_end_at)) : py::object(py::none());
  out["exhausted_after"] =
      exhausted_after ? py::object(py::int_(*exhausted_after)) : py::object(py::none());
  out["mode_after"] = trace_mode_name(mode);
  out["warnings"] = messages(result.warnings);
  return out;
}

}  // namespace

void register_config_bindings(py::module_ &m) {
  m.def(
      "_parse_config", [](const std::string &path) { return config_dict(parse_config_file(path)); },
      py::arg("path"),
      "Parse a trace configuration file into a dict (for tests). Errors raise ValueError, one "
      "'file:line: message' a line.");
  m.def(
      "_parse_config_string",
      [](const std::string &text, const std::string &name, std::optional<std::string> previous) {
        if (!previous) return config_dict(parse_config_string(text, name));
        const ParseResult base = parse_config_string(*previous, "<previous>");
        return config_dict(parse_config_string(text, name, &checked(base)));
      },
      py::arg("text"), py::arg("name") = "<string>", py::kw_only(),
      py::arg("previous") = py::none(),
      "Like _parse_config, for configuration text; `name` stands for the file in messages. "
      "With `previous` (configuration text), `text` is applied on top of it as on a reload.");
  m.def(
      "_lexgion_simulate",
      [](const py::object &config, const std::string &qualname, const std::string &filename,
         const std::string &module, int thread_id, int64_t n_calls) {
        const py::dict detail = simulate(config, qualname, filename, module, thread_id, n_calls);
        return py::list(detail["traced"]);
      },
      py::arg("config"), py::arg("qualname"), py::arg("filename") = "", py::arg("module") = "",
      py::arg("thread_id") = 0, py::arg("n_calls") = 100,
      "0-based indices of the executions of one function on one thread that the tracer would "
      "trace. `config` is configuration text (str) or a file (os.PathLike).");
  m.def("_lexgion_simulate_detail", &simulate, py::arg("config"), py::arg("qualname"),
        py::arg("filename") = "", py::arg("module") = "", py::arg("thread_id") = 0,
        py::arg("n_calls") = 100,
        "Like _lexgion_simulate, as a dict: traced, events, lexgion (section), "
        "module_selected, never_traced, window_end_at, exhausted_after, mode_after, warnings.");
}

}  // namespace pinsight
