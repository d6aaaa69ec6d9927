#include "call_stack_analyzer.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
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

}  // namespace

CallStackAnalyzer::CallStackAnalyzer(bool build_call_trees, ReplayOutput *output,
                                     const HostRegistry &hosts, ReadFilter filter)
    : build_call_trees_(build_call_trees),
      output_(output),
      filter_(std::move(filter)),
      hosts_(hosts),
      native_(symbols_, build_call_trees, output) {}

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
  // The thread's stack, if it has Python events, names the region's caller.
  ThreadState *t = nullptr;
  if (auto found = threads_.find(thread_key(e)); found != threads_.end()) t = found->second.get();
  BlockedCalls blocked;
  if (e.kind == EventKind::NativeBegin && (e.aux & 2) &&
      (t == nullptr || innermost_visible(t->stack) == kNoFrame)) {
    blocked = blocked_calls(e.host, e.vpid);
  }
  native_.on_event(process_key, chrome_pid(e.host, e.vpid), e, batch, t, blocked);
}

BlockedCalls CallStackAnalyzer::blocked_calls(uint16_t host, int32_t vpid) const {
  // A CUDA launch on a thread that runs no Python (PyTorch's autograd engine):
  // the process's Python threads whose innermost visible frame is a native call
  // in progress (loss.backward() in run_backward, waiting for the engine).
  BlockedCalls blocked;
  for (const auto &[key, t] : threads_) {
    if (t->host != host || t->vpid != vpid) continue;
    size_t top = innermost_visible(t->stack);
    if (top != kNoFrame && symbols_[t->stack[top].symbol].native) {
      blocked.only = ++blocked.count == 1 ? t.get() : nullptr;
    }
  }
  return blocked;
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
  if (e.kind == EventKind::Damage) {
    on_damage(e);
    return;
  }
  // Names (code_info: every payload; callable_info: compact): not events of a
  // thread's timeline.
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
      if (output_) output_->renamed(renamed);
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
  if (e.stream != t.last_stream) note_stream(t, e.stream);
  if (e.procname != kNoString) t.process->procname = batch.string(e.procname);
  if (t.python_thread_id < 0 && e.python_thread_id >= 0) t.python_thread_id = e.python_thread_id;
  if (e.kind == EventKind::ProcessInfo) {
    // A flight recorder writes it again at each dump, from whichever thread.
    ++t.mode_changes;
    on_process_info(e, batch);
  }
  if (e.kind == EventKind::OpenFrame) {
    on_open_frame(t, e, batch);
    return;
  }
  if (e.kind == EventKind::DumpMarker) {
    ++t.mode_changes;
    on_dump_marker(*t.process, e, batch);
    return;
  }
  if (e.kind == EventKind::ConfigInfo || e.kind == EventKind::LexgionCounts) {
    // Facts of the process; like mode_change, the only events of our control thread.
    ++t.mode_changes;
    on_rate_event(*t.process, e, batch);
  }
  if (e.kind == EventKind::ModeChange) {
    ++t.mode_changes;
    const ModeChangeRecord &change = t.process->mode_changes.emplace_back(
        ModeChangeRecord{e.ts_ns, std::string(batch.string(e.str[0])),
                         std::string(batch.string(e.str[1])), e.code_id});
    if (output_ && t.process->selected) {
      output_->mode_change(t.chrome_pid, e.ts_ns, change.mode, change.reason, change.generation);
    }
    if (batch.string(e.str[1]) == "debugger") step_aside(*t.process, e.ts_ns);
  }
  if (!t.process->selected || !t.selected) return;

  switch (e.kind) {
    case EventKind::FunctionBegin: {
      SymbolId symbol = python_symbol(e, batch);
      t.recent.add(e.ts_ns, symbol, e.kind, e.transition);
      push(t, symbol, e.ts_ns, e.transition == kStart, nullptr, !visible(symbol));
      break;
    }
    case EventKind::FunctionEnd: {
      SymbolId symbol = python_symbol(e, batch);
      t.recent.add(e.ts_ns, symbol, e.kind, e.transition);
      close(t, symbol, e.ts_ns, frame_exit(e.transition));
      break;
    }
    case EventKind::CCallBegin:
      on_c_call_begin(t, e, batch);
      break;
    case EventKind::CCallEnd: {
      SymbolId symbol = native_symbol(e, batch);
      t.recent.add(e.ts_ns, symbol, e.kind, e.transition);
      close(t, symbol, e.ts_ns, e.transition == kCRaise ? FrameExit::Raise : FrameExit::Return);
      break;
    }
    case EventKind::ImportBegin:
      on_import_begin(t, e, batch);
      break;
    case EventKind::ImportEnd:
      on_import_end(t, e, batch);
      break;
    case EventKind::AllocSample:
      alloc_sampled(*t.process, t, alloc_symbol(symbols_, e, batch), e, build_call_trees_);
      if (output_) output_->sampled_memory(t.chrome_pid, e.ts_ns, t.process->live_sampled_bytes);
      break;
    case EventKind::FreeSample:
      if (free_sampled(*t.process, e.code_id) && output_) {
        output_->sampled_memory(t.chrome_pid, e.ts_ns, t.process->live_sampled_bytes);
      }
      break;
    case EventKind::GilSwitch:
    case EventKind::GilReleased:
      gil_event(t, e, symbols_, output_);
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
      if (is_task_event(e.kind)) on_task_event(t, e, batch);
      break;
  }
}

SymbolId CallStackAnalyzer::python_symbol(const RawEvent &e, const EventBatch &batch) {
  if (e.compact) return symbols_.python_function_by_id(e.host, e.vpid, e.code_id);
  // The full payload: code_info names the file (earlier versions: the event).
  if (e.str[1] == kNoString) {
    return symbols_.python_function_by_id(e.host, e.vpid, e.code_id, batch.string(e.str[0]),
                                          e.lineno);
  }
  return symbols_.python_function(e.vpid, e.code_id, batch.string(e.str[0]), batch.string(e.str[1]),
                                  e.lineno);
}

SymbolId CallStackAnalyzer::native_symbol(const RawEvent &e, const EventBatch &batch) {
  if (e.compact) return symbols_.native_function_by_id(e.host, e.vpid, e.extra);
  return symbols_.native_function(batch.string(e.str[2]));
}

void CallStackAnalyzer::on_open_frame(ThreadState &t, const RawEvent &e, const EventBatch &batch) {
  std::string_view callee = batch.string(e.str[2]);
  DumpFrame frame{};
  frame.depth =
      static_cast<uint32_t>(std::strtoul(std::string(batch.string(e.str[3])).c_str(), nullptr, 10));
  frame.line = e.lineno;
  frame.begin_ns = e.extra;
  if (callee == "-" || callee.empty()) {  // a Python function's frame
    frame.symbol = symbols_.python_function(e.vpid, e.code_id, batch.string(e.str[0]),
                                            batch.string(e.str[1]), e.lineno);
    frame.caller = kNoSymbol;
  } else {
    frame.symbol = symbols_.native_function(callee);
    frame.caller =
        symbols_.caller(e.vpid, e.code_id, batch.string(e.str[0]), batch.string(e.str[1]));
  }
  DumpStack &stack = t.process->dump_frames[static_cast<uint32_t>(e.aux)][t.vtid];
  stack.vtid = t.vtid;
  stack.python_thread_id = e.python_thread_id;
  stack.frames.push_back(frame);
}

void CallStackAnalyzer::on_dump_marker(ProcessState &p, const RawEvent &e,
                                       const EventBatch &batch) {
  const auto id = static_cast<uint32_t>(e.aux);
  DumpState &dump = p.dump;
  dump = DumpState{};
  dump.seen = true;
  dump.id = id;
  dump.ts_ns = e.ts_ns;
  dump.reason = std::string(batch.string(e.str[0]));
  dump.status = e.code_id;
  dump.threads = static_cast<uint32_t>(e.lineno);
  dump.frames = static_cast<uint32_t>(e.extra);
  auto found = p.dump_frames.find(id);
  if (found != p.dump_frames.end()) {
    for (auto &[vtid, stack] : found->second) {
      std::stable_sort(stack.frames.begin(), stack.frames.end(),
                       [](const DumpFrame &a, const DumpFrame &b) { return a.depth < b.depth; });
      dump.stacks.push_back(std::move(stack));
    }
  }
  // Earlier dumps' frames (a later dump of the ring holds them too) are done with.
  p.dump_frames.erase(p.dump_frames.begin(), p.dump_frames.upper_bound(id));
}

void CallStackAnalyzer::on_c_call_begin(ThreadState &t, const RawEvent &e,
                                        const EventBatch &batch) {
  SymbolId callee = native_symbol(e, batch);
  t.recent.add(e.ts_ns, callee, e.kind, e.transition);
  // The caller is the Python frame on top of the stack; when its begin is not
  // in the trace, the event's own caller fields (or code_id) name it.
  SymbolId caller = kNoSymbol;
  // Compact, and full without the file (code_info names it): by code_id.
  if (e.compact || e.str[1] == kNoString) {
    if (!t.stack.empty() && symbols_.is_code(t.stack.back().symbol, e.host, e.vpid, e.code_id)) {
      caller = t.stack.back().symbol;
    } else {
      caller = symbols_.caller_by_id(e.host, e.vpid, e.code_id, batch.string(e.str[0]));
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
  uint32_t task_parent = t.stack.empty() ? CallTree::kRoot : t.stack.back().task_node;
  if (t.tasks.pending_step && build_call_trees_) {
    // A task's step: its frames hang under the task in the task tree.
    t.task_tree_started = true;
    task_parent = t.task_tree.child(CallTree::kRoot, task_symbol(*t.tasks.pending_step));
  }
  if (hidden) {
    // Kept on the stack only to match its end; the visible frames it leads to
    // nest in its parent's node.
    t.stack.push_back(
        Frame{symbol, parent, task_parent, ts, 0, nullptr, nullptr, false, false, true});
    if (t.tasks.pending_step) begin_task_frame(t, ts);
    return;
  }
  FunctionStats &stats = t.functions[symbol];
  if (is_call) ++stats.calls;
  ++stats.segments;
  bool outermost = stats.active++ == 0;
  bool outermost_pair = native_call != nullptr && native_call->active++ == 0;
  uint32_t node = 0;
  uint32_t task_node = 0;
  if (build_call_trees_) {
    node = t.tree.child(parent, symbol);
    if (is_call) ++t.tree[node].calls;
    if (t.task_tree_started) {
      task_node = t.task_tree.child(task_parent, symbol);
      if (is_call) ++t.task_tree[task_node].calls;
    }
  }
  t.stack.push_back(
      Frame{symbol, node, task_node, ts, 0, &stats, native_call, outermost, outermost_pair, false});
  if (output_) output_->begin_frame(t.chrome_pid, t.vtid, symbols_, symbol, ts);
  if (t.tasks.pending_step) begin_task_frame(t, ts);
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
    if (!t.tasks.frames.empty()) end_task_frame(t, frame.symbol, ts, 0, true);
    return;
  }
  uint64_t self = duration > frame.child_ns ? duration - frame.child_ns : 0;
  if (!t.tasks.frames.empty()) end_task_frame(t, frame.symbol, ts, self, false);
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
    if (t.task_tree_started)
      t.task_tree[frame.task_node].self_ns += self > regions ? self - regions : 0;
  }
  if (!t.stack.empty()) t.stack.back().child_ns += duration;
  // Frames open at the end last, in the output, until the end of the trace, so
  // that its events stay in time order.
  if (output_)
    output_->end_frame(t.chrome_pid, t.vtid, exit == FrameExit::OpenAtEnd ? last_ns_ : ts, exit);
}

void CallStackAnalyzer::on_discarded(const RawEvent &e) {
  bool packets = e.kind == EventKind::DiscardedPackets;
  // Modulo 2^64, as LTTng's per-buffer counters are: a stream's counts add up to its
  // last packet's counter even where one packet's counter was below the one before
  // (seen under load), which babeltrace2 hands on as a count near 2^64.
  (packets ? discarded_packets_ : discarded_events_) += e.code_id;
  if (e.code_id > static_cast<uint64_t>(INT64_MAX)) {
    take_back_discards(0 - e.code_id, e.vtid, packets);
    return;
  }
  ++discard_records_;
  if (discards_.size() < kMaxDiscardRecords) {
    discards_.push_back(DiscardRecord{e.code_id, e.ts_ns, e.extra, e.vtid, packets});
  }
  set_origin(e.ts_ns);
  if (output_) output_->discarded(e.ts_ns, e.code_id, packets, e.vtid);
}

void CallStackAnalyzer::note_stream(ThreadState &t, StreamRef stream) {
  t.last_stream = stream;
  if (stream != kNoStreamRef &&
      std::find(t.streams.begin(), t.streams.end(), stream) == t.streams.end()) {
    t.streams.push_back(stream);
  }
}

void CallStackAnalyzer::on_damage(const RawEvent &e) {
  if (e.stream == kNoStreamRef) return;
  for (auto &[key, t] : threads_) {
    if (t->last_stream != e.stream) continue;
    t->lower_bound = true;
    // Its events from here until the stream resumes are lost: what was open
    // cannot be matched any more.
    uint64_t at = std::max(e.ts_ns, t->last_ns);
    while (!t->stack.empty()) {
      pop(*t, at, FrameExit::Damaged);
      ++t->anomalies.cut_by_damage;
    }
  }
}

bool CallStackAnalyzer::damaged_by(const ThreadState &t, const Damage &d) const {
  // An index rebuilt, or metadata cut (its packets' own records say what they lost):
  // no event of a thread lost by these.
  if (d.kind == DamageKind::BadIndex || d.kind == DamageKind::CutMetadata) return false;
  bool overlaps = (d.end_ns == 0 || t.first_ns <= d.end_ns) && t.last_ns >= d.begin_ns;
  if (!overlaps) return false;
  if (d.stream != kNoStream) {
    StreamRef stream = stream_ref(d.stream);
    return stream != kNoStreamRef
               ? std::find(t.streams.begin(), t.streams.end(), stream) != t.streams.end()
               : true;
  }
  // A file read not at all: any thread of its trace's processes.
  return (d.host.empty() || hosts_.name(t.host) == d.host) && (d.vpid < 0 || d.vpid == t.vpid);
}

// A counter that stepped back by `count`: the stream's latest ranges said too much.
void CallStackAnalyzer::take_back_discards(uint64_t count, int32_t stream_id, bool packets) {
  for (auto r = discards_.rbegin(); r != discards_.rend() && count != 0; ++r) {
    if (r->stream_id != stream_id || r->packets != packets) continue;
    uint64_t taken = std::min(r->count, count);
    r->count -= taken;
    count -= taken;
  }
  // A range taken back whole was no loss.
  auto none = std::remove_if(discards_.begin(), discards_.end(),
                             [](const DiscardRecord &r) { return r.count == 0; });
  discard_records_ -= static_cast<uint64_t>(discards_.end() - none);
  discards_.erase(none, discards_.end());
}

void CallStackAnalyzer::set_origin(uint64_t ts) {
  if (origin_set_ || output_ == nullptr) return;
  origin_set_ = true;
  output_->set_origin(ts);
}

void CallStackAnalyzer::on_import_begin(ThreadState &t, const RawEvent &e,
                                        const EventBatch &batch) {
  SymbolId symbol = import_symbol(symbols_, e, batch);
  push(t, symbol, e.ts_ns, true, nullptr, !visible(symbol));
  import_begun(t, symbol, e.ts_ns);
}

void CallStackAnalyzer::on_import_end(ThreadState &t, const RawEvent &e, const EventBatch &batch) {
  SymbolId symbol = import_symbol(symbols_, e, batch);
  bool raised = e.transition == kImportRaise;
  close(t, symbol, e.ts_ns, raised ? FrameExit::Raise : FrameExit::Return);
  import_ended(t, symbol, e.ts_ns, raised);
}

void CallStackAnalyzer::on_task_event(ThreadState &t, const RawEvent &e, const EventBatch &batch) {
  TaskTable &tasks = t.process->tasks;
  switch (e.kind) {
    case EventKind::TaskCreate: {
      // After the creating function's end: the stack is its caller's.
      TaskRecord *task = tasks.on_create(e.code_id, t.vtid, e.ts_ns, batch.string(e.str[0]),
                                         t.tasks.current(), task_creation_site(t));
      if (task != nullptr && output_) {
        // Made by the step running now (not by work run for a task on another thread).
        const bool in_step = !t.tasks.frames.empty() && !t.tasks.frames.back().offloaded;
        output_->task_created(t.chrome_pid, *task, in_step ? t.tasks.current() : nullptr);
      }
      break;
    }
    case EventKind::TaskName:
      // At its coroutine's start: the name it runs under (TaskGroup.create_task
      // and create_task name a task after the loop made it, on 3.8-3.11).
      if (!batch.string(e.str[0]).empty()) {
        tasks.task(e.code_id, t.vtid, e.ts_ns, {})->name = batch.string(e.str[0]);
      }
      break;
    case EventKind::TaskStep: {
      std::shared_ptr<TaskRecord> task = tasks.task(e.code_id, t.vtid, e.ts_ns, {});
      if (task->steps == 0) task->vtid = t.vtid;  // its loop's thread
      t.tasks.pending_step = std::move(task);     // the next begin is its frame's
      t.tasks.pending_continues = e.transition == pinsight::wire::kTaskStepContinue;
      break;
    }
    case EventKind::TaskAwait:
      tasks.on_await(e.code_id, e.extra);
      break;
    case EventKind::TaskDone: {
      std::shared_ptr<TaskRecord> task =
          tasks.on_done(e.code_id, e.ts_ns,
                        e.transition <= static_cast<uint8_t>(TaskOutcome::Cancelled)
                            ? static_cast<TaskOutcome>(e.transition)
                            : TaskOutcome::Raised);
      if (task && output_) output_->task_done(t.chrome_pid, *task);
      break;
    }
    case EventKind::TaskHandoff:
      if (e.transition == pinsight::wire::kHandoffSubmit) {
        std::shared_ptr<TaskRecord> task = tasks.live(e.code_id);
        tasks.on_submit(e.extra, task);
        if (task && output_) output_->task_handoff(t.chrome_pid, t.vtid, *task, e.extra, false);
      } else if (std::shared_ptr<TaskRecord> task = tasks.take_submitted(e.extra);
                 task && !t.stack.empty()) {
        // After the work item's begin: its frame is on top.
        if (output_) output_->task_handoff(t.chrome_pid, t.vtid, *task, e.extra, true);
        t.tasks.frames.push_back(
            TaskFrame{t.stack.size() - 1, t.stack.back().start_ns, 0, std::move(task), true});
      }
      break;
    default:
      break;
  }
}

void CallStackAnalyzer::begin_task_frame(ThreadState &t, uint64_t ts) {
  std::shared_ptr<TaskRecord> task = std::move(t.tasks.pending_step);
  // A step that goes on in an awaiting coroutine (after a throw() into an inner
  // one) is the same step.
  if (!std::exchange(t.tasks.pending_continues, false)) ++task->steps;
  if (task->first_step_ns == 0) task->first_step_ns = ts;
  t.tasks.frames.push_back(TaskFrame{t.stack.size() - 1, ts, 0, std::move(task), false});
}

void CallStackAnalyzer::end_task_frame(ThreadState &t, SymbolId symbol, uint64_t ts, uint64_t self,
                                       bool hidden) {
  // The frame just popped was at index t.stack.size().
  const size_t depth = t.stack.size();
  TaskFrame &innermost = t.tasks.frames.back();
  if (!hidden && self > 0 && depth >= innermost.depth) {
    (innermost.offloaded ? innermost.task->offloaded_functions
                         : innermost.task->functions)[symbol] += self;
  }
  if (innermost.depth != depth) return;
  TaskFrame frame = std::move(innermost);
  t.tasks.frames.pop_back();
  const uint64_t duration = ts > frame.start_ns ? ts - frame.start_ns : 0;
  if (frame.offloaded) {
    frame.task->offloaded_ns += duration;
    ++frame.task->offloads;
  } else {
    frame.task->running_ns += duration > frame.nested_ns ? duration - frame.nested_ns : 0;
    if (!t.tasks.frames.empty()) t.tasks.frames.back().nested_ns += duration;
  }
  if (output_) {
    output_->task_step(t.chrome_pid, t.vtid, *frame.task, frame.start_ns, ts, frame.offloaded);
  }
}

SymbolId CallStackAnalyzer::task_symbol(const TaskRecord &task) {
  return symbols_.native_function(
      "asyncio task " + (task.name.empty() ? std::string("?") : task_group_name(task.name)));
}

SymbolId CallStackAnalyzer::task_creation_site(const ThreadState &t) {
  SymbolId innermost = kNoSymbol;
  for (size_t i = t.stack.size(); i-- > 0;) {
    const Frame &f = t.stack[i];
    if (f.hidden || symbols_[f.symbol].native) continue;
    if (innermost == kNoSymbol) innermost = f.symbol;
    if (symbols_[f.symbol].filename.find("/asyncio/") == std::string::npos) return f.symbol;
  }
  return innermost;
}

void CallStackAnalyzer::on_rate_event(ProcessState &p, const RawEvent &e, const EventBatch &batch) {
  if (e.kind == EventKind::ConfigInfo) {
    const ConfigRecord &config = p.configs.emplace_back(
        ConfigRecord{e.ts_ns, std::string(batch.string(e.str[0])), e.code_id});
    if (output_ && p.selected)
      output_->config_loaded(p.chrome_pid, e.ts_ns, config.path, config.generation);
    return;
  }
  SymbolId symbol =
      symbols_.python_function(e.vpid, 0, batch.string(e.str[0]), batch.string(e.str[1]), e.lineno);
  LexgionCountRecord &r = p.lexgion_counts[symbol];
  r.executions = e.code_id;
  r.traced = e.extra;
  r.lower_bound = (e.transition & 1) != 0;
  r.max_num_traces = e.aux;
  // str[3]: "tracing_rate trace_starts_at"
  std::string settings(batch.string(e.str[3]));
  char *end = nullptr;
  r.tracing_rate = std::strtoll(settings.c_str(), &end, 10);
  r.trace_starts_at = std::strtoll(end, nullptr, 10);
  r.section = batch.string(e.str[2]);
  if (output_ && p.selected) {
    output_->rate_counts(p.chrome_pid, e.ts_ns, symbols_[symbol].qualname,
                         RateCounts{r.executions, r.traced, r.max_num_traces, r.section});
  }
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
  // A dump's native regions still open on its threads, before they turn into
  // unmatched begins.
  for (auto &[key, p] : processes_) {
    if (!p.dump.seen) continue;
    auto native = native_.processes().find(key);
    if (native == native_.processes().end()) continue;
    for (DumpStack &stack : p.dump.stacks) {
      auto open = native->second.open.find(stack.vtid);
      if (open == native->second.open.end()) continue;
      for (const NativeOpen &o : open->second) {
        stack.regions.push_back({native->second.label(o.provider, o.region), o.start_ns});
      }
    }
  }
  native_.finish();
  for (const Damage &d : damages_) {
    for (auto &[key, t] : threads_) t->lower_bound |= damaged_by(*t, d);
  }
  for (auto &[key, t] : threads_) {
    while (!t->stack.empty()) {
      pop(*t, t->last_ns, FrameExit::OpenAtEnd);
      ++t->anomalies.open_at_end;
    }
    t->tasks.pending_step.reset();
  }
  for (auto &[key, p] : processes_) p.tasks.finish(last_ns_);
  for (auto &[key, t] : threads_) {
    if (is_control_thread(*t)) {
      ++control_threads_;
    } else {
      t->process->events += t->events;
    }
  }
  assign_labels();
  for (auto &[key, t] : threads_) gil_finish(*t, output_);
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
