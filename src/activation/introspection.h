// window_end_action = INTROSPECT:pause:script[:modes] (PInsight's): when a
// TRACING window ends, the control thread starts `bash script TRACE_DIR PID
// CONFIG`, then holds the GIL for the pause, so that no Python code runs (native
// code that let the GIL go runs on until it needs it back), then Python takes the
// resume mode. A SIGUSR1 ends the pause early, and the configuration is then
// reloaded: a script can rewrite the file and resume the program. Resuming in
// TRACING starts a new window (Tracer::end_introspection).
#pragma once

#include <string>

#include "config/config.h"

namespace pinsight::introspection {

// The tracer's hook (GIL held): a window ended with `action`. The script gets
// `config_path` as its third argument; `window_started` is called (GIL held)
// when the program resumes in a new TRACING window.
void request(const WindowEndAction &action, const std::string &config_path,
             void (*window_started)());
// On the thread whose execution ended the window, right after request(): lets
// the GIL go until the control thread holds it, so that the pause starts
// there and then, not a switch interval (5 ms of calls) later.
void hand_over_gil();
// The scripts' first argument, where the trace is: activate()'s trace_dir (the
// settings' PINSIGHT_PYTHON_TRACE_DIR, trace's output folder, else LTTng's own
// default, $LTTNG_HOME or $HOME, /lttng-traces), set at activation (GIL held).
void set_trace_dir(const std::string &dir);
// In a forked child (GIL held): no introspection of the parent's is under way.
void after_fork_child();

}  // namespace pinsight::introspection
