// pinsight_python._pinsight_reader: reads pinsight-python LTTng traces with
// babeltrace2 and returns per-thread aggregates to Python as typed records
// (records.h), which Python only formats (report, flamegraph); the Chrome
// trace and Perfetto exports are written here. `Unbatcher` is `pinsight-python unbatch`.
#include <babeltrace2/babeltrace.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "analysis.h"
#include "records.h"
#include "unbatch.h"

namespace py = pybind11;
using namespace pinsight_reader;

PYBIND11_MODULE(_pinsight_reader, m) {
  m.doc() = "Trace reader of pinsight-python (babeltrace2)";
  py::register_exception<ReaderError>(m, "ReaderError", PyExc_RuntimeError);
  py::register_exception<OutputError>(m, "OutputError", PyExc_OSError);
  add_record_types(m);
  // The libbabeltrace2 loaded, which need not be the one this module was built
  // against (2.0): CTF 2 traces need 2.1's MIP 1 (trace_graph.h).
  m.def(
      "babeltrace2_version",
      [] {
        return std::to_string(bt_version_get_major()) + "." +
               std::to_string(bt_version_get_minor()) + "." +
               std::to_string(bt_version_get_patch());
      },
      "The version of the libbabeltrace2 loaded, e.g. 2.0.4.");
  m.def(
      "reads_ctf2", [] { return bt_get_maximal_mip_version() >= 1; },
      "Whether the libbabeltrace2 loaded reads CTF 2 traces (2.1 and later: MIP 1).");

  py::class_<Analysis>(m, "Analysis")
      .def(py::init([](std::vector<std::string> trace_dirs, bool call_trees,
                       std::string chrome_path, std::string perfetto_path, bool compress,
                       size_t decode_threads, std::vector<int64_t> pids, std::vector<int64_t> ranks,
                       std::vector<int64_t> threads, std::vector<std::string> modules,
                       std::vector<std::string> excludes, bool ignore_frozen) {
             if (!chrome_path.empty() && !perfetto_path.empty()) {
               throw std::invalid_argument("one export per read: chrome_path or perfetto_path");
             }
             ReadFilter filter{std::move(pids),    std::move(ranks),    std::move(threads),
                               std::move(modules), std::move(excludes), ignore_frozen};
             return std::make_unique<Analysis>(AnalysisOptions{
                 std::move(trace_dirs), call_trees, std::move(chrome_path),
                 std::move(perfetto_path), compress, decode_threads, std::move(filter)});
           }),
           py::arg("trace_dirs"), py::arg("call_trees") = true, py::arg("chrome_path") = "",
           py::arg("perfetto_path") = "", py::arg("compress") = true, py::arg("decode_threads") = 0,
           py::arg("pids") = std::vector<int64_t>{}, py::arg("ranks") = std::vector<int64_t>{},
           py::arg("threads") = std::vector<int64_t>{},
           py::arg("modules") = std::vector<std::string>{},
           py::arg("excludes") = std::vector<std::string>{}, py::arg("ignore_frozen") = false)
      .def("run", &Analysis::run, py::call_guard<py::gil_scoped_release>(),
           "Read the whole trace (releases the GIL). False if cancel() stopped it.")
      .def("cancel", &Analysis::cancel, py::call_guard<py::gil_scoped_release>())
      .def(
          "progress", [](const Analysis &a) { return progress_record(a.progress()); },
          "A Progress record: end_ns == 0 when the span is unknown.")
      .def("result", &result_record, "A TraceResult record, once run() returned True.");

  py::class_<Unbatcher>(m, "Unbatcher",
                        "pinsight-python unbatch: a batched trace rewritten "
                        "as a per-event (compact) one")
      .def(py::init<std::string, std::string>(), py::arg("trace_dir"), py::arg("out_dir"))
      .def("run", &Unbatcher::run, py::call_guard<py::gil_scoped_release>(),
           "Write the whole trace (releases the GIL). False if cancel() stopped it.")
      .def("cancel", &Unbatcher::cancel, py::call_guard<py::gil_scoped_release>())
      .def(
          "progress", [](const Unbatcher &u) { return progress_record(u.progress()); },
          "A Progress record: events written, the input's time reached.")
      .def(
          "damaged", [](const Unbatcher &u) { return damage_records(u.damages()); },
          "DamagedPart records: what damage to the input cost the conversion.");
}
