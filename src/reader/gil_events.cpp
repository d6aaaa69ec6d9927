#include "gil_events.h"

#include "replay_state.h"

namespace pinsight_reader {
namespace {

void gil_slice(ThreadState &t, ReplayOutput &output, const char *state, uint64_t begin_ns,
               uint64_t end_ns) {
  if (end_ns <= begin_ns) return;
  output.gil_state(t.chrome_pid, t.vtid, state, begin_ns, end_ns);
}

}  // namespace

void gil_event(ThreadState &t, const RawEvent &e, const SymbolTable &symbols,
               ReplayOutput *output) {
  const bool released_event = e.kind == EventKind::GilReleased;
  const uint64_t wait = e.code_id;
  const uint64_t released = e.extra;
  const uint64_t before = released_event
                              ? (static_cast<uint64_t>(static_cast<uint32_t>(e.aux)) << 32) |
                                    static_cast<uint32_t>(e.lineno)
                              : 0;
  GilStats &gil = t.gil;
  if (!gil.seen) {
    gil.seen = true;
    gil.mark_ns = t.first_ns;
  }
  if (released_event) {
    ++gil.releases;
    gil.take_back_wait_ns += wait;
    gil.switch_wait_ns += before;
  } else {
    ++gil.switches;
    gil.switch_wait_ns += wait;
  }
  gil.released_ns += released;

  // The innermost visible frame: a native callee (it released the GIL), and the
  // innermost Python function (the waits are its).
  SymbolId callee = kNoSymbol;
  FunctionStats *python = nullptr;
  bool innermost = true;
  for (auto it = t.stack.rbegin(); it != t.stack.rend(); ++it) {
    if (it->hidden) continue;
    if (symbols[it->symbol].native) {
      if (innermost) callee = it->symbol;
      innermost = false;
      continue;
    }
    python = it->stats;
    break;
  }
  if (python) python->gil_wait_ns += wait + before;
  if (released > 0 || released_event) {
    GilReleaseStats &r = t.gil_releases[callee];
    ++r.count;
    r.released_ns += released;
    if (released_event) r.wait_ns += wait;
  }

  if (!output) return;
  // At the event the GIL is held again: waiting [T - wait, T], released before.
  const uint64_t ts = e.ts_ns;
  uint64_t wait_start = ts > wait ? ts - wait : 0;
  uint64_t released_start = wait_start > released ? wait_start - released : 0;
  uint64_t before_start = released_start > before ? released_start - before : 0;
  if (before_start < gil.mark_ns) before_start = gil.mark_ns;
  if (released_start < gil.mark_ns) released_start = gil.mark_ns;
  if (wait_start < gil.mark_ns) wait_start = gil.mark_ns;
  gil_slice(t, *output, "holding", gil.mark_ns, before_start);
  gil_slice(t, *output, "waiting", before_start, released_start);
  gil_slice(t, *output, "released", released_start, wait_start);
  gil_slice(t, *output, "waiting", wait_start, ts);
  if (ts > gil.mark_ns) gil.mark_ns = ts;
}

void gil_finish(ThreadState &t, ReplayOutput *output) {
  if (!output || !t.gil.seen || !t.process->selected || !t.selected) return;
  gil_slice(t, *output, "holding", t.gil.mark_ns, t.last_ns);
  t.gil.mark_ns = t.last_ns;
}

}  // namespace pinsight_reader
