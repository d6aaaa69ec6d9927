// pinsight_python._pinsight_reader: reads pinsight-python LTTng traces with
// babeltrace2 and returns per-thread aggregates to Python, which only formats
// them (report, flamegraph); the Chrome trace export is written here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "analysis.h"

namespace py = pybind11;
using namespace pinsight_reader;

namespace {

py::dict thread_dict(const ThreadState &t, bool with_tree) {
  py::dict d;
  d["vtid"] = t.vtid;
  d["label"] = t.label;
  d["python_thread_id"] = t.python_thread_id;
  d["thread_ident"] = t.thread_ident;
  d["events"] = t.events;
  d["first_ns"] = t.first_ns;
  d["last_ns"] = t.last_ns;
  py::list functions;
  for (const auto &[symbol, s] : t.functions) {
    functions.append(py::make_tuple(symbol, s.calls, s.segments, s.total_ns, s.self_ns,
                                    s.exceptions, s.finished, s.wall_ns));
  }
  d["functions"] = functions;
  py::list native_calls;
  for (const auto &[key, c] : t.native_calls) {
    native_calls.append(py::make_tuple(static_cast<SymbolId>(key >> 32),
                                       static_cast<SymbolId>(key & 0xffffffffu), c.calls,
                                       c.total_ns, c.raised));
  }
  d["native_calls"] = native_calls;
  py::dict anomalies;
  anomalies["ends_without_begin"] = t.anomalies.ends_without_begin;
  anomalies["implicitly_closed"] = t.anomalies.implicitly_closed;
  anomalies["open_at_end"] = t.anomalies.open_at_end;
  anomalies["stepped_aside"] = t.anomalies.stepped_aside;
  d["anomalies"] = anomalies;
  py::list imports;
  for (const auto &[symbol, s] : t.import_stats) {
    imports.append(py::make_tuple(symbol, s.loads, s.cumulative_ns, s.self_ns, s.raised));
  }
  d["imports"] = imports;
  py::list chains;
  for (const ImportChain &c : t.import_chains)
    chains.append(py::make_tuple(c.ns, c.modules, c.raised));
  d["import_chains"] = chains;
  py::list alloc_nodes;
  if (with_tree) {
    for (const auto &[node, bytes] : t.alloc_nodes) alloc_nodes.append(py::make_tuple(node, bytes));
  }
  d["alloc_tree"] = alloc_nodes;
  if (t.gil.seen) {
    py::dict gil;
    gil["switch_wait_ns"] = t.gil.switch_wait_ns;
    gil["take_back_wait_ns"] = t.gil.take_back_wait_ns;
    gil["released_ns"] = t.gil.released_ns;
    gil["switches"] = t.gil.switches;
    gil["releases"] = t.gil.releases;
    py::list releases;  // (callee symbol or -1, count, released_ns, wait_ns)
    for (const auto &[symbol, r] : t.gil_releases) {
      releases.append(py::make_tuple(symbol == kNoSymbol ? -1 : static_cast<int64_t>(symbol),
                                     r.count, r.released_ns, r.wait_ns));
    }
    gil["releases_by_callee"] = releases;
    py::list waits;  // (function symbol, gil_wait_ns)
    for (const auto &[symbol, s] : t.functions) {
      if (s.gil_wait_ns) waits.append(py::make_tuple(symbol, s.gil_wait_ns));
    }
    gil["function_waits"] = waits;
    d["gil"] = gil;
  } else {
    d["gil"] = py::none();
  }
  if (with_tree) {
    // Node 0 is the thread itself; parents precede their children.
    py::list nodes;
    for (const CallTreeNode &n : t.tree.nodes()) {
      nodes.append(py::make_tuple(n.parent,
                                  n.symbol == kNoSymbol ? -1 : static_cast<int64_t>(n.symbol),
                                  n.self_ns, n.calls));
    }
    d["call_tree"] = nodes;
  } else {
    d["call_tree"] = py::none();
  }
  return d;
}

py::dict result_dict(const Analysis &analysis) {
  if (!analysis.completed()) throw ReaderError("the trace has not been read: call run() first");
  const CallStackAnalyzer &a = analysis.analyzer();
  py::dict d;
  d["events"] = a.events();
  d["other_events"] = analysis.foreign_events();
  d["chrome_events"] = analysis.chrome_events();
  d["first_ns"] = a.first_ns();
  d["last_ns"] = a.last_ns();
  d["discarded_events"] = a.discarded_events();
  d["discarded_packets"] = a.discarded_packets();
  d["discard_records"] = a.discard_records();
  py::list discards;
  for (const DiscardRecord &r : a.discards()) {
    py::dict rd;
    rd["count"] = r.count;
    rd["begin_ns"] = r.begin_ns;
    rd["end_ns"] = r.end_ns;
    rd["stream_id"] = r.stream_id;
    rd["packets"] = r.packets;
    discards.append(rd);
  }
  d["discards"] = discards;
  const BlockMerger &blocks = analysis.blocks();
  d["blocks"] = blocks.blocks();
  d["late_records"] = blocks.late_records();
  py::list missing;
  for (const MissingRecords &m : blocks.missing()) {
    py::dict md;
    md["host"] = analysis.hosts().name(m.host);
    md["vpid"] = m.vpid;
    md["vtid"] = m.vtid;
    md["python_thread_id"] = m.python_thread_id;
    md["after_ns"] = m.after_ns;
    md["count"] = m.count;
    missing.append(md);
  }
  d["missing_events"] = missing;
  py::list symbols;
  const SymbolTable &table = a.symbols();
  for (SymbolId i = 0; i < table.size(); ++i) {
    const Symbol &s = table[i];
    symbols.append(py::make_tuple(s.native, s.qualname, s.filename, s.lineno, s.module,
                                  origin_name(s.origin)));
  }
  d["symbols"] = symbols;
  py::list processes;
  for (const ProcessState *p : a.processes()) {
    py::dict pd;
    pd["vpid"] = p->vpid;
    pd["host"] = p->host_name;
    pd["chrome_pid"] = p->chrome_pid;
    pd["label"] = p->label;
    pd["has_info"] = p->has_info;
    pd["pid"] = p->pid;
    pd["mpi_rank"] = p->mpi_rank;
    pd["mpi_size"] = p->mpi_size;
    pd["hostname"] = p->hostname;
    pd["argv"] = p->argv;
    pd["python_version"] = p->python_version;
    pd["backend"] = p->backend;
    pd["procname"] = p->procname;
    pd["events"] = p->events;
    py::list allocations;
    for (const auto &[symbol, s] : p->allocations) {
      allocations.append(
          py::make_tuple(symbol, s.samples, s.sampled_bytes, s.retained_bytes, s.native_bytes));
    }
    pd["allocations"] = allocations;
    py::list threads;
    for (const ThreadState *t : a.threads_of(*p))
      threads.append(thread_dict(*t, a.build_call_trees()));
    pd["threads"] = threads;
    processes.append(pd);
  }
  d["processes"] = processes;
  // Native regions: (vpid, mpi_rank, caller symbol or -1, domain, region, count, total_ns);
  // unmatched begins: (vpid, mpi_rank, domain, region, count); domain -> its label.
  py::list native, unmatched;
  py::dict labels;
  uint64_t ends_without_begin = 0;
  for (const auto &[key, p] : a.native()) {
    const ProcessState *process = a.find_process(key);
    int32_t vpid = static_cast<int32_t>(key & 0xffffffffu);
    int32_t rank = process ? process->mpi_rank : -1;
    for (const auto &[k, s] : p.regions) {
      const auto &[caller, provider, region] = k;
      native.append(py::make_tuple(vpid, rank,
                                   caller == kNoCaller ? -1 : static_cast<int64_t>(caller),
                                   p.domain(provider), p.names[region], s.count, s.total_ns));
      labels[py::str(p.domain(provider))] = p.domain_label(provider);
    }
    for (const auto &[k, count] : p.unmatched) {
      unmatched.append(py::make_tuple(vpid, rank, p.domain(k.first), p.names[k.second], count));
      labels[py::str(p.domain(k.first))] = p.domain_label(k.first);
    }
    ends_without_begin += p.ends_without_begin;
  }
  d["native"] = native;
  d["native_unmatched"] = unmatched;
  d["native_labels"] = labels;
  d["native_ends_without_begin"] = ends_without_begin;
  py::dict kinds;
  const std::pair<const char *, EventKind> kind_names[] = {
      {"function_begin", EventKind::FunctionBegin}, {"function_end", EventKind::FunctionEnd},
      {"c_call_begin", EventKind::CCallBegin},      {"c_call_end", EventKind::CCallEnd},
      {"process_info", EventKind::ProcessInfo},     {"thread_start", EventKind::ThreadStart},
      {"mode_change", EventKind::ModeChange},       {"import_begin", EventKind::ImportBegin},
      {"import_end", EventKind::ImportEnd},         {"alloc_sample", EventKind::AllocSample},
      {"free_sample", EventKind::FreeSample},       {"native_begin", EventKind::NativeBegin},
      {"gil_switch", EventKind::GilSwitch},         {"gil_released", EventKind::GilReleased},
      {"native_end", EventKind::NativeEnd},         {"generator_end", EventKind::GeneratorEnd}};
  for (const auto &[name, kind] : kind_names) kinds[name] = a.events_of(kind);
  d["event_counts"] = kinds;
  d["control_threads"] = a.control_threads();
  d["decode_threads"] = analysis.decode_threads();
  d["decode_cpu_s"] = analysis.decode_cpu_seconds();
  d["decode_thread_cpu_s"] = analysis.decode_thread_cpu_seconds();
  d["analysis_cpu_s"] = analysis.analysis_cpu_seconds();
  return d;
}

}  // namespace

PYBIND11_MODULE(_pinsight_reader, m) {
  m.doc() = "Trace reader of pinsight-python (babeltrace2)";
  py::register_exception<ReaderError>(m, "ReaderError", PyExc_RuntimeError);

  py::class_<Analysis>(m, "Analysis")
      .def(
          py::init([](std::vector<std::string> trace_dirs, bool call_trees, std::string chrome_path,
                      size_t decode_threads, std::vector<int64_t> pids, std::vector<int64_t> ranks,
                      std::vector<int64_t> threads, std::vector<std::string> modules,
                      std::vector<std::string> excludes, bool ignore_frozen) {
            ReadFilter filter{std::move(pids),    std::move(ranks),    std::move(threads),
                              std::move(modules), std::move(excludes), ignore_frozen};
            return std::make_unique<Analysis>(AnalysisOptions{std::move(trace_dirs), call_trees,
                                                              std::move(chrome_path),
                                                              decode_threads, std::move(filter)});
          }),
          py::arg("trace_dirs"), py::arg("call_trees") = true, py::arg("chrome_path") = "",
          py::arg("decode_threads") = 0, py::arg("pids") = std::vector<int64_t>{},
          py::arg("ranks") = std::vector<int64_t>{}, py::arg("threads") = std::vector<int64_t>{},
          py::arg("modules") = std::vector<std::string>{},
          py::arg("excludes") = std::vector<std::string>{}, py::arg("ignore_frozen") = false)
      .def("run", &Analysis::run, py::call_guard<py::gil_scoped_release>(),
           "Read the whole trace (releases the GIL). False if cancel() stopped it.")
      .def("cancel", &Analysis::cancel, py::call_guard<py::gil_scoped_release>())
      .def(
          "progress",
          [](const Analysis &a) {
            Progress p = a.progress();
            return py::make_tuple(p.events, p.ts_ns, p.begin_ns, p.end_ns);
          },
          "(events, ts_ns, begin_ns, end_ns): end_ns == 0 when the span is unknown.")
      .def("result", &result_dict, "Aggregates, once run() returned True.");
}
