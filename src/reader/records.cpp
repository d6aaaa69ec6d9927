#include "records.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace pinsight_reader {
namespace {

// Text from the trace: garbled bytes of a damaged one are not UTF-8, and
// become U+FFFD rather than an error.
py::str text(std::string_view s) {
  PyObject *out = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (out == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(out);
}

template <typename T>
py::object to_object(T &&value) {
  using V = std::decay_t<T>;
  if constexpr (std::is_base_of_v<py::object, V>) {
    return std::forward<T>(value);
  } else if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, std::string_view>) {
    return text(value);
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    py::list out;
    for (const std::string &s : value) out.append(text(s));
    return out;
  } else {
    return py::cast(std::forward<T>(value));
  }
}

// One PyStructSequence type. Its fields are named here and in the .pyi, in
// the same order; make() takes the values in that order and checks their count.
// No field is named after a tuple method (count, index): it would hide it.
class RecordType {
 public:
  RecordType(py::module_ &module, const char *name, const char *doc,
             std::vector<const char *> fields)
      : qualified_("pinsight_python._pinsight_reader." + std::string(name)) {
    // The type keeps pointers to the names (string literals) and copies the rest.
    for (const char *field : fields) fields_.push_back({field, nullptr});
    fields_.push_back({nullptr, nullptr});
    PyStructSequence_Desc desc{qualified_.c_str(), doc, fields_.data(),
                               static_cast<int>(fields.size())};
    type_ = PyStructSequence_NewType(&desc);
    if (type_ == nullptr) throw py::error_already_set();
    // The module's attribute keeps the type alive for the life of the process.
    module.attr(name) = py::reinterpret_steal<py::object>(reinterpret_cast<PyObject *>(type_));
  }

  template <typename... Values>
  py::object make(Values &&...values) const {
    if (sizeof...(Values) + 1 != fields_.size()) {
      throw std::logic_error(qualified_ + ": wrong number of fields");
    }
    auto record = py::reinterpret_steal<py::object>(PyStructSequence_New(type_));
    if (!record) throw py::error_already_set();
    Py_ssize_t i = 0;
    // SetItem steals the reference release() hands over.
    (PyStructSequence_SetItem(record.ptr(), i++,
                              to_object(std::forward<Values>(values)).release().ptr()),
     ...);
    return record;
  }

 private:
  std::string qualified_;
  std::vector<PyStructSequence_Field> fields_;
  PyTypeObject *type_ = nullptr;
};

struct RecordTypes {
  explicit RecordTypes(py::module_ &m)
      : function(m, "FunctionStats", "Per function of a thread (Python or native callee).",
                 {"symbol", "calls", "segments", "total_ns", "self_ns", "exceptions", "finished",
                  "wall_ns"}),
        native_call(m, "NativeCallStats", "Per caller -> native callee pair of a thread.",
                    {"caller", "callee", "calls", "total_ns", "raised"}),
        anomalies(m, "Anomalies", "Input of a thread the stacks could not explain.",
                  {"ends_without_begin", "implicitly_closed", "open_at_end", "stepped_aside",
                   "cut_by_damage"}),
        import_stats(m, "ImportStats", "Per imported module of a thread.",
                     {"symbol", "loads", "cumulative_ns", "self_ns", "raised"}),
        import_chain(m, "ImportChain",
                     "An outermost import followed down its slowest nested imports.",
                     {"ns", "modules", "raised"}),
        alloc_node(m, "AllocNode", "Sampled bytes allocated at a call-tree node.",
                   {"node", "bytes"}),
        gil_release(m, "GilRelease", "GIL releases under one native callee (-1: none).",
                    {"callee", "releases", "released_ns", "wait_ns"}),
        gil_wait(m, "GilWait", "GIL waits while a function was the innermost Python frame.",
                 {"symbol", "gil_wait_ns"}),
        gil(m, "GilStats", "events = gil: a thread's time with respect to the GIL.",
            {"switch_wait_ns", "take_back_wait_ns", "released_ns", "switches", "releases",
             "releases_by_callee", "function_waits"}),
        tree_node(m, "CallTreeNode", "A call path of a thread (node 0: the thread itself).",
                  {"parent", "symbol", "self_ns", "calls"}),
        recent(m, "RecentEvent",
               "One of a thread's last frame events: kind is 'call', 'resume', 'return', "
               "'yield', 'unwind', 'native_call', 'native_return' or 'native_raise'.",
               {"ts_ns", "kind", "symbol"}),
        thread(m, "ThreadRecord", "One thread of the program and its aggregates.",
               {"vtid", "label", "python_thread_id", "thread_ident", "events", "first_ns",
                "last_ns", "functions", "native_calls", "anomalies", "imports", "import_chains",
                "alloc_tree", "gil", "call_tree", "task_tree", "lower_bound", "recent"}),
        open_frame(m, "OpenFrame",
                   "A frame open when a flight recorder's dump was taken: a Python function "
                   "(caller -1, line its first) or a native call (symbol the callee, caller "
                   "its Python caller, line the call's); begin_ns 0 when not known.",
                   {"depth", "symbol", "caller", "line", "begin_ns"}),
        open_region(m, "OpenRegion",
                    "A native region (PInsight's OpenMP, MPI, CUDA) open at a dump's end.",
                    {"label", "begin_ns"}),
        dump_stack(m, "DumpStack",
                   "One thread's open frames at a dump, outermost first, and the native "
                   "regions open under them.",
                   {"vtid", "python_thread_id", "frames", "regions"}),
        dump(m, "DumpRecord",
             "A process's part of a flight recorder's dump: its open stacks, and status "
             "(PINSIGHT_DUMP_* bits) what it could not write.",
             {"dump_id", "ts_ns", "reason", "status", "threads", "frames", "stacks"}),
        alloc(m, "AllocStats", "Sampled allocations of a process, per allocating function.",
              {"symbol", "samples", "sampled_bytes", "retained_bytes", "native_bytes"}),
        mode_change(m, "ModeChange", "A change of the Python domain's trace mode.",
                    {"ts_ns", "mode", "reason", "generation"}),
        config(m, "ConfigRecord", "A configuration put in force (path '' for the defaults).",
               {"ts_ns", "path", "generation"}),
        lexgion_counts(m, "LexgionCounts", "Rate control's counts of one function.",
                       {"symbol", "seen", "traced", "seen_is_lower_bound", "max_num_traces",
                        "tracing_rate", "trace_starts_at", "section"}),
        task_function(m, "TaskFunction",
                      "Self time of a function in a task's steps, or in its offloaded work.",
                      {"symbol", "self_ns", "offloaded"}),
        task(m, "TaskRecord", "One asyncio task of a process (task_events.h).",
             {"serial", "task_id", "name", "vtid", "created_ns", "first_step_ns", "done_ns",
              "outcome", "steps", "running_ns", "waiting_ns", "offloaded_ns", "offloads", "creator",
              "created_at", "awaited_by", "functions"}),
        task_group(m, "TaskGroupRecord",
                   "Done tasks past the kept ones, by name without its number and loop thread.",
                   {"name", "vtid", "tasks", "steps", "running_ns", "waiting_ns", "offloaded_ns",
                    "returned", "raised", "cancelled"}),
        process(m, "ProcessRecord", "One traced process and its threads.",
                {"vpid",         "host",    "chrome_pid",      "label",
                 "has_info",     "pid",     "mpi_rank",        "mpi_size",
                 "hostname",     "argv",    "python_version",  "backend",
                 "procname",     "events",  "allocations",     "threads",
                 "mode_changes", "configs", "rate_controlled", "tasks",
                 "task_groups",  "dump"}),
        discard(m, "Discard", "One record of events or packets LTTng discarded.",
                {"discarded", "begin_ns", "end_ns", "stream_id", "packets"}),
        missing(m, "MissingEvents", "Records of the batched payload that never came.",
                {"host", "vpid", "vtid", "python_thread_id", "after_ns", "missing"}),
        damage(m, "DamagedPart", "Part of a trace file the reader had to skip (damage).",
               {"file", "kind", "detail", "begin_ns", "end_ns", "packets", "offset", "bytes",
                "events_read", "events_lost", "host", "vpid"}),
        symbol(m, "SymbolInfo", "A Python function or native callee, by symbol id.",
               {"native", "qualname", "filename", "lineno", "module", "origin"}),
        native_region(m, "NativeRegion", "Native regions of one caller, domain and name.",
                      {"vpid", "mpi_rank", "caller", "via", "attributed", "domain", "region",
                       "instances", "total_ns", "mangled"}),
        unmatched(m, "UnmatchedRegion", "Native region begins that never ended.",
                  {"vpid", "mpi_rank", "domain", "region", "begins"}),
        progress(m, "Progress", "How far run() got.", {"events", "ts_ns", "begin_ns", "end_ns"}),
        result(m, "TraceResult", "The aggregates of one read.",
               {"events",
                "other_events",
                "chrome_events",
                "perfetto_packets",
                "first_ns",
                "last_ns",
                "discarded_events",
                "discarded_packets",
                "discard_records",
                "discards",
                "blocks",
                "late_records",
                "missing_events",
                "symbols",
                "processes",
                "native",
                "native_unmatched",
                "native_labels",
                "native_ends_without_begin",
                "event_counts",
                "control_threads",
                "decode_threads",
                "decode_cpu_s",
                "decode_thread_cpu_s",
                "analysis_cpu_s",
                "damaged"}) {}

  RecordType function, native_call, anomalies, import_stats, import_chain, alloc_node, gil_release,
      gil_wait, gil, tree_node, recent, thread, open_frame, open_region, dump_stack, dump, alloc,
      mode_change, config, lexgion_counts, task_function, task, task_group, process, discard,
      missing, damage, symbol, native_region, unmatched, progress, result;
};

// Created at import and never freed: the module, hence its types, lives as long.
const RecordTypes *types = nullptr;

int64_t symbol_or_minus_one(SymbolId symbol) {
  return symbol == kNoSymbol ? -1 : static_cast<int64_t>(symbol);
}

py::object gil_record(const ThreadState &t) {
  if (!t.gil.seen) return py::none();
  py::list releases;
  for (const auto &[symbol, r] : t.gil_releases) {
    releases.append(
        types->gil_release.make(symbol_or_minus_one(symbol), r.count, r.released_ns, r.wait_ns));
  }
  py::list waits;
  for (const auto &[symbol, s] : t.functions) {
    if (s.gil_wait_ns) waits.append(types->gil_wait.make(symbol, s.gil_wait_ns));
  }
  const GilStats &g = t.gil;
  return types->gil.make(g.switch_wait_ns, g.take_back_wait_ns, g.released_ns, g.switches,
                         g.releases, std::move(releases), std::move(waits));
}

const char *recent_kind(const RecentEvent &e) {
  switch (e.kind) {
    case EventKind::FunctionBegin:
      return e.transition == kStart ? "call" : "resume";
    case EventKind::FunctionEnd:
      return e.transition == kYield ? "yield" : e.transition == kUnwind ? "unwind" : "return";
    case EventKind::CCallBegin:
      return "native_call";
    default:
      return e.transition == kCRaise ? "native_raise" : "native_return";
  }
}

py::list recent_records(const RecentEvents &recent) {
  py::list out;
  const uint64_t n = std::min<uint64_t>(recent.count, RecentEvents::kRecentEvents);
  for (uint64_t i = recent.count - n; i < recent.count; ++i) {
    const RecentEvent &e = recent.ring[i % RecentEvents::kRecentEvents];
    out.append(types->recent.make(e.ts_ns, recent_kind(e), symbol_or_minus_one(e.symbol)));
  }
  return out;
}

py::object dump_record(const DumpState &d) {
  if (!d.seen) return py::none();
  py::list stacks;
  for (const DumpStack &stack : d.stacks) {
    py::list frames;
    for (const DumpFrame &f : stack.frames) {
      frames.append(types->open_frame.make(f.depth, symbol_or_minus_one(f.symbol),
                                           symbol_or_minus_one(f.caller), f.line, f.begin_ns));
    }
    py::list regions;
    for (const DumpRegion &r : stack.regions) {
      regions.append(types->open_region.make(r.label, r.begin_ns));
    }
    stacks.append(types->dump_stack.make(stack.vtid, stack.python_thread_id, std::move(frames),
                                         std::move(regions)));
  }
  return types->dump.make(d.id, d.ts_ns, d.reason, d.status, d.threads, d.frames,
                          std::move(stacks));
}

py::object thread_record(const ThreadState &t, bool with_tree) {
  py::list functions;
  for (const auto &[symbol, s] : t.functions) {
    functions.append(types->function.make(symbol, s.calls, s.segments, s.total_ns, s.self_ns,
                                          s.exceptions, s.finished, s.wall_ns));
  }
  py::list native_calls;
  for (const auto &[key, c] : t.native_calls) {
    native_calls.append(types->native_call.make(static_cast<SymbolId>(key >> 32),
                                                static_cast<SymbolId>(key & 0xffffffffu), c.calls,
                                                c.total_ns, c.raised));
  }
  const Anomalies &a = t.anomalies;
  py::object anomalies = types->anomalies.make(a.ends_without_begin, a.implicitly_closed,
                                               a.open_at_end, a.stepped_aside, a.cut_by_damage);
  py::list imports;
  for (const auto &[symbol, s] : t.import_stats) {
    imports.append(types->import_stats.make(symbol, s.loads, s.cumulative_ns, s.self_ns, s.raised));
  }
  py::list chains;
  for (const ImportChain &c : t.import_chains)
    chains.append(types->import_chain.make(c.ns, c.modules, c.raised));
  py::list alloc_nodes;
  py::object tree = py::none();
  py::object task_tree = py::none();
  // Node 0 is the thread itself; parents precede their children.
  auto nodes_of = [](const CallTree &from) {
    py::list nodes;
    for (const CallTreeNode &n : from.nodes()) {
      nodes.append(
          types->tree_node.make(n.parent, symbol_or_minus_one(n.symbol), n.self_ns, n.calls));
    }
    return nodes;
  };
  if (with_tree) {
    for (const auto &[node, bytes] : t.alloc_nodes)
      alloc_nodes.append(types->alloc_node.make(node, bytes));
    tree = nodes_of(t.tree);
    if (t.task_tree_started) task_tree = nodes_of(t.task_tree);
  }
  return types->thread.make(t.vtid, t.label, t.python_thread_id, t.thread_ident, t.events,
                            t.first_ns, t.last_ns, std::move(functions), std::move(native_calls),
                            std::move(anomalies), std::move(imports), std::move(chains),
                            std::move(alloc_nodes), gil_record(t), std::move(tree),
                            std::move(task_tree), t.lower_bound, recent_records(t.recent));
}

py::object process_record(const CallStackAnalyzer &a, const ProcessState &p) {
  py::list allocations;
  for (const auto &[symbol, s] : p.allocations) {
    allocations.append(
        types->alloc.make(symbol, s.samples, s.sampled_bytes, s.retained_bytes, s.native_bytes));
  }
  py::list threads;
  for (const ThreadState *t : a.threads_of(p))
    threads.append(thread_record(*t, a.build_call_trees()));
  py::list mode_changes;
  for (const ModeChangeRecord &m : p.mode_changes)
    mode_changes.append(types->mode_change.make(m.ts_ns, m.mode, m.reason, m.generation));
  py::list configs;
  for (const ConfigRecord &c : p.configs)
    configs.append(types->config.make(c.ts_ns, c.path, c.generation));
  py::list rate_controlled;
  for (const auto &[symbol, r] : p.lexgion_counts) {
    rate_controlled.append(types->lexgion_counts.make(symbol, r.executions, r.traced, r.lower_bound,
                                                      r.max_num_traces, r.tracing_rate,
                                                      r.trace_starts_at, r.section));
  }
  py::list tasks;
  for (const auto &t : p.tasks.kept()) {
    py::list functions;
    for (const auto &[symbol, ns, offloaded] : task_top_functions(*t))
      functions.append(types->task_function.make(symbol, ns, offloaded));
    tasks.append(types->task.make(t->serial, t->task_id, t->name, t->vtid, t->created_ns,
                                  t->first_step_ns, t->done_ns, task_outcome_name(t->outcome),
                                  t->steps, t->running_ns, task_waiting_ns(*t, p.tasks.last_ns()),
                                  t->offloaded_ns, t->offloads, t->creator,
                                  symbol_or_minus_one(t->created_at),
                                  py::tuple(py::cast(t->awaited_by)), std::move(functions)));
  }
  py::list task_groups;
  for (const auto &[key, g] : p.tasks.groups()) {
    task_groups.append(types->task_group.make(g.name, g.vtid, g.tasks, g.steps, g.running_ns,
                                              g.waiting_ns, g.offloaded_ns, g.outcomes[0],
                                              g.outcomes[1], g.outcomes[2]));
  }
  return types->process.make(
      p.vpid, p.host_name, p.chrome_pid, p.label, p.has_info, p.pid, p.mpi_rank, p.mpi_size,
      p.hostname, p.argv, p.python_version, p.backend, p.procname, p.events, std::move(allocations),
      std::move(threads), std::move(mode_changes), std::move(configs), std::move(rate_controlled),
      std::move(tasks), std::move(task_groups), dump_record(p.dump));
}

// Native regions per (caller, domain, region) of each process, the begins that
// never ended, and each domain's label.
struct NativeRecords {
  py::list regions, unmatched;
  py::dict labels;
  uint64_t ends_without_begin = 0;
};

NativeRecords native_records(const CallStackAnalyzer &a) {
  NativeRecords out;
  for (const auto &[key, p] : a.native()) {
    const ProcessState *process = a.find_process(key);
    auto vpid = static_cast<int32_t>(key & 0xffffffffu);
    int32_t rank = process ? process->mpi_rank : -1;
    for (const auto &[k, s] : p.regions) {
      const auto &[by, provider, region] = k;
      auto mangled = p.mangled.find(region);
      out.regions.append(types->native_region.make(
          vpid, rank, symbol_or_minus_one(by.caller), symbol_or_minus_one(by.via),
          attributed_name(by.how), p.domain(provider), p.names[region], s.count, s.total_ns,
          mangled == p.mangled.end() ? py::object(py::none()) : py::object(text(mangled->second))));
      out.labels[text(p.domain(provider))] = text(p.domain_label(provider));
    }
    for (const auto &[k, count] : p.unmatched) {
      out.unmatched.append(
          types->unmatched.make(vpid, rank, p.domain(k.first), p.names[k.second], count));
      out.labels[text(p.domain(k.first))] = text(p.domain_label(k.first));
    }
    out.ends_without_begin += p.ends_without_begin;
  }
  return out;
}

py::dict event_counts(const CallStackAnalyzer &a) {
  py::dict kinds;
  const std::pair<const char *, EventKind> kind_names[] = {
      {"function_begin", EventKind::FunctionBegin}, {"function_end", EventKind::FunctionEnd},
      {"c_call_begin", EventKind::CCallBegin},      {"c_call_end", EventKind::CCallEnd},
      {"process_info", EventKind::ProcessInfo},     {"thread_start", EventKind::ThreadStart},
      {"mode_change", EventKind::ModeChange},       {"import_begin", EventKind::ImportBegin},
      {"import_end", EventKind::ImportEnd},         {"alloc_sample", EventKind::AllocSample},
      {"free_sample", EventKind::FreeSample},       {"native_begin", EventKind::NativeBegin},
      {"gil_switch", EventKind::GilSwitch},         {"gil_released", EventKind::GilReleased},
      {"native_end", EventKind::NativeEnd},         {"generator_end", EventKind::GeneratorEnd},
      {"config_info", EventKind::ConfigInfo},       {"lexgion_counts", EventKind::LexgionCounts},
      {"task_create", EventKind::TaskCreate},       {"task_name", EventKind::TaskName},
      {"task_step", EventKind::TaskStep},           {"task_await", EventKind::TaskAwait},
      {"task_done", EventKind::TaskDone},           {"task_handoff", EventKind::TaskHandoff},
      {"open_frame", EventKind::OpenFrame},         {"dump_marker", EventKind::DumpMarker}};
  for (const auto &[name, kind] : kind_names) kinds[name] = a.events_of(kind);
  return kinds;
}

}  // namespace

void add_record_types(py::module_ &module) {
  if (types == nullptr) types = new RecordTypes(module);
}

py::list damage_records(const std::vector<Damage> &damages) {
  py::list out;
  for (const Damage &d : damages) {
    out.append(types->damage.make(d.file, damage_kind_name(d.kind), d.detail, d.begin_ns, d.end_ns,
                                  d.packets, d.offset, d.bytes, d.events_read, d.events_lost,
                                  d.host, d.vpid));
  }
  return out;
}

py::object progress_record(const Progress &p) {
  return types->progress.make(p.events, p.ts_ns, p.begin_ns, p.end_ns);
}

py::object result_record(const Analysis &analysis) {
  if (!analysis.completed()) throw ReaderError("the trace has not been read: call run() first");
  const CallStackAnalyzer &a = analysis.analyzer();
  py::list discards;
  for (const DiscardRecord &r : a.discards())
    discards.append(types->discard.make(r.count, r.begin_ns, r.end_ns, r.stream_id, r.packets));
  const BlockMerger &blocks = analysis.blocks();
  py::list missing;
  for (const MissingRecords &m : blocks.missing()) {
    missing.append(types->missing.make(analysis.hosts().name(m.host), m.vpid, m.vtid,
                                       m.python_thread_id, m.after_ns, m.count));
  }
  py::list symbols;
  const SymbolTable &table = a.symbols();
  for (SymbolId i = 0; i < table.size(); ++i) {
    const Symbol &s = table[i];
    symbols.append(types->symbol.make(s.native, s.qualname, s.filename, s.lineno, s.module,
                                      origin_name(s.origin)));
  }
  py::list processes;
  for (const ProcessState *p : a.processes()) processes.append(process_record(a, *p));
  NativeRecords native = native_records(a);
  return types->result.make(
      a.events(), analysis.foreign_events(), analysis.chrome_events(), analysis.perfetto_packets(),
      a.first_ns(), a.last_ns(), a.discarded_events(), a.discarded_packets(), a.discard_records(),
      std::move(discards), blocks.blocks(), blocks.late_records(), std::move(missing),
      std::move(symbols), std::move(processes), std::move(native.regions),
      std::move(native.unmatched), std::move(native.labels), native.ends_without_begin,
      event_counts(a), a.control_threads(), analysis.decode_threads(),
      analysis.decode_cpu_seconds(), analysis.decode_thread_cpu_seconds(),
      analysis.analysis_cpu_seconds(), damage_records(analysis.damages()));
}

}  // namespace pinsight_reader
