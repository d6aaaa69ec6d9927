#include "tracer/tracer.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "alloc/sampler.h"
#include "control/control.h"
#include "tracer/imports.h"
#include "tracer/legacy_qualname.h"

namespace pinsight {

Tracer &Tracer::instance_ = *new Tracer();

namespace {

bool is_own_module(const std::string &module) {
  static const std::string own = "pinsight_python";
  return module.compare(0, own.size(), own) == 0 &&
         (module.size() == own.size() || module[own.size()] == '.');
}

// `given` (an activate() argument), else environment variable `variable`, else
// `fallback` (the configuration's); *overridden: one of the first two was set.
template <typename T>
T overridden_setting(const std::string &given, const char *option, const char *variable, T fallback,
                     bool (*parse)(std::string_view, T *), const char *what, const char *expected,
                     bool *overridden) {
  std::string text = given;
  const char *source = option;
  if (text.empty()) {
    const char *env = std::getenv(variable);
    if (env && *env) {
      text = env;
      source = variable;
    }
  }
  *overridden = !text.empty();
  if (text.empty()) return fallback;
  T value = fallback;
  if (!parse(text, &value)) {
    throw ConfigError(std::string(source) + ": unknown " + what + " '" + text + "' (expected " +
                      expected + ")");
  }
  return value;
}

}  // namespace

// ---------------------------------------------------------------------------
// Decisions (slow paths).

void Tracer::apply_decision(CodeInfo &code, const Config &config) {
  CodeDecision decision = config.decide_code(code.qualname, code.filename, code.module);
  code.limits = *decision.lexgion;
  code.lexgion = decision.lexgion;
  code.module_selected = decision.module_selected && !is_own_module(code.module);
  code.generation = config.generation;
}

void Tracer::decide(CodeInfo &code) {
  const Config *config = config_store::read_lock();
  apply_decision(code, *config);
  config_store::read_unlock();
}

void Tracer::decide_thread(CodeInfo &code, ThreadLexgion &lex, int python_thread_id) {
  const Config *config = config_store::read_lock();
  if (code.generation != config->generation) apply_decision(code, *config);
  lex.events = code.module_selected
                   ? config->events_for(*code.lexgion, python_thread_id) & requested_events_
                   : 0;
  lex.generation = code.generation;
  config_store::read_unlock();
}

uint8_t Tracer::never_traced_again(const CodeInfo &code, const ThreadLexgion &lex) const {
  // Thread-independent verdicts hold for every thread, present or future.
  if (!code.module_selected || code.limits.max_num_traces == 0 || code.limits.never_traced) {
    return kDisabledShared;
  }
  // DISABLE silences a location for all threads: per-thread verdicts only
  // count while this is the only thread (a new thread re-arms them).
  if (thread_states::live_count() > 1) return 0;
  return lex.events == 0 || lexgion_exhausted(code.limits, lex.counters) ? kDisabledPerThread : 0;
}

Verdict Tracer::disable(PyObject *code) {
  // Slow path: once per location, which then stays quiet until re-armed. The
  // profile hook cannot disable anything: nothing to remember then.
  if (!backend_ || backend_->tool_id() < 0) return Verdict::Disable;
  if (CodeInfo *info = code_registry::get(code)) return disable(*info);
  return Verdict::Disable;
}

void Tracer::rearm(bool per_thread_only) {
  if (!backend_) return;
  std::vector<PyObject *> codes;
  for (CodeInfo *info = code_registry::first(); info; info = info->next) {
    if (!info->disabled || (per_thread_only && !(info->disabled & kDisabledPerThread))) continue;
    codes.push_back(info->code);
    info->disabled = 0;
    info->begins_disabled_epoch = 0;
  }
  if (!per_thread_only) ++disable_epoch_;
  if (codes.empty()) return;
  try {
    backend_->rearm(codes);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "pinsight-python: cannot re-enable CPython events: %s\n", e.what());
  }
}

// ---------------------------------------------------------------------------
// Records that outlive their code (none should: see CodeInfo).

CodeInfo Tracer::forgotten_code_ = [] {
  CodeInfo info;
  info.qualname = "<forgotten>";
  info.filename = "<none>";
  return info;
}();

void Tracer::forget_code(CodeInfo &code) {
  thread_states::forget_code(code, forgotten_code_);
  instance_.generators_.forget_code(code);
}

bool Tracer::drop_forgotten(ThreadState &state) {
  bool dropped = false;
  while (!state.stack.empty() && state.stack.back().code == &forgotten_code_) {
    if (state.stack.back().kind == RecordKind::Function) --forgotten_code_.open_records;
    state.stack.pop_back();
    --open_records_;
    dropped = true;
  }
  return dropped;
}

void Tracer::close_stale_calls(ThreadState &state, const void *frame) {
  // Native calls of `frame` that CPython reported no end for: the frame has
  // moved on, so they are over.
  while (!state.stack.empty() && state.stack.back().frame == frame &&
         state.stack.back().kind == RecordKind::CCall) {
    FrameRecord record = state.stack.back();
    state.stack.pop_back();
    --open_records_;
    if (record.flags & kEmitEnd) {
      ++events_emitted_;
      emitter::c_call(false, *record.code, record.callee_name, record.line, state.python_thread_id,
                      wire::kCReturn);
    }
  }
}

void Tracer::window_ended(CodeInfo &code) {
  const WindowEndAction &action = code.limits.window_end;
  if (action.has_python_mode && action.python_mode != mode()) {
    set_mode(action.python_mode, "window_end_action");
  }
}

// ---------------------------------------------------------------------------
// Modes and CPython's events.

void Tracer::reconcile_events() {
  if (!backend_ || reconciling_) return;
  reconciling_ = true;
  TraceMode current = mode();
  uint32_t calls = (requested_events_ & kEventCCall) ? uint32_t{kCPyCalls} : 0u;
  uint32_t wanted = 0;
  if (current >= TraceMode::Monitoring) {
    wanted = kCPyBegins | kCPyEnds | calls;
  } else if (open_records_ > 0) {
    // STANDBY/OFF: frames traced before still need their ends; each other
    // location goes quiet on first use (DISABLE).
    wanted = kCPyEnds | calls;
  }
  try {
    if (wanted != installed_events_) {
      backend_->set_events(wanted);
      installed_events_ = wanted;
    }
    if (current == TraceMode::Off && wanted == 0 && backend_) {
      backend_->uninstall();
      backend_.reset();
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "pinsight-python: cannot switch CPython events: %s\n", e.what());
  }
  reconciling_ = false;
}

void Tracer::update_extra_events(const Config &config) {
  imports_possible_ = imports_requested_ || imports::named_by(config);
  bool alloc = alloc_requested_ || (config.events & kEventAlloc) != 0;
  alloc_interval_ = config.alloc_sample_interval;
  alloc_wanted_ = alloc;
  shadow_all_ = alloc;
}

void Tracer::sync_alloc() {
  if (active_ && alloc_wanted_.load() && mode() == TraceMode::Tracing) {
    alloc::start(alloc_interval_.load());
  } else if (alloc::active()) {
    alloc::stop();
  }
}

void Tracer::set_mode(TraceMode new_mode, const char *reason) {
  TraceMode old = mode_.exchange(new_mode);
  if (old == new_mode) return;
  emitter::mode_change(trace_mode_name(new_mode), reason, generation_.load());
  if (!active_) return;
  if (!backend_ && new_mode != TraceMode::Off) {
    try {
      backend_ = make_backend(backend_name_);
      backend_->install();
      installed_events_ = 0;
    } catch (const std::exception &e) {
      backend_.reset();
      std::fprintf(stderr, "pinsight-python: cannot switch to %s: %s\n", trace_mode_name(new_mode),
                   e.what());
      mode_.store(TraceMode::Off);
      return;
    }
  }
  reconcile_events();
  sync_alloc();
  // Locations silenced under the old mode may be needed now.
  if (new_mode >= TraceMode::Monitoring) rearm(/*per_thread_only=*/false);
}

void Tracer::set_payload(Payload payload) {
  bool compact = payload == Payload::Compact;
  if (emitter::compact_payload == compact) return;
  emitter::compact_payload = compact;
  // Names written under the other payload may be far back: write them again.
  emitter::advance_naming_epoch();
}

void Tracer::apply_module_options(Config &config) const {
  if (module_filter_given_) config.module_filter = module_filter_;
  for (const std::string &name : module_exclude_) {
    if (std::find(config.module_exclude.begin(), config.module_exclude.end(), name) ==
        config.module_exclude.end()) {
      config.module_exclude.push_back(name);
    }
  }
}

void Tracer::publish_config(std::unique_ptr<Config> config, const char *reason, bool gil_held) {
  apply_module_options(*config);
  TraceMode config_mode = config->mode;
  Payload config_payload = config->payload;
  update_extra_events(*config);
  // Parsing and RCU publication happen without the GIL; only what touches
  // CPython takes it.
  uint64_t generation = config_store::publish(std::move(config));
  if (!active_ || (!gil_held && compat::is_finalizing())) {
    generation_.store(generation);
    return;
  }
  std::optional<control::ScopedGil> gil;
  if (!gil_held) gil.emplace();
  // Under the GIL, with the mode it brings: status() never shows the new
  // generation with the old mode.
  generation_.store(generation);
  if (active_) {
    set_payload(payload_override_set_ ? payload_override_ : config_payload);
    TraceMode target = mode_override_set_ ? mode_override_ : config_mode;
    if (target == mode()) {
      emitter::mode_change(trace_mode_name(target), reason, generation);
      // Decisions may change: re-enable the locations we silenced.
      if (target >= TraceMode::Monitoring) rearm(/*per_thread_only=*/false);
    } else {
      set_mode(target, reason);
    }
    sync_alloc();  // a reload may turn sampling on or off, or change its interval
  }
}

void Tracer::on_new_thread(ThreadState &state) {
  threads_seen_.fetch_add(1);
  emitter::thread_start(state.python_thread_id, state.thread_ident);
  if (thread_states::live_count() > 1 && mode() >= TraceMode::Monitoring) {
    // Per-thread verdicts made while this thread did not exist no longer
    // hold for every thread. Only our own locations: other tools keep what
    // they disabled.
    rearm(/*per_thread_only=*/true);
  }
}

void Tracer::internal_failure(const char *what) {
  if (failed_) return;
  failed_ = true;
  std::fprintf(stderr,
               "pinsight-python: internal error: %s; tracing is turned off for this process\n",
               what);
  mode_.store(TraceMode::Off);
  open_records_ = 0;
  reconcile_events();
  sync_alloc();
}

// ---------------------------------------------------------------------------
// Activation.

void Tracer::push_activation_frames(ThreadState &state) {
  // Frames already running (the script's module code, the function that
  // called activate()) get a record without a begin: their ends are then
  // recognised, and the native calls they make are traced.
  std::vector<PyFrameObject *> frames;
  PyFrameObject *frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame) {
    frames.push_back(frame);
    frame = compat::frame_back(frame);  // new reference
  }
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    PyCodeObject *code = compat::frame_code(*it);    // borrowed
    PyObject *globals = compat::frame_globals(*it);  // new reference
    CodeInfo *info = code_registry::get(reinterpret_cast<PyObject *>(code), globals);
    Py_XDECREF(globals);
    if (!info) continue;
    ThreadLexgion &lex = info->for_thread(state.python_thread_id);
    if (info->generation != generation_.load() || lex.generation != info->generation) {
      decide_thread(*info, lex, state.python_thread_id);
    }
    uint8_t flags =
        (lex.events & kEventCCall) && info->limits.max_num_traces != 0 ? kTraceCCalls : 0;
    state.stack.push_back(
        {compat::frame_key(*it), info, nullptr, nullptr, 0, RecordKind::Function, flags});
    ++info->open_records;
    ++open_records_;
  }
  for (PyFrameObject *f : frames) Py_DECREF(f);
}

void Tracer::activate(const ActivateOptions &options) {
  if (active_) return;
  std::string unverified = cpython_refusal();
  if (!unverified.empty()) {
    // The program runs untraced; status() says why.
    if (refused_.empty()) {
      std::fprintf(stderr, "pinsight-python: %s; tracing is off and the program runs untraced\n",
                   unverified.c_str());
    }
    refused_ = unverified;
    return;
  }
  if (!code_registry::init()) throw ActivationError("no code-object extra slot is available");
  code_registry::set_forget_hook(&Tracer::forget_code);
  std::string generators_error;
  if (!GeneratorTable::init(&generators_error)) {
    throw ActivationError("cannot follow generators on this CPython: " + generators_error);
  }

  // Configuration: explicit path, PInsight's variable, then the working directory.
  std::string path = options.config_path;
  if (path.empty()) {
    const char *env = std::getenv("PINSIGHT_TRACE_CONFIG_FILE");
    if (env && *env) path = env;
  }
  if (path.empty() && access("pinsight_trace_config.txt", F_OK) == 0) {
    path = "pinsight_trace_config.txt";
  }
  std::unique_ptr<Config> config;
  if (path.empty()) {
    config = default_config();
  } else {
    ParseResult parsed = parse_config_file(path);
    if (!parsed.config) {
      std::string message;
      for (const auto &e : parsed.errors) message += (message.empty() ? "" : "\n") + e.to_string();
      throw ConfigError(message);
    }
    for (const auto &warning : parsed.warnings) {
      if (!options.report_config) break;
      std::fprintf(stderr, "pinsight-python: warning: %s\n", warning.to_string().c_str());
    }
    config = std::move(parsed.config);
  }

  // Mode and payload: the caller's, else the environment's, else the file's.
  TraceMode initial = overridden_setting(
      options.mode, "activate(mode=...)", "PINSIGHT_TRACE_PYTHON", config->mode, parse_trace_mode,
      "trace mode", "OFF, STANDBY, MONITORING or TRACING", &mode_override_set_);
  mode_override_ = initial;
  Payload payload = overridden_setting(options.payload, "activate(payload=...)",
                                       "PINSIGHT_PYTHON_PAYLOAD", config->payload, parse_payload,
                                       "payload", "full or compact", &payload_override_set_);
  payload_override_ = payload;

  module_filter_given_ = options.module_filter_given;
  module_filter_ = options.module_filter;
  module_exclude_ = options.module_exclude;
  report_config_.store(options.report_config);
  apply_module_options(*config);
  requested_events_ =
      (options.function_events ? kEventFunction : 0u) | (options.c_call_events ? kEventCCall : 0u);
  imports_requested_ = options.import_events;
  alloc_requested_ = options.alloc_events;
  update_extra_events(*config);
  config_path_ = path;

  std::string lttng_error;
  if (!emitter::load_provider(&lttng_error)) {
    lttng_error_ = lttng_error;
    if (initial == TraceMode::Tracing) {
      std::fprintf(stderr, "pinsight-python: %s; tracing is off and the program runs untraced\n",
                   lttng_error.c_str());
      return;
    }
  }

  if (initial != TraceMode::Off && lttng_error_.empty() && !emitter::recording()) {
    // Said once, at activation, and true then; sessions started later record the
    // events from then on.
    std::fprintf(stderr,
                 "pinsight-python: tracing is active in process %d, but no LTTng session "
                 "records python_pinsight_lttng_ust events yet: they are lost until one does "
                 "(pinsight-python trace -- COMMAND, or lttng create; lttng enable-event -u "
                 "'python_pinsight_lttng_ust:*'; lttng start)\n",
                 static_cast<int>(getpid()));
  }
  backend_name_ = options.backend;
  if (initial != TraceMode::Off) {
    backend_ = make_backend(backend_name_);
    backend_->install();  // throws ActivationError, e.g. no free tool id
  }
  thread_states::set_main_thread(options.main_thread_ident);
  uint64_t generation = config_store::publish(std::move(config));
  generation_.store(generation);
  ++disable_epoch_;
  active_ = true;
  failed_ = false;
  installed_events_ = 0;
  mode_.store(initial);
  set_payload(payload);

  std::string version = Py_GetVersion();
  identity_ = ProcessIdentity{options.mpi_rank, options.mpi_size, options.hostname, options.argv,
                              version.substr(0, version.find(' '))};
  emit_process_info();
  emitter::mode_change(trace_mode_name(initial), "activate", generation);
  if (initial == TraceMode::Tracing) push_activation_frames(*thread_states::current());
  reconcile_events();
  sync_alloc();
  control::start(config_path_);
}

std::string Tracer::cpython_refusal() {
#ifdef Py_GIL_DISABLED
  constexpr bool free_threaded = true;
#else
  constexpr bool free_threaded = false;
#endif
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

void Tracer::deactivate() {
  if (!active_) return;
  active_ = false;
  mode_.store(TraceMode::Off);
  sync_alloc();
  if (backend_) {
    try {
      backend_->set_events(0);
      backend_->uninstall();
    } catch (const std::exception &e) {
      std::fprintf(stderr, "pinsight-python: deactivate: %s\n", e.what());
    }
    backend_.reset();
  }
  installed_events_ = 0;
  // Frames still running keep their begins without ends; forget them so a
  // later activation starts clean.
  thread_states::clear_all_stacks();
  generators_.clear();
  forgotten_code_.open_records = 0;
  open_records_ = 0;
  for (CodeInfo *info = code_registry::first(); info; info = info->next) {
    info->open_records = 0;
    info->suspended_traced = 0;
  }
  legacy_qualname::clear();
}

Status Tracer::status() const {
  Status s;
  s.active = active_;
  s.refused = refused_;
  s.backend = backend_ ? backend_->name() : (active_ ? backend_name_ : "");
  s.mode = trace_mode_name(mode());
  s.payload = emitter::compact_payload ? "compact" : "full";
  s.lttng_available = emitter::provider_loaded();
  s.lttng_error = lttng_error_;
  s.tool_id = backend_ ? backend_->tool_id() : -1;
  if (requested_events_ & kEventFunction) s.events.push_back("function");
  if (requested_events_ & kEventCCall) s.events.push_back("c_call");
  if (imports_possible_.load()) s.events.push_back("import");
  if (alloc_wanted_.load()) s.events.push_back("alloc");
  s.alloc_sampling = alloc::active();
  s.alloc_native = alloc::native_hooked();
  s.alloc_samples = alloc::samples_taken();
  s.config_path = config_path_;
  s.config_generation = generation_.load();
  s.events_emitted = events_emitted_;
  s.code_objects_live = code_registry::live_count();
  s.code_objects_seen = code_registry::created_count();
  s.threads_seen = threads_seen_.load();
  s.reloads = reloads_.load();
  s.reload_errors = reload_errors_.load();
  return s;
}

std::vector<LexgionReport> Tracer::lexgions() const {
  std::vector<LexgionReport> out;
  for (CodeInfo *info = code_registry::first(); info; info = info->next) {
    if (info->executions == 0) continue;
    out.push_back({info->qualname, info->filename, info->module, info->lineno, info->executions,
                   info->traced});
  }
  return out;
}

void Tracer::after_fork_child() {
  // The child inherits the forking thread's shadow stack: those frames'
  // begins are in the parent's trace, so their ends (and the end of the
  // fork call itself) must not appear under the child's vpid.
  thread_states::forked_child();
  // The child's events carry its own vpid: its names must be written anew.
  emitter::advance_naming_epoch();
  if (active_) {
    emit_process_info();
    control::start(config_path_);
  }
}

void Tracer::emit_process_info() {
  char procname[17] = {};  // what LTTng's procname context reads: the thread's comm
  if (prctl(PR_GET_NAME, procname) != 0) procname[0] = '\0';
  emitter::process_info(static_cast<int>(getpid()), identity_.mpi_rank, identity_.mpi_size,
                        identity_.hostname, identity_.argv, identity_.python_version,
                        backend_ ? backend_->name() : "none", procname);
}

}  // namespace pinsight
