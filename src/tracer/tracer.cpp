#include "tracer/tracer.h"

#include <cstdio>
#include <string>

#include "config/config_store.h"
#include "tracer/imports.h"
#include "tracer/legacy_qualname.h"

namespace pinsight {

Tracer &Tracer::instance_ = *new Tracer();

namespace {

// Our package, its start-up shim (3.15's .start file), and the import finder of
// an editable install (scikit-build-core's, consulted on every import): the
// tracer's own code, never the program's.
bool is_own_module(const std::string &module) {
  for (const char *own :
       {"pinsight_python", "_pinsight_python_start", "_editable_skbc_pinsight_python"}) {
    size_t size = std::char_traits<char>::length(own);
    if (module.compare(0, size, own) == 0 && (module.size() == size || module[size] == '.')) {
      return true;
    }
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------
// Decisions (slow paths).

void Tracer::apply_decision(CodeInfo &code, const Config &config) {
  CodeDecision decision =
      config.decide_code(code.names.qualname(), code.names.filename(), code.module);
  code.limits = *decision.lexgion;
  code.traces_every = lexgion_traces_every(code.limits);
  code.lexgion = decision.lexgion;
  code.module_selected = decision.module_selected && !is_own_module(code.module);
  code.generation = config.generation;
}

void Tracer::decide_thread(CodeInfo &code, ThreadLexgion &lex, ThreadState &state) {
  const int python_thread_id = state.python_thread_id;
  const Config *config = config_store::read_lock();
  if (code.generation != config->generation) apply_decision(code, *config);
  const uint32_t events =
      code.module_selected ? config->events_for(*code.lexgion, python_thread_id) & requested_events_
                           : 0;
  lex.events = static_cast<uint16_t>(events);
  uint8_t flags = kTraced;
  if (events & kEventPyStart) flags |= kBeginEmitted;
  if ((events & kEventPyReturn) && (events & kEventPyStart)) flags |= kEmitEnd;
  if (events & kEventCCall) flags |= kTraceCCalls;
  lex.start_flags = flags;
  lex.generation = static_cast<uint32_t>(code.generation);
  config_store::read_unlock();
  count_window_gate(code, lex, state);
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
  std::vector<Backend::RearmedCode> codes;
  for (CodeInfo *info = code_registry::first(); info; info = info->next) {
    if (!info->disabled || (per_thread_only && !(info->disabled & kDisabledPerThread))) continue;
    codes.push_back({info->code, info->calls_watched});
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
  info.names.set("<forgotten>", "<none>");
  return info;
}();

void Tracer::forget_code(CodeInfo &code) {
  if (code.uncapped_gates) instance_.uncount_window_gates(code);
  if (!code.open_records && !code.suspended_traced) return;
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
      emitter::c_call(emitter::record_ticks(), false, *record.code, record.callee_name, record.line,
                      state.python_thread_id, wire::kCReturn);
    }
  }
}

void Tracer::generator_ended(const FrameRecord &record, const ThreadState &state, int transition) {
  int how = transition == wire::kReturn ? wire::kGeneratorReturned : wire::kGeneratorRaised;
  if (record.flags & kGeneratorEntry) {
    generators_.finish(record.frame, state.python_thread_id, how);
    return;
  }
  // Ended in its first segment, never suspended (or running since activate:
  // no start time, no lifetime).
  if (record.started_ns == 0 || !(record.flags & kBeginEmitted)) return;
  emitter::generator_end(*record.code, state.python_thread_id,
                         lifetime_clock_ns() - record.started_ns, 1, how);
}

// ---------------------------------------------------------------------------
// Modes and CPython's events.

void Tracer::reconcile_events() {
  if (!backend_ || reconciling_) return;
  reconciling_ = true;
  TraceMode current = mode();
  uint32_t calls = (requested_events_ & kEventCCall) ? uint32_t{kCPyCalls} : 0u;
  uint32_t wanted = 0;
  if (aside_) {
    wanted = 0;  // a debugger traces the program
  } else if (current >= TraceMode::Monitoring) {
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
    watch_calls(wanted & kCPyCalls);
    if (current == TraceMode::Off && wanted == 0 && backend_) {
      backend_->uninstall();
      backend_.reset();
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "pinsight-python: cannot switch CPython events: %s\n", e.what());
  }
  reconciling_ = false;
}

void Tracer::watch_calls(bool on) {
  if (!backend_ || !backend_->calls_per_code() || calls_watched_ == on) return;
  calls_watched_ = on;
  for (CodeInfo *info = code_registry::first(); info; info = info->next) {
    if (info->names_setprofile || info->calls_watched == on) continue;
    backend_->watch_calls(info->code, on);
    info->calls_watched = on;
  }
}

void Tracer::code_created(CodeInfo &code) {
  Tracer &tracer = instance_;
  code.blind_periods_at_creation = tracer.blind_periods_;
  if (!tracer.calls_watched_ || code.names_setprofile || !tracer.backend_) return;
  try {
    tracer.backend_->watch_calls(code.code, true);
    code.calls_watched = true;
  } catch (const std::exception &e) {
    tracer.internal_failure(e.what());
  }
}

void Tracer::set_mode(TraceMode new_mode, const char *reason) {
  TraceMode old = mode_.exchange(new_mode);
  if (old == new_mode) return;
  if (new_mode < TraceMode::Monitoring) ++blind_periods_;  // starts go uncounted from now
  emitter::mode_change(trace_mode_name(new_mode), reason, generation_.load());
  if (!active_) return;
  if (!backend_ && new_mode != TraceMode::Off) {
    try {
      backend_ = hooks_.make_backend();
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
  mode_changed();
  // Locations silenced under the old mode may be needed now.
  if (new_mode >= TraceMode::Monitoring) rearm(/*per_thread_only=*/false);
}

void Tracer::config_published(uint64_t generation, TraceMode target, const char *reason) {
  generation_.store(generation);
  if (target == mode()) {
    emitter::mode_change(trace_mode_name(target), reason, generation);
    // Decisions may change: re-enable the locations we silenced.
    if (target >= TraceMode::Monitoring) rearm(/*per_thread_only=*/false);
  } else {
    set_mode(target, reason);
  }
}

void Tracer::set_extra_events(bool imports_requested, bool imports_possible, bool shadow_all) {
  imports_requested_ = imports_requested;
  imports_possible_ = imports_possible;
  shadow_all_ = shadow_all;
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
  ++blind_periods_;
  open_records_ = 0;
  reconcile_events();
  mode_changed();
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
    const ThreadLexgion &lex = lexgion_of(*info, state);
    uint8_t flags =
        (lex.events & kEventCCall) && info->limits.max_num_traces != 0 ? kTraceCCalls : 0;
    state.stack.push_back(
        {compat::frame_key(*it), info, nullptr, nullptr, 0, RecordKind::Function, flags});
    ++info->open_records;
    ++open_records_;
  }
  for (PyFrameObject *f : frames) Py_DECREF(f);
}

void Tracer::prepare() {
  if (!code_registry::init())
    throw ActivationError("no code-object extra slot or code watcher is available");
  code_registry::set_forget_hook(&Tracer::forget_code);
  code_registry::set_created_hook(&Tracer::code_created);
  std::string generators_error;
  if (!GeneratorTable::init(&generators_error)) {
    throw ActivationError("cannot follow generators on this CPython: " + generators_error);
  }
}

void Tracer::start(std::unique_ptr<Backend> backend, TraceMode initial, uint64_t generation,
                   uint32_t requested_events) {
  backend_ = std::move(backend);
  requested_events_ = requested_events;
  generation_.store(generation);
  ++disable_epoch_;
  active_ = true;
  failed_ = false;
  installed_events_ = 0;
  mode_.store(initial);
  if (initial < TraceMode::Monitoring) ++blind_periods_;
  if (initial == TraceMode::Tracing) push_activation_frames(*thread_states::current());
  reconcile_events();
}

void Tracer::stop() {
  if (!active_) return;
  active_ = false;
  mode_.store(TraceMode::Off);
  emitter::flush_blocks(/*last=*/true);  // the batched payload's pending records
  mode_changed();
  if (backend_) {
    try {
      watch_calls(false);
      backend_->set_events(0);
      backend_->uninstall();
    } catch (const std::exception &e) {
      std::fprintf(stderr, "pinsight-python: deactivate: %s\n", e.what());
    }
    backend_.reset();
  }
  installed_events_ = 0;
  aside_ = false;
  introspecting_ = false;  // a pending introspection finds tracing stopped and does nothing
  forget_records();
  legacy_qualname::clear();
}

void Tracer::step_aside() {
  if (!active_ || aside_) return;
  aside_ = true;
  ++blind_periods_;
  reconcile_events();  // all off: aside_
  forget_records();
  mode_changed();
}

void Tracer::step_back() {
  if (!active_ || !aside_) return;
  aside_ = false;
  if (mode() == TraceMode::Tracing) push_activation_frames(*thread_states::current());
  reconcile_events();
  // Locations silenced before may be needed by the frames running now.
  if (mode() >= TraceMode::Monitoring) rearm(/*per_thread_only=*/false);
  mode_changed();
}

void Tracer::forget_records() {
  // Frames still running keep their begins without ends; forget them so that
  // tracing starts clean later.
  thread_states::clear_all_stacks();
  generators_.clear();
  forgotten_code_.open_records = 0;
  open_records_ = 0;
  for (CodeInfo *info = code_registry::first(); info; info = info->next) {
    info->open_records = 0;
    info->suspended_traced = 0;
  }
}

std::vector<LexgionReport> Tracer::lexgions() const {
  std::vector<LexgionReport> out;
  for (CodeInfo *info = code_registry::first(); info; info = info->next) {
    if (info->executions() == 0) continue;
    LexgionReport &r = out.emplace_back();
    r.qualname = info->names.qualname();
    r.filename = info->names.filename();
    r.module = info->module;
    r.lineno = info->lineno;
    r.executions = info->executions();
    r.traced = info->traced();
    const LexgionSettings &limits = info->limits;
    // Code the module filters leave out is not rate control's doing.
    r.rate_controlled = info->module_selected && !lexgion_traces_every(limits);
    r.lower_bound = info->begins_were_disabled ||
                    blind_periods_ > info->blind_periods_at_creation ||
                    mode() < TraceMode::Monitoring;
    r.max_num_traces = limits.max_num_traces;
    r.tracing_rate = limits.tracing_rate;
    r.trace_starts_at = limits.trace_starts_at;
    r.section = limits.section;
    r.code = info;
  }
  return out;
}

void Tracer::after_fork_child() {
  // The child inherits the forking thread's shadow stack: those frames'
  // begins are in the parent's trace, so their ends (and the end of the
  // fork call itself) must not appear under the child's vpid.
  thread_states::forked_child();
  // The parent's control thread, which would have ended an introspection, is not here.
  introspecting_ = false;
  // The child's events carry its own vpid: its names must be written anew.
  emitter::advance_naming_epoch();
  // Its lexgion_counts describe its own calls (the parent's are in the
  // parent's): counted from zero. Rate control's counters are inherited, as in
  // PInsight, and so are disabled begins: those counts stay lower bounds.
  for (CodeInfo *info = code_registry::first(); info; info = info->next) info->reset_counts();
}

}  // namespace pinsight
