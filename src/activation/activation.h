// Activation: the policy around the per-event tracer. activate() resolves what
// to trace (the options Python resolved, the configuration file), loads the
// provider, chooses the backend and starts the tracer and the control thread;
// it publishes every configuration (activation, reload), keeps the process's
// identity for process_info, and answers status(). The control thread only
// signals it (reload on SIGUSR1); the tracer reaches it through TracerHooks.
//
// Every function here runs with the GIL held, except reload() and
// check_config() (any thread, GIL not held). The bindings call these and
// nothing under them: this header includes common/errors.h only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/errors.h"  // ActivationError, thrown through activate() and set_mode()

namespace pinsight {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Every setting the core takes: a row of Python's table (activation/settings.py,
// SETTINGS), resolved there once, defaults and variables included. A field
// here, named as the row's core keyword, and its line in kSettingFields below.
// The mode and payload come as indexes into their names (common/settings.h,
// the enums' values), -1 for the configuration's: nothing here parses them.
struct ActivateOptions {
  bool function_events = true;
  bool c_call_events = true;
  bool import_events = false;    // also when the configuration names import
  bool alloc_events = false;     // also when the configuration names alloc
  bool gil_events = false;       // gil_switch / gil_released (refused on free-threaded builds)
  std::string config_path;       // empty: the built-in default configuration
  int mode = -1;                 // a TraceMode's index; -1: the configuration's
  std::string backend = "auto";  // a name of kBackendNames
  int payload = -1;              // a Payload's index; -1: the configuration's
  // modules=: replaces the configuration's module_filter (none: the file's);
  // exclude=: added to its module_exclude. Both hold across reloads.
  std::optional<std::vector<std::string>> module_filter;
  std::vector<std::string> module_exclude;
  // False under a supervisor (pinsight-python trace) that reports the
  // configuration's warnings and reload errors once for the whole run.
  bool report_config = true;
  // LTTNG_UST_CLOCK_PLUGIN is set: LTTng-UST times events with a plugin's clock,
  // with which the batched payload's CLOCK_MONOTONIC records would not line up,
  // so batched is refused (compact instead).
  bool clock_plugin = false;
  // PINSIGHT_PYTHON_CYCLE_CLOCK is not 0: the batched payload may time its
  // records with the CPU's cycle counter (emit/cycle_clock.h).
  bool cycle_clock = true;
  // The batched payload's blocks written by a writer thread (emit/block_buffer.h),
  // not by each traced thread itself.
  bool block_writer = true;
  // Where the trace goes: an INTROSPECT window end's script's first argument
  // (activation/introspection.h).
  std::string trace_dir;
  // A flight-recorder run's stall watch, in seconds (0: none); below 0, no
  // flight recorder (activation/flight_recorder.h).
  double flight_stall_s = -1;
};

// A setting's core keyword and its field: the bindings set each field from its
// keyword and export the keywords (_pinsight_python.SETTINGS), which
// tests/unit/test_settings.py holds equal to the table's.
template <typename T>
struct SettingField {
  const char *keyword;
  T ActivateOptions::*field;
};

template <typename T>
constexpr SettingField<T> setting_field(const char *keyword, T ActivateOptions::*field) {
  return {keyword, field};
}

inline constexpr auto kSettingFields =
    std::make_tuple(setting_field("function_events", &ActivateOptions::function_events),
                    setting_field("c_call_events", &ActivateOptions::c_call_events),
                    setting_field("import_events", &ActivateOptions::import_events),
                    setting_field("alloc_events", &ActivateOptions::alloc_events),
                    setting_field("gil_events", &ActivateOptions::gil_events),
                    setting_field("config_path", &ActivateOptions::config_path),
                    setting_field("mode", &ActivateOptions::mode),
                    setting_field("backend", &ActivateOptions::backend),
                    setting_field("payload", &ActivateOptions::payload),
                    setting_field("module_filter", &ActivateOptions::module_filter),
                    setting_field("module_exclude", &ActivateOptions::module_exclude),
                    setting_field("report_config", &ActivateOptions::report_config),
                    setting_field("clock_plugin", &ActivateOptions::clock_plugin),
                    setting_field("cycle_clock", &ActivateOptions::cycle_clock),
                    setting_field("block_writer", &ActivateOptions::block_writer),
                    setting_field("trace_dir", &ActivateOptions::trace_dir),
                    setting_field("flight_stall_s", &ActivateOptions::flight_stall_s));

// Who this process is, for process_info (not settings: the API finds them).
struct ProcessIdentity {
  unsigned long main_thread_ident = 0;
  int mpi_rank = -1;
  int mpi_size = -1;
  std::string hostname;
  std::string argv;
};

struct Status {
  bool active = false;
  std::string refused;  // why activate() refused to trace on this CPython; empty otherwise
  std::string backend;
  std::string mode;
  std::string payload;
  bool lttng_available = false;
  std::string lttng_error;
  int tool_id = -1;
  std::vector<std::string> events;
  std::string config_path;
  uint64_t config_generation = 0;
  uint64_t events_emitted = 0;
  uint64_t code_objects_seen = 0;
  size_t code_objects_live = 0;
  int threads_seen = 0;
  uint64_t reloads = 0;
  uint64_t reload_errors = 0;
  bool alloc_sampling = false;  // allocation hooks sampling now
  bool alloc_native = false;    // the preload library's malloc hooks are in place
  uint64_t alloc_samples = 0;
  size_t gil_hooks = 0;  // GOT entries patched for gil events
};

// One lexgion of the live configuration (lexgions()).
struct LexgionStatus {
  std::string qualname, filename, module;
  int lineno = 0;
  uint64_t executions = 0, traced = 0;
};

namespace activation {

// Throws ConfigError (bad configuration or option) and ActivationError.
void activate(const ActivateOptions &options, const ProcessIdentity &process);
void deactivate();
Status status();
// `mode`: an index of mode_names(); ConfigError otherwise.
void set_mode(int mode, const char *reason);
// The names of each setting's values (common/settings.h), in their enums'
// order, under the attribute the bindings export them as (MODES, PAYLOADS,
// EVENTS, BACKENDS): Python's enums are checked against them.
struct SettingNames {
  const char *attribute;
  std::vector<std::string> names;
};
std::vector<SettingNames> setting_names();
// Re-reads the configuration file (SIGUSR1, the API); false with *error set
// when there is none or it is bad (the previous configuration stays in force).
bool reload(std::string *error);
// In a forked child (os.register_at_fork): the tracer's part, then process_info
// again and the child's own control thread.
void after_fork_child();
// A flight-recorder run (pinsight-python trace --flight-recorder, activate()'s
// flight_stall_s): this process's recorder, connected to the run's keeper at
// `socket_path`. After activate(); false with *error when the run is no
// flight recorder's or its keeper cannot be reached (activation/flight_recorder.h).
bool start_flight_recorder(const std::string &socket_path, std::string *error);
void stop_flight_recorder();
// pinsight_python.dump(): the GIL is released while the keeper writes it. The
// dump's folder; empty with *error when none was taken.
std::string flight_dump(const std::string &reason, const std::string &detail, double timeout_s,
                        std::string *error);
// Python's atexit, after an uncaught exception (sys.last_exc): the exit's dump
// is named after it.
void note_exit_exception(const std::string &text);
// Before the interpreter finalizes (atexit: SIGUSR1 stays ours) and on detach
// (hand_back_sigusr1: the program's handler again); control::stop says why.
void stop_control_thread(bool hand_back_sigusr1);
// The batched payload's writer thread's tid (0: none runs here): pinsight_python's
// fork hook counts the program's threads without ours.
int block_writer_tid();
// Rate control's counts (lexgion_counts) of every rate-controlled code object
// that ran: atexit, before the control thread stops, and at deactivate().
void emit_lexgion_counts();
// atexit: allocation samples still alive now are never freed (alloc::finish).
void finish_alloc();
// atexit, first: CUPTI's buffered activity records (the kernels' device times)
// handed to PInsight's CUDA domain while its LTTng probes exist: libpinsight
// flushes them only in a destructor that runs after its probes are gone. Nothing
// happens where CUPTI is not loaded; no Python code runs.
void flush_device_activity();
std::vector<LexgionStatus> lexgions();

// Any thread, GIL not needed: parses a configuration file as activate() and
// reload() do; its warnings ("file:line: message" each), else ConfigError
// with every error, one a line.
std::vector<std::string> check_config(const std::string &path);
// Any thread, GIL not needed: the keys of the file's sections that are
// libpinsight.so's (other domains', services'), by section, as parsed there.
std::map<std::string, std::vector<std::string>> native_keys(const std::string &path);
// Loads the provider (once) as activate() does; false with *error set where
// LTTng-UST is unavailable.
bool lttng_available(std::string *error);
// Whether an LTTng session records our events in this process now.
bool recording();
// The process has said why no session records its events (a version mismatch,
// told from Python): activation then keeps its general line to itself.
void unrecorded_told();

}  // namespace activation
}  // namespace pinsight
