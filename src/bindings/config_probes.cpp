#include "bindings/config_probes.h"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings/config_dict.h"
#include "config/config.h"
#include "config/lexgion.h"

namespace py = pybind11;

namespace pinsight {
namespace {

// A str is configuration text; an os.PathLike names a file.
ParseResult parse_argument(const py::object &config) {
  if (py::isinstance<py::str>(config)) {
    return parse_config_string(config.cast<std::string>(), "<string>");
  }
  const py::object path = py::module_::import("os").attr("fspath")(config);
  return parse_config_file(path.cast<std::string>());
}

// Executions 0..n_calls-1 of one code object on one thread, decided by the
// tracer's own lexgion_execution() (lexgion.h). The first `monitoring_calls`
// executions run in MONITORING (as before a reload to the file's mode).
py::dict simulate(const py::object &config_argument, const std::string &qualname,
                  const std::string &filename, const std::string &module, int thread_id,
                  int64_t n_calls, int64_t monitoring_calls) {
  if (n_calls < 0) throw py::value_error("n_calls must be >= 0");
  if (monitoring_calls < 0) throw py::value_error("monitoring_calls must be >= 0");
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
  for (int64_t i = 0; i < n_calls; ++i) {
    const TraceMode now = i < monitoring_calls ? TraceMode::Monitoring : mode;
    const bool exhausted_before = lexgion_exhausted(settings, counters);
    const LexgionStep step =
        lexgion_execution(now, events, settings, counters, lexgion_traces_every(settings));
    if (exhausted_before && step.traced) {
      throw std::logic_error("lexgion_exhausted was true before traced execution " +
                             std::to_string(i));
    }
    if (step.traced) traced.push_back(i);
    if (step.ends_window) {
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

void register_config_probes(py::module_ &m) {
  m.def(
      "_parse_config", [](const std::string &path) { return config_dict(parse_config_file(path)); },
      py::arg("path"),
      "Parse a trace configuration file into a dict (for tests). Errors raise ValueError, one "
      "'file:line: message' a line.");
  m.def(
      "_parse_config_string",
      [](const std::string &text, const std::string &name) {
        return config_dict(parse_config_string(text, name));
      },
      py::arg("text"), py::arg("name") = "<string>",
      "Like _parse_config, for configuration text; `name` stands for the file in messages.");
  m.def(
      "_lexgion_simulate",
      [](const py::object &config, const std::string &qualname, const std::string &filename,
         const std::string &module, int thread_id, int64_t n_calls, int64_t monitoring_calls) {
        const py::dict detail =
            simulate(config, qualname, filename, module, thread_id, n_calls, monitoring_calls);
        return py::list(detail["traced"]);
      },
      py::arg("config"), py::arg("qualname"), py::arg("filename") = "", py::arg("module") = "",
      py::arg("thread_id") = 0, py::arg("n_calls") = 100, py::kw_only(),
      py::arg("monitoring_calls") = 0,
      "0-based indices of the executions of one function on one thread that the tracer would "
      "trace. `config` is configuration text (str) or a file (os.PathLike). The first "
      "`monitoring_calls` executions run in MONITORING mode.");
  m.def("_lexgion_simulate_detail", &simulate, py::arg("config"), py::arg("qualname"),
        py::arg("filename") = "", py::arg("module") = "", py::arg("thread_id") = 0,
        py::arg("n_calls") = 100, py::kw_only(), py::arg("monitoring_calls") = 0,
        "Like _lexgion_simulate, as a dict: traced, events, lexgion (section), "
        "module_selected, never_traced, window_end_at, exhausted_after, mode_after, warnings.");
}

}  // namespace pinsight
