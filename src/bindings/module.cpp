// pinsight_python._pinsight_python: the Python-facing API. The hot callbacks
// are plain METH_FASTCALL functions (monitoring.cpp); pybind11 serves the rest.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

// Activation's API only: the layers below it are activation's to drive.
#include "activation/activation.h"
#include "activation/testing_api.h"

namespace py = pybind11;
namespace activation = pinsight::activation;

namespace {

py::dict status_dict() {
  pinsight::Status s = activation::status();
  py::dict d;
  d["active"] = s.active;
  d["refused"] = s.refused;
  d["backend"] = s.backend;
  d["mode"] = s.mode;
  d["payload"] = s.payload;
  d["lttng_available"] = s.lttng_available;
  d["lttng_error"] = s.lttng_error;
  d["tool_id"] = s.tool_id;
  d["events"] = s.events;
  d["config_path"] = s.config_path;
  d["config_generation"] = s.config_generation;
  d["events_emitted"] = s.events_emitted;
  d["alloc_sampling"] = s.alloc_sampling;
  d["alloc_native"] = s.alloc_native;
  d["alloc_samples"] = s.alloc_samples;
  d["gil_hooks"] = s.gil_hooks;
  d["code_objects_seen"] = s.code_objects_seen;
  d["code_objects_live"] = s.code_objects_live;
  d["threads_seen"] = s.threads_seen;
  d["reloads"] = s.reloads;
  d["reload_errors"] = s.reload_errors;
  return d;
}

// The core's keywords of the settings (kSettingFields), in its order.
py::tuple setting_keywords() {
  return std::apply([](const auto &...field) { return py::make_tuple(field.keyword...); },
                    pinsight::kSettingFields);
}

// A setting's field from its keyword, if given; its C++ type decides the
// conversion (a bad one raises TypeError: Python hands what its table says).
template <typename T>
bool set_field(pinsight::ActivateOptions &options, const pinsight::SettingField<T> &setting,
               const py::kwargs &given) {
  if (!given.contains(setting.keyword)) return false;
  options.*setting.field = given[setting.keyword].template cast<T>();
  return true;
}

pinsight::ActivateOptions activate_options(const py::kwargs &given) {
  pinsight::ActivateOptions options;
  size_t used = std::apply(
      [&](const auto &...field) { return (size_t{0} + ... + set_field(options, field, given)); },
      pinsight::kSettingFields);
  if (used != given.size()) {
    py::tuple known = setting_keywords();
    for (const auto &item : given) {
      if (!known.contains(item.first)) {
        throw py::type_error("activate(): unknown setting " +
                             py::repr(item.first).cast<std::string>());
      }
    }
  }
  return options;
}

}  // namespace

PYBIND11_MODULE(_pinsight_python, m) {
  m.doc() = "pinsight-python's compiled core: sys.monitoring callbacks into LTTng-UST";

  // Plain references, never released: a static py::object would be
  // destroyed after the interpreter has finalized.
  static PyObject *config_error =
      PyErr_NewException("pinsight_python._pinsight_python.ConfigError", PyExc_ValueError, nullptr);
  static PyObject *activation_error = PyErr_NewException(
      "pinsight_python._pinsight_python.ActivationError", PyExc_RuntimeError, nullptr);
  m.attr("ConfigError") = py::handle(config_error);
  m.attr("ActivationError") = py::handle(activation_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const pinsight::ConfigError &e) {
      PyErr_SetString(config_error, e.what());
    } catch (const pinsight::ActivationError &e) {
      PyErr_SetString(activation_error, e.what());
    }
  });

  m.def(
      "activate",
      [](unsigned long main_thread_ident, int mpi_rank, int mpi_size, const std::string &hostname,
         const std::string &argv, const py::kwargs &settings) {
        activation::activate(activate_options(settings),
                             {main_thread_ident, mpi_rank, mpi_size, hostname, argv});
      },
      py::arg("main_thread_ident"), py::arg("mpi_rank"), py::arg("mpi_size"), py::arg("hostname"),
      py::arg("argv"),
      "Start tracing: the process's identity, then each setting by its keyword "
      "(SETTINGS; one left out keeps its default).");
  m.attr("SETTINGS") = setting_keywords();
  m.def(
      "check_config",
      [](const std::string &path) {
        py::gil_scoped_release release;  // a large file takes a while
        return activation::check_config(path);
      },
      py::arg("path"),
      "Parse a configuration file as activate() and reloads do: its warnings, one "
      "'file:line: message' each; ConfigError with every error, one a line.");
  m.def(
      "native_keys",
      [](const std::string &path) {
        py::gil_scoped_release release;
        return activation::native_keys(path);
      },
      py::arg("path"),
      "The keys of a configuration file's sections that libpinsight.so reads (other "
      "domains', services'), by section: {'CUDA.default': ['device_activity']}.");
  m.def("deactivate", [] { activation::deactivate(); });
  m.def(
      "_alloc_finish", [] { activation::finish_alloc(); },
      "atexit: allocation samples still alive now are never freed (teardown aside).");
  m.def(
      "_flush_device_activity", [] { activation::flush_device_activity(); },
      "atexit: CUPTI's buffered kernel activity to PInsight's CUDA domain, probes alive.");
  m.def("status", &status_dict);
  m.def("set_mode", [](int mode) { activation::set_mode(mode, "set_mode"); });
  // The names of each setting's values, in their enums' order (MODES, PAYLOADS,
  // ...): activate() and set_mode() take a mode or payload as its index
  // (Python's settings.Mode and settings.Payload are checked against them).
  for (const activation::SettingNames &names : activation::setting_names()) {
    m.attr(names.attribute) = py::tuple(py::cast(names.names));
  }
  m.def("reload", [] {
    std::string error;
    bool ok;
    {
      py::gil_scoped_release release;
      ok = activation::reload(&error);
    }
    if (!ok) throw pinsight::ConfigError(error);
  });
  m.def("lexgions", [] {
    py::list out;
    for (const auto &l : activation::lexgions()) {
      py::dict d;
      d["qualname"] = l.qualname;
      d["filename"] = l.filename;
      d["module"] = l.module;
      d["lineno"] = l.lineno;
      d["executions"] = l.executions;
      d["traced"] = l.traced;
      out.append(d);
    }
    return out;
  });
  m.def("lttng_available", [] {
    std::string error;
    bool ok = activation::lttng_available(&error);
    return py::make_tuple(ok, error);
  });
  // Whether an LTTng session records our events in this process now (a process
  // joining a `pinsight-python trace` run waits for it).
  m.def("recording", [] { return activation::recording(); });
  // A flight-recorder run (activation/flight_recorder.h): this process's recorder,
  // its dumps, and the exception that ends it.
  m.def(
      "_start_recorder",
      [](const std::string &socket_path) {
        std::string error;
        return activation::start_flight_recorder(socket_path, &error) ? std::string() : error;
      },
      py::arg("socket_path"),
      "Connect to the run's keeper and start the recorder thread; '' or why not.");
  m.def("_stop_recorder", [] { activation::stop_flight_recorder(); });
  m.def(
      "_dump",
      [](const std::string &reason, const std::string &detail, double timeout_s) {
        std::string error;
        std::string where = activation::flight_dump(reason, detail, timeout_s, &error);
        return py::make_tuple(where, error);
      },
      py::arg("reason"), py::arg("detail"), py::arg("timeout_s"),
      "A dump of the run now: (its folder, '') or ('', why not).");
  m.def(
      "_note_exit_exception",
      [](const std::string &text) { activation::note_exit_exception(text); }, py::arg("text"),
      "atexit: the uncaught exception that ends the program.");
  m.def(
      "_unrecorded_told", [] { activation::unrecorded_told(); },
      "The process has said why no LTTng session records its events: activation says "
      "nothing more about it.");
  m.def("_after_fork_child", [] { activation::after_fork_child(); });
  m.def("_block_writer_tid", [] { return activation::block_writer_tid(); });
  m.def(
      "_emit_lexgion_counts", [] { activation::emit_lexgion_counts(); },
      "atexit: rate control's counts per code object (lexgion_counts), before the control "
      "thread stops.");
  m.def(
      "_stop_control_thread",
      [](bool hand_back_sigusr1) {
        Py_BEGIN_ALLOW_THREADS activation::stop_control_thread(hand_back_sigusr1);
        Py_END_ALLOW_THREADS
      },
      py::arg("hand_back_sigusr1"),
      "atexit (False: SIGUSR1 stays ours until the process ends) and detach (True).");
  // `pinsight-python attach` writes the code it injects into one anonymous
  // page (src/inject/injector.c, or gdb); the next injection releases it. The
  // injector's page is released only once its trampoline has marked it done
  // (its last access): a page still in use is kept.
  m.def("_release_attach_page", [](uintptr_t address) {
    long page = sysconf(_SC_PAGESIZE);
    if (address == 0 || address % static_cast<uintptr_t>(page) != 0) {
      throw std::invalid_argument("not a page address");
    }
    constexpr uint64_t kDoneMark = 0x656e6f6474686770ULL;  // injector.c's DONE_MARK
    const auto *bytes = reinterpret_cast<const char *>(address);
    uint64_t mark;
    std::memcpy(&mark, bytes + 8, sizeof mark);
    bool by_gdb = std::memcmp(bytes, "try:", 4) == 0;
    if (mark != kDoneMark && !by_gdb) return false;
    if (munmap(reinterpret_cast<void *>(address), static_cast<size_t>(page)) != 0) {
      throw std::system_error(errno, std::generic_category(), "munmap");
    }
    return true;
  });

  // For the test module only (testing_api.h): no Python-callable hook here.
  m.attr("_C_API") = py::capsule(&activation::testing_api(), pinsight::kTestingApiCapsule);
}
