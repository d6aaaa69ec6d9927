// pinsight_python._pinsight_control: the LTTng session control `trace` and
// `attach` use (session_control.h). Every call releases the GIL: each one waits
// on the session daemon.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "session_control.h"

namespace py = pybind11;
using namespace pinsight_control;

namespace {

TraceFormat trace_format_named(const std::string &name) {
  if (name.empty()) return TraceFormat::Default;
  if (name == "ctf-1.8") return TraceFormat::Ctf18;
  if (name == "ctf-2") return TraceFormat::Ctf2;
  throw py::value_error("trace format '" + name + "': expected ctf-1.8 or ctf-2");
}

}  // namespace

PYBIND11_MODULE(_pinsight_control, m) {
  m.doc() = "LTTng session control of pinsight-python (liblttng-ctl)";
  py::register_exception<ControlError>(m, "ControlError", PyExc_RuntimeError);
  using release = py::call_guard<py::gil_scoped_release>;

  m.def("daemon_alive", &daemon_alive, release(),
        "Whether this user's LTTng client reaches a session daemon.");
  m.def("list_sessions", &list_sessions, release(), "The names of the daemon's sessions.");
  m.def(
      "create_session",
      [](const std::string &name, const std::string &path, const std::string &url,
         const std::string &ctrl_url, const std::string &data_url, bool snapshot,
         const std::string &trace_format) {
        create_session(name, SessionOutput{path, url, ctrl_url, data_url, snapshot,
                                           trace_format_named(trace_format)});
      },
      release(), py::arg("name"), py::arg("path") = "", py::arg("url") = "",
      py::arg("ctrl_url") = "", py::arg("data_url") = "", py::arg("snapshot") = false,
      py::arg("trace_format") = "",
      "Create a session writing to the directory `path`, or to `url`, or to a relay "
      "daemon's `ctrl_url` and `data_url`, in `trace_format` (\"ctf-1.8\", \"ctf-2\"; "
      "\"\": the daemon's default).");
  m.def("trace_formats", &trace_formats,
        "The trace formats this liblttng-ctl can ask for: ctf-1.8, and ctf-2 from LTTng 2.15.");
  m.def(
      "ctl_library", [] { return ctl_library().path; },
      "The liblttng-ctl loaded (which need not be the one this module was built against).");
  m.def(
      "ctl_release", [] { return ctl_library().minor; },
      "The LTTng 2.x release the loaded liblttng-ctl is at least, by the functions it has: "
      "13 (2.13 or earlier), 14, 15, 16.");
  m.def(
      "enable_channel",
      [](const std::string &session, const std::string &name, uint64_t subbuf_size,
         uint64_t num_subbuf, bool overwrite, uint32_t read_timer_us, uint32_t switch_timer_us) {
        enable_channel(session, ChannelSpec{name, subbuf_size, num_subbuf, overwrite, read_timer_us,
                                            switch_timer_us});
      },
      release(), py::arg("session"), py::arg("name"), py::arg("subbuf_size"), py::arg("num_subbuf"),
      py::arg("overwrite") = false, py::arg("read_timer_us") = 0, py::arg("switch_timer_us") = 0,
      "Enable a user-space channel with per-user buffers.");
  m.def("enable_event", &enable_event, release(), py::arg("session"), py::arg("channel"),
        py::arg("pattern"), "Enable the user-space tracepoints matching `pattern`.");
  m.def("add_context", &add_context, release(), py::arg("session"), py::arg("channel"),
        py::arg("type"), "Add a context field (`lttng add-context --type`) to every event.");
  m.def("context_types", &context_types, "The context types add_context takes.");
  m.def("track_no_process", &track_no_process, release(), py::arg("session"),
        "Record no process until track_vpids adds it.");
  m.def("track_vpids", &track_vpids, release(), py::arg("session"), py::arg("pids"),
        "Record these processes too (one already tracked is not an error).");
  m.def("track_vgid", &track_vgid, release(), py::arg("session"), py::arg("gid"),
        "Record the processes of this group.");
  m.def("start", &start, release(), py::arg("session"));
  m.def("stop", &stop, release(), py::arg("session"), py::arg("poll_us") = 1000,
        "Stop, and return once every buffered event is written.");
  m.def("destroy_no_wait", &destroy_no_wait, release(), py::arg("session"));
  m.def("record_snapshot", &record_snapshot, release(), py::arg("session"), py::arg("name") = "",
        py::arg("local_path") = "",
        "Write the buffers of a snapshot session now, as the snapshot `name`, under "
        "`local_path` or the session's own output.");
}
