#include "call_stack_analyzer.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace pinsight_reader {
namespace {

FrameExit frame_exit(uint8_t transition) {
  switch (transition) {
    case kYield:
      return FrameExit::Yield;
    case kUnwind:
      return FrameExit::Unwind;
    default:
      return FrameExit::Return;
  }
}

// A command line, shortened for a label: the script's file name rather than
// its path, at most kMaxLabel characters.
std::string command_label(const std::string &argv) {
  constexpr size_t kMaxLabel = 48;
  std::string first = argv.substr(0, argv.find(' '));
  std::string rest = first.size() < argv.size() ? argv.substr(first.size()) : "";
  size_t slash = first.rfind('/');
  if (slash != std::string::npos && slash + 1 < first.size()) first.erase(0, slash + 1);
  if (!first.empty() && first[0] == '-') first = "python " + first;  // python -c ...
  std::string out = first + rest;
  if (out.size() > kMaxLabel) out = out.substr(0, kMaxLabel - 3) + "...";
  return out;
}

// Chrome trace pids must be unique: processes of other hosts than the first
// get theirs above Linux's largest pid (2^22).
int64_t chrome_pid(uint16_t host, int32_t vpid) {
  return static_cast<int64_t>(host) * (int64_t{1} << 22) + vpid;
}

}  // namespace

CallStackAnalyzer::CallStackAnalyzer(bool build_call_trees, ChromeTraceWriter *chrome,
                                     const HostRegistry &hosts, ReadFilter filter)
    : build_call_trees_(build_call_trees),
      chrome_(chrome),
      filter_(std::move(filter)),
      hosts_(hosts) {}

ProcessState &CallStackAnalyzer::process(uint16_t host, int32_t vpid) {
  uint64_t key = (static_cast<uint64_t>(host) << 32) | static_cast<uint32_t>(vpid);
  auto [it, inserted] = processes_.try_emplace(key);
  if (inserted) {
    it->second.host = host;
    it->second.vpid = vpid;
    it->second.chrome_pid = chrome_pid(host, vpid);
    // With --rank, a process is selected once its process_info tells its rank.
    it->second.selected = filter_.pid_selected(vpid) && filter_.ranks.empty();
  }
  return it->second;
}

namespace {
uint64_t thread_key(const RawEvent &e) {
  // Without the vtid context, Python's own thread id still separates stacks.
  int32_t tid = e.vtid >= 0 ? e.vtid : e.python_thread_id;
  // Linux ids fit in 22 bits; -1 (absent) becomes 0xffffff.
  return (static_cast<uint64_t>(e.host) << 48) |
         (static_cast<uint64_t>(static_cast<uint32_t>(e.vpid) & 0xffffff) << 24) |
         (static_cast<uint32_t>(tid) & 0xffffff);
}
}  // namespace

void CallStackAnalyzer::on_native(const RawEvent &e, const EventBatch &batch) {
  uint64_t process_key = (static_cast<uint64_t>(e.host) << 32) | static_cast<uint32_t>(e.vpid);
  auto selected = processes_.find(process_key);
  if (selected != processes_.end() && !selected->second.selected) return;
  if (!filter_.thread_selected(e.vtid)) return;
  NativeProcess &p = native_[process_key];
  // A process has a few dozen region names at most: a scan, no allocation.
  auto intern = [&p](std::string_view name) {
    for (uint32_t i = 0; i < p.names.size(); ++i) {
      if (p.names[i] == name) return i;
    }
    p.names.emplace_back(name);
    return static_cast<uint32_t>(p.names.size() - 1);
  };
  uint32_t provider = intern(batch.string(e.str[0]));
  uint32_t region = intern(batch.string(e.str[1]));
  if (e.kind == EventKind::DeviceClock) {
    p.gpu_to_origin = static_cast<int64_t>(e.code_id);
    p.gpu_clock = true;
    return;
  }
  if (e.kind == EventKind::DeviceActivity) {
    on_device_activity(e, p, provider, region);
    return;
  }
  std::vector<NativeOpen> &open = p.open[e.vtid];
  ThreadState *t = nullptr;
  if (auto found = threads_.find(thread_key(e)); found != threads_.end()) t = found->second.get();
  if (e.kind == EventKind::NativeBegin) {
    NativeOpen opened{provider, region, kNoCaller, e.ts_ns};
    // The innermost frame of this thread that the filters keep.
    for (size_t i = t ? t->stack.size() : 0; i-- > 0;) {
      if (!t->stack[i].hidden) {
        opened.caller = t->stack[i].symbol;
        opened.depth = static_cast<uint32_t>(i);
        opened.frame_start_ns = t->stack[i].start_ns;
        opened.child_ns = t->stack[i].child_ns;
        break;
      }
    }
    if (e.aux & 2) {  // a CUDA launch: its kernel or copy runs later, on the device
      p.launches[static_cast<uint32_t>(e.lineno)] = {opened.caller, e.vtid};
    }
    if (e.aux & 1) {
      std::pair<uint64_t, uint64_t> parallel{e.code_id, e.extra};
      if (batch.string(e.str[1]) == "parallel") {
        p.parallel_callers[parallel] = {opened.caller, e.vtid};
      } else if (opened.caller == kNoCaller) {
        // A worker thread (it runs no Python): the call that opened the region.
        auto it = p.parallel_callers.find(parallel);
        if (it != p.parallel_callers.end()) {
          opened.caller = it->second.first;
          if (opened.caller != kNoCaller) opened.opener_tid = it->second.second;
        }
      }
    }
    open.push_back(opened);
    return;
  }
  if ((e.aux & 1) && batch.string(e.str[1]) == "parallel") {
    p.parallel_callers.erase({e.code_id, e.extra});
  }
  for (size_t i = open.size(); i-- > 0;) {
    if (open[i].provider != provider || open[i].region != region) continue;
    // Begins above it that never ended are unmatched: listed, never timed.
    for (size_t j = i + 1; j < open.size(); ++j) ++p.unmatched[{open[j].provider, open[j].region}];
    NativeRegionStats &stats = p.regions[{open[i].caller, provider, region}];
    ++stats.count;
    stats.total_ns += e.ts_ns >= open[i].start_ns ? e.ts_ns - open[i].start_ns : 0;
    bool logged = build_call_trees_ && t != nullptr && open[i].depth != UINT32_MAX &&
                  native_region_ended(*t, p, open[i], e.ts_ns);
    uint32_t depth = open[i].depth;
    uint64_t frame_start = open[i].frame_start_ns;
    if (chrome_) {
      chrome_->native_region(chrome_pid(e.host, e.vpid), e.vtid, p.label(provider, region),
                             p.domain(provider), open[i].start_ns, e.ts_ns, open[i].opener_tid);
    }
    open.resize(i);
    // Nothing of this frame open any more: its regions so far are complete, drawn
    // now, so that a long frame keeps no log of its regions.
    if (logged && std::none_of(open.begin(), open.end(), [&](const NativeOpen &o) {
          return o.depth == depth && o.frame_start_ns == frame_start;
        })) {
      draw_regions(*t, depth, t->stack[depth].node);
    }
    return;
  }
  ++p.ends_without_begin;
}

void CallStackAnalyzer::on_device_activity(const RawEvent &e, NativeProcess &p, uint32_t provider,
                                           uint32_t region) {
  // The Python call around the launch with the same correlationId; the activity
  // itself is written later, when CUPTI delivers its buffer, by another thread.
  SymbolId caller = kNoCaller;
  int32_t launch_tid = -1;
  auto correlation = static_cast<uint32_t>(e.code_id);
  if (auto it = p.launches.find(correlation); it != p.launches.end()) {
    caller = it->second.first;
    launch_tid = it->second.second;
    p.launches.erase(it);
  }
  uint64_t start = e.extra;
  uint64_t end = static_cast<uint32_t>(e.lineno) | (static_cast<uint64_t>(e.aux) << 32);
  NativeRegionStats &stats = p.regions[{caller, provider, region}];
  ++stats.count;
  stats.total_ns += end > start ? end - start : 0;
  if (chrome_ && p.gpu_clock && end > start) {
    p.device_track = true;
    chrome_->native_region(chrome_pid(e.host, e.vpid), kDeviceTrackTid, p.label(provider, region),
                           p.domain(provider), static_cast<uint64_t>(start + p.gpu_to_origin),
                           static_cast<uint64_t>(end + p.gpu_to_origin),
                           launch_tid >= 0 ? launch_tid : -1);
  }
}

namespace {
// PInsight's providers: (provider, label in views, domain in JSON).
constexpr std::string_view kDomains[][3] = {{"ompt_pinsight_lttng_ust", "OpenMP", "openmp"},
                                            {"pmpi_pinsight_lttng_ust", "MPI", "mpi"},
                                            {"cupti_pinsight_lttng_ust", "CUDA", "cuda"}};
}  // namespace

std::string NativeProcess::domain(uint32_t provider) const {
  for (const auto &known : kDomains) {
    if (known[0] == names[provider]) return std::string(known[2]);
  }
  return names[provider];
}

std::string NativeProcess::domain_label(uint32_t provider) const {
  for (const auto &known : kDomains) {
    if (known[0] == names[provider]) return std::string(known[1]);
  }
  return names[provider];
}

std::string NativeProcess::label(uint32_t provider, uint32_t region) const {
  return "[" + domain_label(provider) + "] " + names[region];
}

bool CallStackAnalyzer::native_region_ended(ThreadState &t, NativeProcess &p,
                                            const NativeOpen &region, uint64_t ts) {
  if (region.depth >= t.stack.size() || t.stack[region.depth].start_ns != region.frame_start_ns) {
    return false;  // its frame has ended: not drawn
  }
  uint64_t key = (static_cast<uint64_t>(region.provider) << 32) | region.region;
  auto [it, added] = p.tree_symbols.try_emplace(key, kNoSymbol);
  if (added) it->second = symbols_.native_function(p.label(region.provider, region.region));
  if (t.frame_regions.size() <= region.depth) t.frame_regions.resize(region.depth + 1);
  uint64_t python_ns = t.stack[region.depth].child_ns - region.child_ns;
  t.frame_regions[region.depth].ended.push_back({region.start_ns, ts, python_ns, it->second});
  return true;
}

void CallStackAnalyzer::draw_regions(ThreadState &t, size_t depth, uint32_t node) {
  if (depth >= t.frame_regions.size() || t.frame_regions[depth].ended.empty()) return;
  std::vector<EndedRegion> &regions = t.frame_regions[depth].ended;
  // Outer regions first: by start, the longer first.
  std::sort(regions.begin(), regions.end(), [](const EndedRegion &a, const EndedRegion &b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  struct Open {
    const EndedRegion *region;
    uint32_t node;
    uint64_t nested_ns;
  };
  std::vector<Open> open;
  uint64_t &outermost_ns = t.frame_regions[depth].drawn_ns;
  auto inside = [](const EndedRegion &r) {
    uint64_t duration = r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
    return duration > r.python_ns ? duration - r.python_ns : 0;
  };
  auto close_region = [&](const Open &o) {
    uint64_t own = inside(*o.region);
    t.tree[o.node].self_ns += own > o.nested_ns ? own - o.nested_ns : 0;
  };
  for (const EndedRegion &r : regions) {
    while (!open.empty() && open.back().region->end_ns < r.end_ns) {
      close_region(open.back());
      open.pop_back();
    }
    if (open.empty()) {
      outermost_ns += inside(r);
    } else {
      open.back().nested_ns += inside(r);
    }
    uint32_t child = t.tree.child(open.empty() ? node : open.back().node, r.symbol);
    ++t.tree[child].calls;
    open.push_back({&r, child, 0});
  }
  while (!open.empty()) {
    close_region(open.back());
    open.pop_back();
  }
  regions.clear();
}

ThreadState &CallStackAnalyzer::thread(const RawEvent &e) {
  uint64_t key = thread_key(e);
  int32_t tid = e.vtid >= 0 ? e.vtid : e.python_thread_id;
  if (last_thread_ != nullptr && key == last_thread_key_) return *last_thread_;
  auto &slot = threads_[key];
  if (!slot) {
    slot = std::make_unique<ThreadState>();
    slot->host = e.host;
    slot->vpid = e.vpid;
    slot->vtid = tid;
    slot->chrome_pid = chrome_pid(e.host, e.vpid);
    slot->first_ns = e.ts_ns;
    slot->process = &process(e.host, e.vpid);
    slot->selected = filter_.thread_selected(tid);
  }
  last_thread_key_ = key;
  last_thread_ = slot.get();
  return *slot;
}

void CallStackAnalyzer::consume(const RawEvent &e, const EventBatch &batch) {
  if (e.kind == EventKind::Discarded || e.kind == EventKind::DiscardedPackets) {
    on_discarded(e);
    return;
  }
  // Names of the compact payload: not events of a thread's timeline.
  if (e.kind == EventKind::CodeInfo || e.kind == EventKind::CallableInfo) {
    if (e.kind == EventKind::CodeInfo) {
      symbols_.name_code(e.host, e.vpid, e.code_id, batch.string(e.str[0]), batch.string(e.str[1]),
                         e.lineno);
    } else {
      symbols_.name_callable(e.host, e.vpid, e.code_id, batch.string(e.str[2]));
    }
    // A renamed symbol is judged again by the filters.
    for (SymbolId renamed : symbols_.take_renamed()) {
      if (renamed < visible_.size()) visible_[renamed] = -1;
    }
    return;
  }
  if (e.kind == EventKind::NativeBegin || e.kind == EventKind::NativeEnd ||
      e.kind == EventKind::DeviceActivity || e.kind == EventKind::DeviceClock) {
    // Not events of the Python domain: counted apart, no thread or process made.
    ++kind_counts_[static_cast<size_t>(e.kind)];
    on_native(e, batch);
    return;
  }
  if (events_++ == 0) first_ns_ = e.ts_ns;
  ++kind_counts_[static_cast<size_t>(e.kind)];
  set_origin(e.ts_ns);
  last_ns_ = e.ts_ns;
  ThreadState &t = thread(e);
  ++t.events;
  t.last_ns = e.ts_ns;
  if (e.procname != kNoString) t.process->procname = batch.string(e.procname);
  if (t.python_thread_id < 0 && e.python_thread_id >= 0) t.python_thread_id = e.python_thread_id;
  if (e.kind == EventKind::ProcessInfo) on_process_info(e, batch);
  if (e.kind == EventKind::ModeChange) {
    ++t.mode_changes;
    if (batch.string(e.str[1]) == "debugger") step_aside(*t.process, e.ts_ns);
  }
  if (!t.process->selected || !t.selected) return;

  switch (e.kind) {
    case EventKind::FunctionBegin: {
      SymbolId symbol = python_symbol(e, batch);
      push(t, symbol, e.ts_ns, e.transition == kStart, nullptr, !visible(symbol));
      break;
    }
    case EventKind::FunctionEnd:
      close(t, python_symbol(e, batch), e.ts_ns, frame_exit(e.transition));
      break;
    case EventKind::CCallBegin:
      on_c_call_begin(t, e, batch);
      break;
    case EventKind::CCallEnd:
      close(t, native_symbol(e, batch), e.ts_ns,
            e.transition == kCRaise ? FrameExit::Raise : FrameExit::Return);
      break;
    case EventKind::ImportBegin:
      on_import_begin(t, e, batch);
      break;
    case EventKind::ImportEnd:
      on_import_end(t, e, batch);
      break;
    case EventKind::AllocSample:
      on_alloc_sample(t, e, batch);
      break;
    case EventKind::FreeSample:
      on_free_sample(e);
      break;
    case EventKind::GilSwitch:
    case EventKind::GilReleased:
      on_gil(t, e);
      break;
    case EventKind::GeneratorEnd: {
      SymbolId symbol = python_symbol(e, batch);
      if (!visible(symbol)) break;
      FunctionStats &stats = t.functions[symbol];
      ++stats.finished;
      stats.wall_ns += e.extra;
      break;
    }
    case EventKind::ThreadStart:
      t.python_thread_id = e.python_thread_id;
      t.thread_ident = e.code_id;
      break;
    default:
      break;
  }
}

SymbolId CallStackAnalyzer::python_symbol(const RawEvent &e, const EventBatch &batch) {
  if (e.compact) return symbols_.python_function_by_id(e.host, e.vpid, e.code_id);
  return symbols_.python_function(e.vpid, e.code_id, batch.string(e.str[0]), batch.string(e.str[1]),
                                  e.lineno);
}

SymbolId CallStackAnalyzer::native_symbol(const RawEvent &e, const EventBatch &batch) {
  if (e.compact) return symbols_.native_function_by_id(e.host, e.vpid, e.extra);
  return symbols_.native_function(batch.string(e.str[2]));
}

void CallStackAnalyzer::on_c_call_begin(ThreadState &t, const RawEvent &e,
                                        const EventBatch &batch) {
  SymbolId callee = native_symbol(e, batch);
  // The caller is the Python frame on top of the stack; when its begin is not
  // in the trace, the event's own caller fields (or code_id) name it.
  SymbolId caller = kNoSymbol;
  if (e.compact) {
    if (!t.stack.empty() && symbols_.is_code(t.stack.back().symbol, e.host, e.vpid, e.code_id)) {
      caller = t.stack.back().symbol;
    } else {
      caller = symbols_.caller_by_id(e.host, e.vpid, e.code_id);
    }
  } else {
    std::string_view caller_qualname = batch.string(e.str[0]);
    std::string_view caller_filename = batch.string(e.str[1]);
    if (!t.stack.empty()) {
      const Symbol &top = symbols_[t.stack.back().symbol];
      if (!top.native && top.qualname == caller_qualname && top.filename == caller_filename) {
        caller = t.stack.back().symbol;
      }
    }
    if (caller == kNoSymbol) {
      caller = symbols_.caller(e.vpid, e.code_id, caller_qualname, caller_filename);
    }
  }
  // As with the tracer's module_filter: no native calls of a hidden caller.
  if (!visible(caller)) {
    push(t, callee, e.ts_ns, true, nullptr, true);
    return;
  }
  NativeCallStats &call = t.native_calls[(static_cast<uint64_t>(caller) << 32) | callee];
  ++call.calls;
  push(t, callee, e.ts_ns, true, &call, false);
}

bool CallStackAnalyzer::visible(SymbolId symbol) {
  if (!filter_.hides_functions()) return true;
  if (symbol >= visible_.size()) visible_.resize(symbols_.size(), -1);
  int8_t &decided = visible_[symbol];
  if (decided < 0) {
    const Symbol &s = symbols_[symbol];
    decided = filter_.function_visible(s, !s.native && is_main_script(s.filename)) ? 1 : 0;
  }
  return decided == 1;
}

bool CallStackAnalyzer::is_main_script(const std::string &filename) const {
  for (const std::string &script : main_scripts_) {
    if (filename == script) return true;
    if (filename.size() > script.size() &&
        filename.compare(filename.size() - script.size(), script.size(), script) == 0 &&
        filename[filename.size() - script.size() - 1] == '/') {
      return true;
    }
  }
  return false;
}

void CallStackAnalyzer::push(ThreadState &t, SymbolId symbol, uint64_t ts, bool is_call,
                             NativeCallStats *native_call, bool hidden) {
  uint32_t parent = t.stack.empty() ? CallTree::kRoot : t.stack.back().node;
  if (hidden) {
    // Kept on the stack only to match its end; the visible frames it leads to
    // nest in its parent's node.
    t.stack.push_back(Frame{symbol, parent, ts, 0, nullptr, nullptr, false, false, true});
    return;
  }
  FunctionStats &stats = t.functions[symbol];
  if (is_call) ++stats.calls;
  ++stats.segments;
  bool outermost = stats.active++ == 0;
  bool outermost_pair = native_call != nullptr && native_call->active++ == 0;
  uint32_t node = 0;
  if (build_call_trees_) {
    node = t.tree.child(parent, symbol);
    if (is_call) ++t.tree[node].calls;
  }
  t.stack.push_back(
      Frame{symbol, node, ts, 0, &stats, native_call, outermost, outermost_pair, false});
  if (chrome_) chrome_->begin_frame(t.chrome_pid, t.vtid, symbols_, symbol, ts);
}

void CallStackAnalyzer::close(ThreadState &t, SymbolId symbol, uint64_t ts, FrameExit exit) {
  std::vector<Frame> &stack = t.stack;
  if (!stack.empty() && stack.back().symbol == symbol) {
    pop(t, ts, exit);
    return;
  }
  // An end that does not match the top: if its begin is further down, the
  // frames above lost their ends (discarded events); otherwise the begin was
  // never recorded (the frame was running when the session started).
  size_t limit = std::min(stack.size(), kMaxEndSearch);
  for (size_t depth = 2; depth <= limit; ++depth) {
    if (stack[stack.size() - depth].symbol != symbol) continue;
    for (size_t i = 1; i < depth; ++i) {
      pop(t, ts, FrameExit::Implicit);
      ++t.anomalies.implicitly_closed;
    }
    pop(t, ts, exit);
    return;
  }
  ++t.anomalies.ends_without_begin;
}

void CallStackAnalyzer::pop(ThreadState &t, uint64_t ts, FrameExit exit) {
  Frame frame = t.stack.back();
  t.stack.pop_back();
  uint64_t duration = ts > frame.start_ns ? ts - frame.start_ns : 0;
  if (frame.hidden) {
    // Its own time becomes its parent's self time.
    if (!t.stack.empty()) t.stack.back().child_ns += frame.child_ns;
    return;
  }
  uint64_t self = duration > frame.child_ns ? duration - frame.child_ns : 0;
  FunctionStats &stats = *frame.stats;
  stats.self_ns += self;
  --stats.active;
  if (frame.outermost) stats.total_ns += duration;
  bool failed = exit == FrameExit::Unwind || exit == FrameExit::Raise;
  if (failed) ++stats.exceptions;
  if (frame.native_call != nullptr) {
    --frame.native_call->active;
    if (frame.outermost_pair) frame.native_call->total_ns += duration;
    if (failed) ++frame.native_call->raised;
  }
  if (build_call_trees_) {
    uint64_t regions = 0;
    if (t.stack.size() < t.frame_regions.size()) {
      draw_regions(t, t.stack.size(), frame.node);
      regions = std::exchange(t.frame_regions[t.stack.size()].drawn_ns, 0);
    }
    t.tree[frame.node].self_ns += self > regions ? self - regions : 0;
  }
  if (!t.stack.empty()) t.stack.back().child_ns += duration;
  // Frames open at the end last, in the Chrome export, until the end of the
  // trace, so that its events stay in time order.
  if (chrome_)
    chrome_->end_frame(t.chrome_pid, t.vtid, exit == FrameExit::OpenAtEnd ? last_ns_ : ts, exit);
}

void CallStackAnalyzer::on_discarded(const RawEvent &e) {
  bool packets = e.kind == EventKind::DiscardedPackets;
  (packets ? discarded_packets_ : discarded_events_) += e.code_id;
  ++discard_records_;
  if (discards_.size() < kMaxDiscardRecords) {
    discards_.push_back(DiscardRecord{e.code_id, e.ts_ns, e.extra, e.vtid, packets});
  }
  set_origin(e.ts_ns);
  if (chrome_) chrome_->discarded(e.ts_ns, e.code_id, packets, e.vtid);
}

void CallStackAnalyzer::set_origin(uint64_t ts) {
  if (origin_set_ || chrome_ == nullptr) return;
  origin_set_ = true;
  chrome_->set_origin(ts);
}

void CallStackAnalyzer::on_process_info(const RawEvent &e, const EventBatch &batch) {
  ProcessState &p = process(e.host, e.vpid);
  p.has_info = true;
  p.hostname = batch.string(e.str[0]);
  p.argv = batch.string(e.str[1]);
  p.python_version = batch.string(e.str[2]);
  p.backend = batch.string(e.str[3]);
  p.mpi_rank = e.lineno;
  p.mpi_size = e.aux;
  p.pid = static_cast<int64_t>(e.code_id);
  p.selected = filter_.pid_selected(p.vpid) && filter_.rank_selected(p.mpi_rank);
  // sys.argv[0]: the script, whose functions' module is __main__.
  std::string script = p.argv.substr(0, p.argv.find(' '));
  if (script.compare(0, 2, "./") == 0) script.erase(0, 2);
  if (!script.empty() && script[0] != '-' &&
      std::find(main_scripts_.begin(), main_scripts_.end(), script) == main_scripts_.end()) {
    main_scripts_.push_back(script);
  }
}

void CallStackAnalyzer::step_aside(const ProcessState &process, uint64_t ts) {
  // The tracer forgot every frame there: their ends will not come, and frames
  // running when it traces again have no begin.
  for (auto &[key, t] : threads_) {
    if (t->process != &process) continue;
    while (!t->stack.empty()) {
      pop(*t, std::max(ts, t->last_ns), FrameExit::OpenAtEnd);
      ++t->anomalies.stepped_aside;
    }
  }
}

void CallStackAnalyzer::finish() {
  for (auto &[key, p] : native_) {
    for (auto &[vtid, open] : p.open) {
      for (const NativeOpen &o : open) ++p.unmatched[{o.provider, o.region}];
      open.clear();
    }
  }
  for (auto &[key, t] : threads_) {
    while (!t->stack.empty()) {
      pop(*t, t->last_ns, FrameExit::OpenAtEnd);
      ++t->anomalies.open_at_end;
    }
  }
  for (auto &[key, t] : threads_) {
    if (is_control_thread(*t)) {
      ++control_threads_;
    } else {
      t->process->events += t->events;
    }
  }
  assign_labels();
  for (auto &[key, t] : threads_) gil_finish(*t);
  if (chrome_) {
    int64_t index = 0;
    for (const ProcessState *p : processes()) {
      chrome_->process_metadata(p->chrome_pid, p->label, index++);
      int64_t thread_index = 0;
      for (const ThreadState *t : threads_of(*p)) {
        chrome_->thread_metadata(t->chrome_pid, t->vtid, t->label, thread_index++);
        if (t->gil.seen) {
          chrome_->thread_metadata(t->chrome_pid, ChromeTraceWriter::gil_track(t->vtid),
                                   "GIL: " + t->label, thread_index++);
        }
      }
      auto native =
          native_.find((static_cast<uint64_t>(p->host) << 32) | static_cast<uint32_t>(p->vpid));
      if (native != native_.end() && native->second.device_track) {
        chrome_->thread_metadata(p->chrome_pid, kDeviceTrackTid, "GPU (CUDA activity)",
                                 thread_index++);
      }
    }
  }
}

void CallStackAnalyzer::assign_labels() {
  std::map<int32_t, int> rank_uses;
  for (auto &[key, p] : processes_) {
    p.host_name = hosts_.name(p.host);
    if (p.mpi_rank >= 0) ++rank_uses[p.mpi_rank];
  }
  bool several_hosts = hosts_.size() > 1;
  for (auto &[key, p] : processes_) {
    std::string pid = "pid " + std::to_string(p.vpid);
    if (several_hosts) pid += " on " + p.host_name;
    if (p.mpi_rank < 0) {
      // What the user ran says more than a number: "sim.py --steps 10 (pid 12)".
      std::string command = command_label(p.argv.empty() ? p.procname : p.argv);
      p.label = command.empty() ? pid : command + " (" + pid + ")";
    } else if (rank_uses[p.mpi_rank] == 1) {
      p.label = "rank " + std::to_string(p.mpi_rank);
    } else {
      // Several runs in one trace: the rank alone would merge them.
      p.label = "rank " + std::to_string(p.mpi_rank) + " (" + pid + ")";
    }
  }
  for (auto &[key, t] : threads_) {
    std::string tid = "tid " + std::to_string(t->vtid);
    if (t->vtid == t->vpid) {
      t->label = "main thread (" + tid + ")";
    } else if (t->python_thread_id >= 0) {
      t->label = "thread " + std::to_string(t->python_thread_id) + " (" + tid + ")";
    } else {
      t->label = tid;
    }
  }
}

std::vector<const ProcessState *> CallStackAnalyzer::processes() const {
  std::vector<const ProcessState *> out;
  for (const auto &[key, p] : processes_) {
    // A process none of whose threads is selected is left out too.
    if (p.selected && !threads_of(p).empty()) out.push_back(&p);
  }
  std::sort(out.begin(), out.end(), [](const ProcessState *a, const ProcessState *b) {
    auto rank = [](const ProcessState *p) { return p->mpi_rank >= 0 ? p->mpi_rank : INT32_MAX; };
    return std::make_tuple(rank(a), a->host, a->vpid) < std::make_tuple(rank(b), b->host, b->vpid);
  });
  return out;
}

std::vector<const ThreadState *> CallStackAnalyzer::threads_of(const ProcessState &p) const {
  std::vector<const ThreadState *> out;
  for (const auto &[key, t] : threads_) {
    if (t->process == &p && t->selected && !is_control_thread(*t)) out.push_back(t.get());
  }
  std::sort(out.begin(), out.end(), [](const ThreadState *a, const ThreadState *b) {
    // The main thread first, then by first appearance.
    return std::make_tuple(a->vtid != a->vpid, a->first_ns, a->vtid) <
           std::make_tuple(b->vtid != b->vpid, b->first_ns, b->vtid);
  });
  return out;
}

}  // namespace pinsight_reader
