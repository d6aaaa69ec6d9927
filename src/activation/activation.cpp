#include "activation/activation.h"

#include <dlfcn.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "activation/control_thread.h"
#include "activation/debugger_guard.h"
#include "activation/flight_recorder.h"
#include "activation/introspection.h"
#include "alloc/sampler.h"
#include "backends/factory.h"
#include "config/config.h"
#include "config/config_store.h"
#include "emit/cycle_clock.h"
#include "emit/emitter.h"
#include "gil/gil_hooks.h"
#include "tracer/gil_accounting.h"
#include "tracer/imports.h"
#include "tracer/tracer.h"

namespace pinsight::activation {
namespace {

// The process's activation. Written under the GIL; the atomics are read by the
// control thread without it.
struct State {
  // A flight-recorder run's stall watch (activate's flight_stall_s; < 0: no run).
  double flight_stall_s = -1;
  TraceMode mode_override = TraceMode::Tracing;  // activate(mode=)
  bool mode_override_set = false;
  Payload payload_override = Payload::Full;  // activate(payload=)
  bool payload_override_set = false;
  std::string backend_name = "auto";
  bool imports_requested = false;  // activate(events=[..., "import"])
  bool alloc_requested = false;    // activate(events=[..., "alloc"])
  bool gil_requested = false;      // activate(events=[..., "gil"])
  std::atomic<bool> alloc_wanted{false};
  std::atomic<bool> gil_wanted{false};  // asked for by activate or the configuration
  std::atomic<uint64_t> alloc_interval{kDefaultAllocSampleInterval};
  bool clock_plugin = false;  // activate(): LTTNG_UST_CLOCK_PLUGIN is set
  std::string lttng_error;
  // Said once per process that no session records its events (a program may
  // toggle tracing), at activation or, naming a version mismatch, from Python.
  bool told_unrecorded = false;
  std::string refused;
  std::mutex config_path_mutex;  // the control thread reads it (reload)
  std::string config_path;
  std::optional<std::vector<std::string>> module_filter;  // activate(modules=)
  std::vector<std::string> module_exclude;
  std::atomic<bool> report_config{true};
  std::atomic<uint64_t> reloads{0};
  std::atomic<uint64_t> reload_errors{0};
  // [Lexgion.default]'s window_timeout, armed at activation and each
  // publication (PInsight's: every TRACING window is bounded): its
  // CLOCK_MONOTONIC deadline (0: none), its action, and the tracer's count of
  // ended windows then (one ended since: nothing left to end).
  uint64_t window_deadline_ns = 0;
  WindowEndAction window_action;
  uint64_t windows_ended_at_arm = 0;
  // process_info's fields but the pid: a forked child emits them again, so
  // that readers label it by its rank or command line too.
  int mpi_rank = -1;
  int mpi_size = -1;
  std::string hostname, argv, python_version;
};

// Never destroyed: the control thread may still read it while the process exits.
State &state = *new State();

Tracer &tracer() { return Tracer::instance(); }

std::string config_path() {
  std::lock_guard<std::mutex> lock(state.config_path_mutex);
  return state.config_path;
}

// An index of `names` as its enum (-1: none); ConfigError for any other number:
// Python hands the enums' values, checked there by name.
template <typename T, typename Names>
std::optional<T> enum_at(int index, const Names &names, const char *what) {
  if (index == -1) return std::nullopt;
  if (index < 0 || static_cast<size_t>(index) >= std::size(names)) {
    throw ConfigError(std::string(what) + ": no " + std::to_string(index) + " among " +
                      std::to_string(std::size(names)) + " (" + expected_names(names) + ")");
  }
  return static_cast<T>(index);
}

template <typename Names>
std::vector<std::string> name_list(const Names &names) {
  return std::vector<std::string>(std::begin(names), std::end(names));
}

// Non-empty: this CPython's internals were not verified (compat.h).
std::string cpython_refusal() {
  constexpr bool free_threaded = compat::kFreeThreaded;
  // The headers this build was compiled with, then the interpreter running it.
  std::string reason = compat::unverified_cpython(PY_VERSION_HEX, free_threaded);
  if (!reason.empty()) return reason;
  PyObject *running = PySys_GetObject("hexversion");  // borrowed
  unsigned long hexversion = running ? PyLong_AsUnsignedLong(running) : PY_VERSION_HEX;
  if (PyErr_Occurred()) {
    PyErr_Clear();
    hexversion = PY_VERSION_HEX;
  }
  return compat::unverified_cpython(hexversion, free_threaded);
}

std::unique_ptr<Backend> installed_backend() {
  std::unique_ptr<Backend> backend = make_backend(state.backend_name);
  backend->install();  // throws ActivationError, e.g. no free tool id
  return backend;
}

// gil events: the GOT hooks are in place while the tracer is active and not
// OFF; events follow the mode (GIL held).
void sync_gil() {
  bool active = tracer().active() && state.gil_wanted.load() && tracer().mode() != TraceMode::Off;
  if (active && !gil_hooks::installed()) {
    std::string why_not;
    if (!gil_hooks::install(&why_not)) {
      std::fprintf(stderr, "pinsight-python: %s; gil_released events are not recorded\n",
                   why_not.c_str());
    }
  } else if (!active && gil_hooks::installed()) {
    gil_hooks::uninstall();
  }
  gil_accounting::set_enabled(active && !tracer().stepped_aside() &&
                              tracer().mode() == TraceMode::Tracing);
}

// Allocation sampling, gil events and the batched payload's idle flush follow
// what is wanted, the mode and activation (GIL held).
void sync_alloc() {
  sync_gil();
  bool tracing =
      tracer().active() && !tracer().stepped_aside() && tracer().mode() == TraceMode::Tracing;
  emitter::set_idle_flush(emitter::payload() == Payload::Batched && tracing);
  if (tracing && state.alloc_wanted.load()) {
    alloc::start(state.alloc_interval.load());
  } else if (alloc::active()) {
    alloc::stop();
  }
}

// The payload the emitter writes: the configuration's or activate()'s, but
// batched is refused where LTTng-UST's clock is a plugin's (ActivateOptions).
void set_payload(Payload payload) {
  if (payload == Payload::Batched && state.clock_plugin) {
    // Blocks time their records with CLOCK_MONOTONIC, LTTng-UST's clock unless
    // a plugin replaces it: the records would not line up with other events.
    static bool told = false;
    if (!told) {
      told = true;
      std::fprintf(stderr,
                   "pinsight-python: payload batched is refused under LTTNG_UST_CLOCK_PLUGIN "
                   "(its records are timed with CLOCK_MONOTONIC); compact is used instead\n");
    }
    payload = Payload::Compact;
  }
  emitter::set_payload(payload);
}

// activate()'s module options, applied to every configuration before it is published.
void apply_module_options(Config &config) {
  if (state.module_filter) config.module_filter = *state.module_filter;
  for (const std::string &name : state.module_exclude) {
    if (std::find(config.module_exclude.begin(), config.module_exclude.end(), name) ==
        config.module_exclude.end()) {
      config.module_exclude.push_back(name);
    }
  }
}

// Whether import/alloc/gil events are on under `config` (activate or the file).
void update_extra_events(const Config &config) {
  bool alloc = state.alloc_requested || (config.events & kEventAlloc) != 0;
  bool gil = state.gil_requested;
  if (!gil && (config.events & kEventGil) != 0) {
    // activate() refuses gil on a free-threaded build; a file naming it is
    // told so once, and its other settings apply.
    std::string refusal = compat::gil_events_refusal(compat::kFreeThreaded);
    static bool told = false;
    if (refusal.empty()) {
      gil = true;
    } else if (!told) {
      told = true;
      std::fprintf(stderr, "pinsight-python: %s: events: %s\n", config.path.c_str(),
                   refusal.c_str());
    }
  }
  state.gil_wanted = gil;
  state.alloc_interval = config.alloc_sample_interval;
  state.alloc_wanted = alloc;
  tracer().set_extra_events(state.imports_requested,
                            state.imports_requested || imports::named_by(config), alloc);
}

// The control thread's timer (GIL not held): the window ends unless it already
// did, or a later publication re-armed the timer.
void on_window_timeout() {
  if (compat::is_finalizing()) return;
  control::ScopedGil gil;
  if (state.window_deadline_ns == 0 ||
      emitter::cycle_clock::monotonic_ns() < state.window_deadline_ns)
    return;
  state.window_deadline_ns = 0;
  if (tracer().windows_ended() != state.windows_ended_at_arm) return;
  tracer().window_timed_out(state.window_action);
}

// (Re)arms the window timer: `action` after `timeout_s` (0: none) (GIL held).
void arm_window_timer(double timeout_s, const WindowEndAction &action) {
  if (timeout_s <= 0 || timeout_s > control::kLongestWaitS ||
      (!action.has_python_mode && !action.introspect)) {
    state.window_deadline_ns = 0;
    control::set_timer(0, nullptr);
    return;
  }
  state.window_deadline_ns =
      emitter::cycle_clock::monotonic_ns() + static_cast<uint64_t>(timeout_s * 1e9);
  state.window_action = action;
  state.windows_ended_at_arm = tracer().windows_ended();
  control::set_timer(state.window_deadline_ns, &on_window_timeout);
}

// Arms the window timer from the configuration in force, once it is published:
// at activation, at each publication, and for the new TRACING window after an
// INTROSPECT pause (GIL held).
void arm_window_timer_from_config() {
  const Config *config = config_store::read_lock();
  const double timeout_s = config->window_timeout_s;
  const WindowEndAction action = config->window_timeout_action;
  config_store::read_unlock();
  arm_window_timer(timeout_s, action);
}

// The tracer's hook: a window ended with INTROSPECT (GIL held).
void on_introspect(const WindowEndAction &action) {
  introspection::request(action, config_path(), &arm_window_timer_from_config);
  introspection::hand_over_gil();
}

// Publishes a parsed configuration (control thread or activate).
void publish_config(std::unique_ptr<Config> config, const char *reason, bool gil_held) {
  apply_module_options(*config);
  TraceMode config_mode = config->mode;
  Payload config_payload = config->payload;
  update_extra_events(*config);
  // Parsing and RCU publication happen without the GIL; only what touches
  // CPython takes it.
  uint64_t generation = config_store::publish(std::move(config));
  if (!tracer().active() || (!gil_held && compat::is_finalizing())) {
    tracer().set_generation(generation);
    return;
  }
  std::optional<control::ScopedGil> gil;
  if (!gil_held) gil.emplace();
  if (!tracer().active()) {
    tracer().set_generation(generation);
    return;
  }
  // Under the GIL, with the mode it brings: status() never shows the new
  // generation with the old mode.
  set_payload(state.payload_override_set ? state.payload_override : config_payload);
  tracer().config_published(generation, state.mode_override_set ? state.mode_override : config_mode,
                            reason);
  emitter::config_info(config_path(), generation);
  sync_alloc();  // a reload may turn sampling on or off, or change its interval
  arm_window_timer_from_config();
}

void emit_process_info(const char *backend) {
  char procname[17] = {};  // what LTTng's procname context reads: the thread's comm
  if (prctl(PR_GET_NAME, procname) != 0) procname[0] = '\0';
  emitter::process_info(static_cast<int>(getpid()), state.mpi_rank, state.mpi_size, state.hostname,
                        state.argv, state.python_version, backend ? backend : "none", procname);
  // Written again at every flight recorder's dump: the ring loses the first.
  flight_recorder::remember_process_info(static_cast<int>(getpid()), state.mpi_rank, state.mpi_size,
                                         state.hostname, state.argv, state.python_version, backend,
                                         procname);
}

// The control thread's SIGUSR1: reload, and say once when there is nothing to
// reload (a job script's `kill -USR1` must not pass unnoticed).
void on_reload_signal() {
  static bool told_nothing_to_reload = false;
  // The batched payload's pending records go out first: a snapshot recorded
  // after the signal holds them (a flush with nothing to reload is no mistake).
  bool flushed = false;
  if (emitter::payload() == Payload::Batched && tracer().active() && !compat::is_finalizing()) {
    control::ScopedGil gil;
    emitter::flush_blocks(/*last=*/false);
    flushed = true;
  }
  std::string error;
  if (!reload(&error) && !told_nothing_to_reload && !flushed && config_path().empty()) {
    told_nothing_to_reload = true;
    std::fprintf(stderr,
                 "pinsight-python: SIGUSR1: tracing was activated without a configuration "
                 "file, so there is nothing to reload (said once)\n");
  }
}

// A debugger traces the program (debugger_guard): no events until it is done,
// the place marked in the trace (readers close the frames open there).
void step_aside_for_debugger() {
  if (!tracer().active() || tracer().stepped_aside()) return;
  emitter::flush_blocks(/*last=*/true);  // the batched payload's records come first
  emitter::mode_change("OFF", "debugger", tracer().generation());
  tracer().step_aside();
}

// The debugger is done: trace again in the current mode, from the frames running now.
void step_back_after_debugger() {
  if (!tracer().stepped_aside()) return;
  emitter::mode_change(trace_mode_name(tracer().mode()), "debugger_done", tracer().generation());
  tracer().step_back();
}

std::unique_ptr<Config> initial_config(const ActivateOptions &options) {
  if (options.config_path.empty()) return default_config();
  ParseResult parsed = parse_config_file(options.config_path);
  if (!parsed.config) {
    std::string message;
    for (const auto &e : parsed.errors) message += (message.empty() ? "" : "\n") + e.to_string();
    throw ConfigError(message);
  }
  for (const auto &warning : parsed.warnings) {
    if (!options.report_config) break;
    std::fprintf(stderr, "pinsight-python: warning: %s\n", warning.to_string().c_str());
  }
  return std::move(parsed.config);
}

}  // namespace

void activate(const ActivateOptions &options, const ProcessIdentity &process) {
  if (tracer().active()) return;
  if (options.gil_events) {
    std::string refusal = compat::gil_events_refusal(compat::kFreeThreaded);
    if (!refusal.empty()) throw ActivationError(refusal);
  }
  debugger_guard::disarm();
  std::string unverified = cpython_refusal();
  if (!unverified.empty()) {
    // The program runs untraced; status() says why.
    if (state.refused.empty()) {
      std::fprintf(stderr, "pinsight-python: %s; tracing is off and the program runs untraced\n",
                   unverified.c_str());
    }
    state.refused = unverified;
    return;
  }
  Tracer::prepare();
  std::unique_ptr<Config> config = initial_config(options);

  // Mode and payload: the caller's, else the file's.
  std::optional<TraceMode> given_mode =
      enum_at<TraceMode>(options.mode, kTraceModeNames, "activate: trace mode");
  std::optional<Payload> given_payload =
      enum_at<Payload>(options.payload, kPayloadNames, "activate: payload");
  TraceMode initial = given_mode.value_or(config->mode);
  state.mode_override_set = given_mode.has_value();
  state.mode_override = initial;
  Payload payload = given_payload.value_or(config->payload);
  state.payload_override_set = given_payload.has_value();
  state.payload_override = payload;

  state.module_filter = options.module_filter;
  state.module_exclude = options.module_exclude;
  state.report_config.store(options.report_config);
  state.clock_plugin = options.clock_plugin;
  introspection::set_trace_dir(options.trace_dir);
  state.flight_stall_s = options.flight_stall_s;
  emitter::allow_cycle_clock(options.cycle_clock);
  emitter::allow_block_writer(options.block_writer);
  apply_module_options(*config);
  state.imports_requested = options.import_events;
  state.alloc_requested = options.alloc_events;
  state.gil_requested = options.gil_events;
  update_extra_events(*config);
  {
    std::lock_guard<std::mutex> lock(state.config_path_mutex);
    state.config_path = options.config_path;
  }

  std::string lttng_error;
  if (!emitter::load_provider(&lttng_error)) {
    state.lttng_error = lttng_error;
    if (initial == TraceMode::Tracing) {
      std::fprintf(stderr, "pinsight-python: %s; tracing is off and the program runs untraced\n",
                   lttng_error.c_str());
      return;
    }
  }
  if (initial != TraceMode::Off && state.lttng_error.empty() && !emitter::recording() &&
      !state.told_unrecorded) {
    // Said at activation, and true then; sessions started later record the
    // events from then on.
    state.told_unrecorded = true;
    std::fprintf(stderr,
                 "pinsight-python: tracing is active in process %d, but no LTTng session "
                 "records python_pinsight_lttng_ust events yet: they are lost until one does "
                 "(pinsight-python trace -- COMMAND, or lttng create; lttng enable-event -u "
                 "'python_pinsight_lttng_ust:*'; lttng start)\n",
                 static_cast<int>(getpid()));
  }
  state.backend_name = options.backend;
  std::unique_ptr<Backend> backend;
  if (initial != TraceMode::Off) backend = installed_backend();
  tracer().set_hooks({&installed_backend, &sync_alloc, &on_introspect});
  thread_states::set_main_thread(process.main_thread_ident);
  thread_states::set_last_thread_exit_hook(&control::program_thread_exiting);
  uint64_t generation = config_store::publish(std::move(config));
  set_payload(payload);

  std::string version = Py_GetVersion();
  state.mpi_rank = process.mpi_rank;
  state.mpi_size = process.mpi_size;
  state.hostname = process.hostname;
  state.argv = process.argv;
  state.python_version = version.substr(0, version.find(' '));
  uint32_t requested =
      (options.function_events ? kEventFunction : 0u) | (options.c_call_events ? kEventCCall : 0u);
  // process_info first of all the process's events: readers label it by it.
  emit_process_info(backend ? backend->name() : nullptr);
  emitter::mode_change(trace_mode_name(initial), "activate", generation);
  emitter::config_info(options.config_path, generation);
  tracer().start(std::move(backend), initial, generation, requested);
  sync_alloc();
  control::start(&on_reload_signal);
  arm_window_timer_from_config();
  if (tracer().backend_name() && std::strcmp(tracer().backend_name(), "sys.monitoring") == 0) {
    debugger_guard::install({&step_aside_for_debugger, &step_back_after_debugger});
  }
}

// The tracer's stop() tells mode_changed (sync_alloc): sampling stops with it.
void deactivate() {
  debugger_guard::disarm();
  arm_window_timer(0, {});
  emit_lexgion_counts();
  tracer().stop();
}

Status status() {
  Status s;
  const Tracer &t = tracer();
  s.active = t.active();
  s.refused = state.refused;
  const char *backend = t.backend_name();
  s.backend = backend ? backend : (t.active() ? state.backend_name : "");
  s.mode = trace_mode_name(t.mode());
  s.payload = payload_name(emitter::payload());
  s.lttng_available = emitter::provider_loaded();
  s.lttng_error = state.lttng_error;
  s.tool_id = t.tool_id();
  const auto event = [&s](ActivationEvent e) {
    s.events.emplace_back(name_of(e, kActivationEventNames));
  };
  if (t.requested_events() & kEventFunction) event(ActivationEvent::Function);
  if (t.requested_events() & kEventCCall) event(ActivationEvent::CCall);
  if (t.imports_possible()) event(ActivationEvent::Import);
  if (state.alloc_wanted.load()) event(ActivationEvent::Alloc);
  if (state.gil_wanted.load() && t.active()) event(ActivationEvent::Gil);
  s.gil_hooks = gil_hooks::patched_count();
  s.alloc_sampling = alloc::active();
  s.alloc_native = alloc::native_hooked();
  s.alloc_samples = alloc::samples_taken();
  s.config_path = config_path();
  s.config_generation = t.generation();
  s.events_emitted = t.events_emitted();
  s.code_objects_live = code_registry::live_count();
  s.code_objects_seen = code_registry::created_count();
  s.threads_seen = t.threads_seen();
  s.reloads = state.reloads.load();
  s.reload_errors = state.reload_errors.load();
  return s;
}

void set_mode(int mode, const char *reason) {
  std::optional<TraceMode> parsed =
      enum_at<TraceMode>(mode, kTraceModeNames, "set_mode: trace mode");
  if (!parsed) throw ConfigError("set_mode: no trace mode given");
  tracer().set_mode(*parsed, reason);
}

std::vector<SettingNames> setting_names() {
  return {{"MODES", name_list(kTraceModeNames)},
          {"PAYLOADS", name_list(kPayloadNames)},
          {"EVENTS", name_list(kActivationEventNames)},
          {"BACKENDS", name_list(kBackendNames)}};
}

bool reload(std::string *error) {
  std::string path = config_path();
  if (path.empty()) {
    // Nothing to re-read: the built-in default stays in force.
    if (error) *error = "no configuration file to reload";
    return false;
  }
  ParseResult parsed = parse_config_file(path);
  for (const auto &warning : parsed.warnings) {
    if (!state.report_config.load()) break;
    std::fprintf(stderr, "pinsight-python: warning: %s\n", warning.to_string().c_str());
  }
  if (!parsed.config) {
    std::string message =
        "pinsight-python: configuration reload failed; the previous "
        "configuration stays in force:";
    for (const auto &e : parsed.errors) message += "\n  " + e.to_string();
    if (state.report_config.load()) std::fprintf(stderr, "%s\n", message.c_str());
    state.reload_errors.fetch_add(1);
    if (error) *error = message;
    return false;
  }
  // Counted first: whoever sees the new generation sees the reload counted.
  state.reloads.fetch_add(1);
  publish_config(std::move(parsed.config), "reload", /*gil_held=*/false);
  return true;
}

void after_fork_child() {
  introspection::after_fork_child();
  gil_hooks::after_fork_child();
  gil_accounting::after_fork_child();
  tracer().after_fork_child();
  if (tracer().active()) {
    emit_process_info(tracer().backend_name());
    control::start(&on_reload_signal);
    emitter::after_fork_in_python();
    flight_recorder::after_fork_child();
  }
}

bool start_flight_recorder(const std::string &socket_path, std::string *error) {
  if (!tracer().active()) {
    *error = "tracing is not active";
    return false;
  }
  if (state.flight_stall_s < 0) {
    *error = "this process's settings name no flight recorder (PINSIGHT_PYTHON_FLIGHT_RECORDER)";
    return false;
  }
  return flight_recorder::start(socket_path, state.flight_stall_s, error);
}

void stop_flight_recorder() { flight_recorder::stop(); }

std::string flight_dump(const std::string &reason, const std::string &detail, double timeout_s,
                        std::string *error) {
  return flight_recorder::dump(reason, detail, timeout_s, error);
}

void note_exit_exception(const std::string &text) { flight_recorder::note_exit_exception(text); }

void emit_lexgion_counts() {
  if (!tracer().active()) return;  // deactivate() wrote them
  for (const LexgionReport &l : tracer().lexgions()) {
    if (!l.rate_controlled) continue;
    emitter::lexgion_counts(*l.code, l.executions, l.traced,
                            l.lower_bound ? emitter::kLexgionLowerBound : 0, l.max_num_traces,
                            l.tracing_rate, l.trace_starts_at, l.section);
  }
}

void stop_control_thread(bool hand_back_sigusr1) { control::stop(hand_back_sigusr1); }

int block_writer_tid() { return emitter::block_writer_tid(); }

void finish_alloc() { alloc::finish(); }

void flush_device_activity() {
  using Flush = int (*)(uint32_t);
  // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: incomplete buffers too.
  constexpr uint32_t kFlushForced = 1;
  if (auto flush = reinterpret_cast<Flush>(dlsym(RTLD_DEFAULT, "cuptiActivityFlushAll"))) {
    flush(kFlushForced);
  }
}

std::vector<LexgionStatus> lexgions() {
  std::vector<LexgionStatus> out;
  for (const auto &l : tracer().lexgions()) {
    out.push_back({l.qualname, l.filename, l.module, l.lineno, l.executions, l.traced});
  }
  return out;
}

std::vector<std::string> check_config(const std::string &path) {
  ParseResult parsed = parse_config_file(path);
  std::vector<std::string> lines;
  for (const auto &e : (parsed.config ? parsed.warnings : parsed.errors)) {
    lines.push_back(e.to_string());
  }
  if (!parsed.config) {
    std::string message;
    for (const auto &line : lines) message += (message.empty() ? "" : "\n") + line;
    throw ConfigError(message);
  }
  return lines;
}

std::map<std::string, std::vector<std::string>> native_keys(const std::string &path) {
  return parse_config_file(path).native_keys;
}

bool lttng_available(std::string *error) { return emitter::load_provider(error); }

void unrecorded_told() { state.told_unrecorded = true; }

bool recording() { return emitter::recording(); }

}  // namespace pinsight::activation
