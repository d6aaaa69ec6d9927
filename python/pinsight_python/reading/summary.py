"""The short summary ``pinsight-python trace`` prints when the command ends.

Computed by the compiled trace reader (``_pinsight_reader``, the one behind
``report``), so "calls" means what it means there (a function's starts, not its
generator resumes), our control thread is not counted as a thread of the
program, and a trace of tens of millions of events is read at babeltrace2's
own decoding speed, in bounded memory, with a progress bar on a terminal.
"""

from __future__ import annotations

import os
import shlex
from collections import defaultdict
from typing import Any, Dict, List, Tuple

from .analysis import (
    ORIGINS,
    TraceData,
    TraceNotFoundError,
    TraceReadError,
    format_ns,
    missing_events,
    read_trace,
)
from .damage import damage_lines
from .native import display_name
from .rates import rate_json, rate_text, tracing_windows

__all__ = ["summarize", "summary_lines"]

TOP = 5
ORIGIN_TITLES = {
    "program": "the program's modules",
    "library": "libraries",
    "stdlib": "the standard library",
    "frozen": "the import machinery (frozen)",
    "unknown": "other code",
    "native": "native calls",
}


def summary_lines(trace: TraceData, top: int = TOP) -> List[str]:
    """The summary of a trace already read."""
    raw = trace.raw
    kinds = ", ".join(f"{name} {n:,}" for name, n in sorted(raw.event_counts.items()) if n)
    threads = sum(len(p.threads) for p in trace.processes)
    discarded = raw.discarded_events
    lines = []
    if discarded:
        # First: every figure below is short of these events.
        lines.append(
            f"WARNING: LTTng discarded {discarded:,} events: its buffers overflowed and the "
            "trace has gaps (functions cut short, timings too low); run again with more "
            "buffer: pinsight-python trace --num-subbuf 32 (or --subbuf-size 8M)"
        )
    lines += [f"WARNING: {line}" for line in damage_lines(raw) + missing_events(raw)]
    lines += [
        f"events: {raw.events:,}" + (f" ({kinds})" if kinds else ""),
        f"discarded events: {discarded:,}",
        f"processes: {len(trace.processes)}, threads: {threads}, "
        f"time span: {format_ns(trace.duration_ns)}"
        # Threads run at once: their self times add up past the span.
        + (" (self times below are summed over threads)" if threads > 1 else ""),
    ]
    # Per function over every thread: calls (starts) and self time.
    calls: Dict[int, int] = defaultdict(int)
    modules: Dict[Tuple[str, str], int] = defaultdict(int)
    rated = _rate_controlled(trace)
    for proc in trace.processes:
        for thread in proc.threads:
            for f in thread.functions:
                s = trace.symbols[f.symbol]
                calls[f.symbol] += f.calls
                modules[(s.origin, "" if s.native else s.module or s.filename)] += f.self_ns
    # Self time per module, the program's own first, then libraries, the
    # standard library...: one line per kind of code, its top modules.
    for origin in ORIGINS:
        names = sorted((m for o, m in modules if o == origin), key=lambda m: -modules[(origin, m)])
        if not names:
            continue
        shown = ", ".join(f"{m or '?'} {format_ns(modules[(origin, m)])}" for m in names[:top])
        more = f" (+{len(names) - top:,} more)" if len(names) > top else ""
        total = format_ns(sum(modules[(origin, m)] for m in names))
        detail = "" if origin == "native" else f": {shown}{more}"
        lines.append(f"self time in {ORIGIN_TITLES[origin]}: {total}{detail}")
    own = [s for s in calls if trace.symbols[s].origin == "program" and calls[s]]
    others = [s for s in calls if trace.symbols[s].origin != "program" and calls[s]]
    # The program's own functions first; library and standard-library ones after.
    for title, chosen in (("functions", own), ("other functions", others)):
        if not chosen:
            continue
        best = sorted(chosen, key=lambda s: (-calls[s], trace.symbols[s].qualname))[:top]
        listed = ", ".join(
            f"{trace.symbols[s].qualname} ({calls[s]:,}"
            + (f"; {rate_text(rated[s])}" if s in rated else "") + ")"
            for s in best)
        lines.append(f"top {title} by calls: {listed}")
    lines += _rate_lines(trace, rated, top)
    lines += _native_lines(trace, top)
    lines += _gil_lines(trace, top)
    lines.append("details: pinsight-python report " + shlex.quote(str(trace.path)))
    return lines


def _rate_controlled(trace: TraceData) -> Dict[int, Dict[str, Any]]:
    """Rate control: traced of seen calls per function, summed over processes."""
    rated: Dict[int, Dict[str, Any]] = {}
    for proc in trace.processes:
        windows = tracing_windows(proc.mode_changes)
        for counts in proc.rate_controlled:
            rate = rate_json(counts, windows)
            earlier = rated.get(counts.symbol)
            if earlier is not None:
                for key in ("traced", "seen"):
                    rate[key] += earlier[key]
                rate["windows"] = max(rate["windows"], earlier["windows"])
                for key in ("seen_is_lower_bound", "capped", "sampled"):
                    rate[key] = rate[key] or earlier[key]
            rated[counts.symbol] = rate
    return rated


def _rate_lines(trace: TraceData, rated: Dict[int, Dict[str, Any]], top: int) -> List[str]:
    """What rate control left out, and the mode changes after activation."""
    lines = []
    if rated:
        lines.append("rate control: calls above are the traced ones ('capped 10/>=10': traced "
                     "10 of at least 10 seen); the self time of their callers includes the "
                     "untraced calls")
    changes = [m for proc in trace.processes for m in proc.mode_changes if m.reason != "activate"]
    if changes:
        shown = ", ".join(f"{m.mode} at +{format_ns(m.ts_ns - trace.raw.first_ns)} ({m.reason})"
                          for m in changes[:top])
        more = f" (+{len(changes) - top:,} more)" if len(changes) > top else ""
        lines.append(f"mode changes: {shown}{more}")
    return lines


def _native_lines(trace: TraceData, top: int) -> List[str]:
    """The heaviest native regions (PInsight's OpenMP, MPI...) and their Python callers."""
    totals: Dict[Tuple[int, str, str], int] = defaultdict(int)
    labels = trace.raw.native_labels
    demangled = set()
    for r in trace.raw.native:
        totals[(r.caller, labels.get(r.domain, r.domain), r.region)] += r.total_ns
        if r.mangled is not None:
            demangled.add(r.region)
    if not totals:
        return []
    best = sorted(totals, key=lambda k: -totals[k])[:top]
    listed = ", ".join(
        f"[{domain}] {display_name(region, region in demangled)} "
        f"{format_ns(totals[(caller, domain, region)])} under "
        + (trace.symbols[caller].qualname if caller >= 0 else "no Python caller")
        for caller, domain, region in best)
    return [f"native time by Python caller: {listed}"]


def _gil_lines(trace: TraceData, top: int) -> List[str]:
    """events = gil: the threads that waited longest for the GIL, as a share of their time."""
    rows = []
    for proc in trace.processes:
        for thread in proc.threads:
            gil = thread.gil
            if not gil:
                continue
            wall = max(1, thread.last_ns - thread.first_ns)
            wait = gil.switch_wait_ns + gil.take_back_wait_ns
            rows.append((wait, wall, gil.released_ns, thread.label))
    if not rows:
        return []
    rows.sort(key=lambda r: (-r[0], r[3]))
    listed = ", ".join(
        f"{label} waited {format_ns(wait)} ({100 * wait / wall:.0f}%), "
        f"released {format_ns(released)}"
        for wait, wall, released, label in rows[:top])
    return [f"GIL: {listed}"]


def summarize(trace_dir: os.PathLike[str] | str, progress: str = "auto") -> List[str]:
    """Reads the trace under ``trace_dir`` and returns the summary's lines; a
    trace that cannot be read gives one line saying why."""
    try:
        trace = read_trace(trace_dir, call_trees=False, progress=progress,
                           progress_label="summarizing the trace")
    except TraceNotFoundError:
        return ["(no summary: the trace is empty: no traced Python process ran)"]
    except TraceReadError as error:
        return [f"(no summary: {error})"]
    return summary_lines(trace)

