#include "native_regions.h"

#include <cxxabi.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <memory>

#include "replay_state.h"

namespace pinsight_reader {

namespace {

// A kernel's C++ name from its mangled one (the C++ runtime's demangler, as
// Nsight Systems uses it); the name itself when it is not a mangled one.
std::string demangled(std::string_view name) {
  if (name.size() < 3 || name.substr(0, 2) != "_Z") return std::string(name);
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> text(
      abi::__cxa_demangle(std::string(name).c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && text ? std::string(text.get()) : std::string(name);
}

}  // namespace

const char *attributed_name(Attributed how) {
  switch (how) {
    case Attributed::kOwnThread:
      return "own_thread";
    case Attributed::kBlockedCall:
      return "blocked_call";
    case Attributed::kNoBlockedCall:
      return "no_blocked_call";
    case Attributed::kSeveralBlocked:
      return "several_blocked_calls";
    case Attributed::kNoLaunch:
      break;
  }
  return "no_launch";
}

bool NativeRegions::attribute(const std::vector<Frame> &stack, Attribution *by) const {
  size_t top = innermost_visible(stack);
  if (top == kNoFrame) return false;
  for (size_t i = top + 1; i-- > 0;) {
    if (stack[i].hidden) continue;
    SymbolId symbol = stack[i].symbol;
    if (!symbols_[symbol].native) {
      by->caller = symbol;
      break;
    }
    if (by->via == kNoCaller) by->via = symbol;
  }
  return true;
}

void NativeRegions::on_event(uint64_t process_key, int64_t output_pid, const RawEvent &e,
                             const EventBatch &batch, ThreadState *t, const BlockedCalls &blocked) {
  NativeProcess &p = processes_[process_key];
  // A process has a few dozen region names at most: a scan, no allocation.
  auto intern = [&p](std::string_view name) {
    for (uint32_t i = 0; i < p.names.size(); ++i) {
      if (p.names[i] == name) return i;
    }
    p.names.emplace_back(name);
    return static_cast<uint32_t>(p.names.size() - 1);
  };
  uint32_t provider = intern(batch.string(e.str[0]));
  uint32_t region;
  if (e.kind == EventKind::DeviceActivity) {
    std::string_view name = batch.string(e.str[1]);
    std::string readable = demangled(name);
    region = intern(readable);
    if (readable != name) p.mangled.emplace(region, name);
  } else {
    region = intern(batch.string(e.str[1]));
  }
  if (e.kind == EventKind::DeviceClock) {
    p.gpu_to_origin = static_cast<int64_t>(e.code_id);
    p.gpu_clock = true;
    return;
  }
  if (e.kind == EventKind::DeviceActivity) {
    on_device_activity(e, batch, output_pid, p, provider, region);
    return;
  }
  std::vector<NativeOpen> &open = p.open[e.vtid];
  if (e.kind == EventKind::NativeBegin) {
    NativeOpen opened{provider, region, {}, e.ts_ns};
    // The innermost frame of this thread that the filters keep (the call tree
    // draws the region there); the row names the Python function below it when
    // that frame is a native callee, which the row names apart.
    size_t top = t ? innermost_visible(t->stack) : kNoFrame;
    if (top != kNoFrame) {
      opened.depth = static_cast<uint32_t>(top);
      opened.frame_start_ns = t->stack[top].start_ns;
      opened.child_ns = t->stack[top].child_ns;
      attribute(t->stack, &opened.by);
    }
    // The thread of the call the region is attributed to: its own, unless below.
    int32_t caller_tid = opened.depth != UINT32_MAX ? e.vtid : -1;
    if (e.aux & 2) {  // a CUDA launch: its kernel or copy runs later, on the device
      int32_t launcher = e.vtid;
      if (opened.depth == UINT32_MAX) {  // a thread without Python frames
        if (blocked.only != nullptr && attribute(blocked.only->stack, &opened.by)) {
          opened.by.how = Attributed::kBlockedCall;
          launcher = blocked.only->vtid;
          caller_tid = launcher;
        } else {
          opened.by.how =
              blocked.count > 1 ? Attributed::kSeveralBlocked : Attributed::kNoBlockedCall;
        }
      }
      p.launches[static_cast<uint32_t>(e.lineno)] = {opened.by, launcher,
                                                     join(output_pid, caller_tid, opened.by)};
    }
    if (e.aux & 1) {
      std::pair<uint64_t, uint64_t> parallel{e.code_id, e.extra};
      if (batch.string(e.str[1]) == "parallel") {
        p.parallel_callers[parallel] = {opened.by, e.vtid};
      } else if (opened.by.caller == kNoCaller && opened.by.via == kNoCaller) {
        // A worker thread (it runs no Python): the call that opened the region.
        auto it = p.parallel_callers.find(parallel);
        if (it != p.parallel_callers.end()) {
          opened.by = it->second.first;
          if (opened.by.caller != kNoCaller || opened.by.via != kNoCaller) {
            opened.opener_tid = it->second.second;
            caller_tid = opened.opener_tid;
          }
        }
      }
    }
    opened.join = join(output_pid, caller_tid, opened.by);
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
    NativeRegionStats &stats = p.regions[{open[i].by, provider, region}];
    ++stats.count;
    stats.total_ns += e.ts_ns >= open[i].start_ns ? e.ts_ns - open[i].start_ns : 0;
    bool logged = build_call_trees_ && t != nullptr && open[i].depth != UINT32_MAX &&
                  region_ended(*t, p, open[i], e.ts_ns);
    uint32_t depth = open[i].depth;
    uint64_t frame_start = open[i].frame_start_ns;
    if (output_) {
      output_->native_region(output_pid, e.vtid, p.label(provider, region), p.domain(provider),
                             open[i].start_ns, e.ts_ns, open[i].opener_tid, open[i].join);
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

void NativeRegions::on_device_activity(const RawEvent &e, const EventBatch &batch,
                                       int64_t output_pid, NativeProcess &p, uint32_t provider,
                                       uint32_t region) {
  // The Python call around the launch with the same correlationId; the activity
  // itself is written later, when CUPTI delivers its buffer, by another thread.
  Launch launch{{}, -1, 0};
  launch.by.how = Attributed::kNoLaunch;
  auto correlation = static_cast<uint32_t>(e.code_id);
  if (auto it = p.launches.find(correlation); it != p.launches.end()) {
    launch = it->second;
    p.launches.erase(it);
  }
  const Attribution &by = launch.by;
  uint64_t start = e.extra;
  uint64_t end = static_cast<uint32_t>(e.lineno) | (static_cast<uint64_t>(e.aux) << 32);
  NativeRegionStats &stats = p.regions[{by, provider, region}];
  ++stats.count;
  stats.total_ns += end > start ? end - start : 0;
  if (output_ && p.gpu_clock && end > start) {
    std::string_view stream = batch.string(e.str[2]);
    uint32_t stream_id = 0;
    std::from_chars(stream.data(), stream.data() + stream.size(), stream_id);
    output_->device_activity(
        output_pid, DeviceActivity{p.label(provider, region), p.domain(provider),
                                   static_cast<uint64_t>(start + p.gpu_to_origin),
                                   static_cast<uint64_t>(end + p.gpu_to_origin),
                                   static_cast<uint32_t>(e.python_thread_id), stream_id, launch.tid,
                                   launch.join});
  }
}

void NativeRegions::finish() {
  for (auto &[key, p] : processes_) {
    for (auto &[vtid, open] : p.open) {
      for (const NativeOpen &o : open) ++p.unmatched[{o.provider, o.region}];
      open.clear();
    }
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

bool NativeRegions::region_ended(ThreadState &t, NativeProcess &p, const NativeOpen &region,
                                 uint64_t ts) {
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

void draw_regions(ThreadState &t, size_t depth, uint32_t node) {
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

}  // namespace pinsight_reader
