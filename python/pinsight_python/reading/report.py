"""``pinsight-python report``: where the time went, per process and thread.

:func:`build_report` turns the reader's aggregates into the JSON document
documented in docs/analysis.md (schema ``pinsight-python.report/1``);
:func:`render_text` prints the same document as aligned tables.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .analysis import ORIGINS, ReadFilter, Symbol, TraceData, format_ns, missing_events
from .gil import gil_lines, gil_process_section, gil_thread_section
from .native import native_lines, native_section
from .resources import alloc_lines, alloc_section, import_lines, import_section

if TYPE_CHECKING:
    from .._pinsight_reader import LexgionCounts, ModeChange, ProcessRecord, ThreadRecord

__all__ = ["SCHEMA", "build_report", "render_text"]

SCHEMA = "pinsight-python.report/1"

@dataclass
class FunctionTotal:
    """A function's FunctionStats summed over threads: finished generator instances
    and their lifetimes (first start to final end) included."""

    calls: int = 0
    segments: int = 0
    total_ns: int = 0
    self_ns: int = 0
    exceptions: int = 0
    finished: int = 0
    wall_ns: int = 0


@dataclass
class NativeTotal:
    """A caller -> native callee pair's NativeCallStats summed over threads."""

    calls: int = 0
    total_ns: int = 0
    raised: int = 0


FunctionTotals = Dict[int, FunctionTotal]  # per symbol
NativeTotals = Dict[Tuple[int, int], NativeTotal]  # per (caller, callee)


def _function_totals(threads: Iterable[ThreadRecord]) -> FunctionTotals:
    totals: FunctionTotals = defaultdict(FunctionTotal)
    for thread in threads:
        for f in thread.functions:
            row = totals[f.symbol]
            row.calls += f.calls
            row.segments += f.segments
            row.total_ns += f.total_ns
            row.self_ns += f.self_ns
            row.exceptions += f.exceptions
            row.finished += f.finished
            row.wall_ns += f.wall_ns
    return totals


def _native_totals(threads: Iterable[ThreadRecord]) -> NativeTotals:
    totals: NativeTotals = defaultdict(NativeTotal)
    for thread in threads:
        for n in thread.native_calls:
            row = totals[(n.caller, n.callee)]
            row.calls += n.calls
            row.total_ns += n.total_ns
            row.raised += n.raised
    return totals


def tracing_windows(mode_changes: Iterable[ModeChange]) -> int:
    """The TRACING windows in which caps counted from zero: one, and one more per
    INTROSPECT pause that resumed in TRACING (PInsight's cyclic windows; a reload
    keeps the counts)."""
    return 1 + sum(1 for m in mode_changes if m.reason == "introspect" and m.mode == "TRACING")


def rate_json(counts: LexgionCounts, windows: int = 1) -> Dict[str, Any]:
    """Rate control's counts of one function (lexgion_counts), as the report's "rate";
    `windows`: tracing_windows() of its process."""
    # Counters are per thread: traced calls summed over threads can reach the
    # cap before one thread did; a reached cap is what a user looks for.
    capped = counts.max_num_traces >= 0 and counts.traced >= counts.max_num_traces
    sampled = counts.tracing_rate > 1 or counts.trace_starts_at > 0
    return {
        "traced": counts.traced,
        "seen": counts.seen,
        "seen_is_lower_bound": counts.seen_is_lower_bound,
        "untraced": None if counts.seen_is_lower_bound else counts.seen - counts.traced,
        "capped": capped,
        "sampled": sampled,
        "max_num_traces": _optional(counts.max_num_traces, -1),
        "tracing_rate": counts.tracing_rate,
        "trace_starts_at": counts.trace_starts_at,
        "section": counts.section,
        "windows": windows,
    }


def _per_windows(rate: Dict[str, Any]) -> str:
    # A cap counts from zero in each window: the traced calls add up past it.
    return f" in each window ({rate['windows']:,} windows)" if rate["windows"] > 1 else ""


def rate_text(rate: Dict[str, Any]) -> str:
    """"capped 10/>=10", "sampled 10/100", "traced 5/5": traced of seen calls."""
    seen = f"{'>=' if rate['seen_is_lower_bound'] else ''}{rate['seen']:,}"
    kind = "capped" if rate["capped"] else "sampled" if rate["sampled"] else "traced"
    windows = (f" ({rate['max_num_traces']:,} per window, {rate['windows']:,} windows)"
               if rate["capped"] and rate["windows"] > 1 else "")
    return f"{kind} {rate['traced']:,}/{seen}{windows}"


def _function_rows(
    symbols: Sequence[Symbol], totals: FunctionTotals, top: int,
    rates: Optional[Dict[int, Dict[str, Any]]] = None,
) -> List[Dict[str, Any]]:
    def row(symbol: int) -> Dict[str, Any]:
        t = totals[symbol]
        out = symbols[symbol].as_json()
        out.update(calls=t.calls, segments=t.segments, total_ns=t.total_ns, self_ns=t.self_ns,
                   exceptions=t.exceptions, module=symbols[symbol].module or None,
                   origin=symbols[symbol].origin, instances_finished=t.finished,
                   wall_ns=t.wall_ns if t.finished else None,
                   rate=(rates or {}).get(symbol))
        return out

    def name_key(symbol: int) -> Tuple[str, str, int]:
        s = symbols[symbol]
        return (s.qualname, s.filename, s.lineno)

    chosen = list(totals)
    if top > 0:
        by_self = sorted(chosen, key=lambda s: (-totals[s].self_ns, name_key(s)))[:top]
        by_total = sorted(chosen, key=lambda s: (-totals[s].total_ns, name_key(s)))[:top]
        chosen = list(set(by_self) | set(by_total))
    chosen.sort(key=lambda s: (-totals[s].self_ns, -totals[s].total_ns, name_key(s)))
    return [row(s) for s in chosen]


def _module_rows(symbols: Sequence[Symbol], totals: FunctionTotals) -> List[Dict[str, Any]]:
    """Self time and calls per module: the program's own modules first, then
    installed libraries, the standard library, importlib's frozen modules and
    native code; by self time within each."""
    modules: Dict[Tuple[str, str], List[int]] = defaultdict(lambda: [0, 0, 0])
    for symbol, t in totals.items():
        s = symbols[symbol]
        row = modules[(s.origin, "" if s.native else s.module)]
        row[0] += t.self_ns
        row[1] += t.calls
        row[2] += 1
    rank = {origin: i for i, origin in enumerate(ORIGINS)}
    keys = sorted(modules, key=lambda k: (rank.get(k[0], len(ORIGINS)), -modules[k][0], k[1]))
    return [{"module": module or None, "origin": origin, "self_ns": modules[(origin, module)][0],
             "calls": modules[(origin, module)][1], "functions": modules[(origin, module)][2]}
            for origin, module in keys]


def _caller_json(symbol: Symbol) -> Dict[str, Any]:
    out = symbol.as_json()
    del out["kind"]
    return out


def _native_rows(symbols: Sequence[Symbol], totals: NativeTotals, top: int) -> List[Dict[str, Any]]:
    keys = sorted(totals, key=lambda k: (-totals[k].total_ns, -totals[k].calls,
                                         symbols[k[0]].qualname, symbols[k[1]].qualname))
    if top > 0:
        keys = keys[:top]
    return [
        {
            "caller": _caller_json(symbols[caller]),
            "callee": symbols[callee].qualname,
            "calls": totals[(caller, callee)].calls,
            "total_ns": totals[(caller, callee)].total_ns,
            "raised": totals[(caller, callee)].raised,
        }
        for caller, callee in keys
    ]


def _generator_rows(symbols: Sequence[Symbol], totals: FunctionTotals, top: int
                    ) -> List[Dict[str, Any]]:
    """Generators, coroutines and async generators by wall time: each finished
    instance from its first start to its final end, suspensions included."""
    rows = []
    for symbol, t in totals.items():
        if t.finished:
            out = _caller_json(symbols[symbol])
            out.update(instances_started=t.calls, instances_finished=t.finished,
                       segments=t.segments, running_ns=t.total_ns, wall_ns=t.wall_ns,
                       mean_wall_ns=t.wall_ns // t.finished)
            rows.append(out)
    rows.sort(key=lambda r: (-r["wall_ns"], r["qualname"], r["filename"] or ""))
    return rows[:top] if top > 0 else rows


def _exception_rows(symbols: Sequence[Symbol], functions: FunctionTotals,
                    natives: NativeTotals, top: int) -> List[Dict[str, Any]]:
    rows: List[Dict[str, Any]] = []
    for symbol, f in functions.items():
        if f.exceptions and not symbols[symbol].native:
            rows.append({"kind": "unwind", "function": _caller_json(symbols[symbol]),
                         "count": f.exceptions})
    for (caller, callee), n in natives.items():
        if n.raised:
            rows.append({"kind": "raise", "caller": _caller_json(symbols[caller]),
                         "callee": symbols[callee].qualname, "count": n.raised})

    def key(row: Dict[str, Any]) -> Tuple[int, str, str]:
        where = row.get("function") or row["caller"]
        return (-row["count"], row["kind"], f"{where['qualname']} {row.get('callee', '')}")

    rows.sort(key=key)
    return rows[:top] if top > 0 else rows


def _unbalanced(threads: Iterable[ThreadRecord]) -> Dict[str, int]:
    out = {"ends_without_begin": 0, "implicitly_closed": 0, "open_at_end": 0, "stepped_aside": 0}
    for thread in threads:
        a = thread.anomalies
        out["ends_without_begin"] += a.ends_without_begin
        out["implicitly_closed"] += a.implicitly_closed
        out["open_at_end"] += a.open_at_end
        out["stepped_aside"] += a.stepped_aside
    return out


def _activity(symbols: Sequence[Symbol], threads: List[ThreadRecord], top: int,
              rates: Optional[Dict[int, Dict[str, Any]]] = None) -> Dict[str, Any]:
    functions = _function_totals(threads)
    for symbol in [s for s in functions if symbols[s].is_import]:
        del functions[symbol]  # in the imports section
    natives = _native_totals(threads)
    return {
        "imports": import_section(symbols, threads, top),
        "modules": _module_rows(symbols, functions),
        "functions": _function_rows(symbols, functions, top, rates),
        "functions_total": len(functions),
        "native_calls": _native_rows(symbols, natives, top),
        "native_calls_total": len(natives),
        "generators": _generator_rows(symbols, functions, top),
        "exceptions": _exception_rows(symbols, functions, natives, top),
        "unbalanced": _unbalanced(threads),
    }


def _optional(value: Any, absent: Any) -> Any:
    return None if value == absent else value


# Native callables of mpi4py are named "mpi4py.MPI.Comm.allreduce" and the like.
MPI_PREFIX = "mpi4py."


def _rank_row(symbols: Sequence[Symbol], proc: ProcessRecord, entry: Dict[str, Any]
              ) -> Dict[str, Any]:
    """One MPI rank's line: who it is and what it did, from all its functions."""
    totals = _function_totals(proc.threads)
    python_calls = native_calls = mpi_calls = mpi_ns = 0
    for symbol, t in totals.items():
        if not symbols[symbol].native:
            python_calls += t.calls
            continue
        native_calls += t.calls
        if symbols[symbol].qualname.startswith(MPI_PREFIX):
            mpi_calls += t.calls
            mpi_ns += t.total_ns
    top = None
    if totals:
        best = min(totals, key=lambda s: (-totals[s].self_ns, symbols[s].qualname,
                                          symbols[s].filename))
        top = symbols[best].as_json()
        top.update(calls=totals[best].calls, self_ns=totals[best].self_ns)
    threads = entry["threads"]
    return {
        "mpi_rank": entry["mpi_rank"],
        "mpi_size": entry["mpi_size"],
        "vpid": entry["vpid"],
        "host": entry["hostname"] or entry["host"],
        "label": entry["label"],
        "threads": len(threads),
        "events": entry["events"],
        "begin_ns": min((t["begin_ns"] for t in threads), default=None),
        "end_ns": max((t["end_ns"] for t in threads), default=None),
        "python_calls": python_calls,
        "native_calls": native_calls,
        "mpi4py_calls": mpi_calls,
        "mpi4py_ns": mpi_ns,
        "top_function": top,
    }


def _mpi_summary(rows: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The ranks found, or None when no process_info carried an MPI rank."""
    if not rows:
        return None
    sizes = {r["mpi_size"] for r in rows}
    size = sizes.pop() if len(sizes) == 1 else None
    seen: Dict[int, int] = defaultdict(int)
    for r in rows:
        seen[r["mpi_rank"]] += 1
    missing = [] if size is None else [r for r in range(size) if r not in seen]
    return {
        "size": size,
        "hosts": sorted({r["host"] for r in rows if r["host"]}),
        "missing_ranks": missing,
        "repeated_ranks": sorted(r for r, n in seen.items() if n > 1),
        "ranks": rows,
    }


def _mpi_warning(mpi: Dict[str, Any]) -> Optional[str]:
    missing = mpi["missing_ranks"]
    if not missing:
        return None
    present = sorted({r["mpi_rank"] for r in mpi["ranks"]})

    def ranks(numbers: List[int]) -> str:
        return f"{'rank' if len(numbers) == 1 else 'ranks'} {_rank_list(numbers)}"

    return (
        f"the MPI job has {mpi['size']:,} ranks but the trace holds only {ranks(present)}: "
        f"{ranks(missing)} {'is' if len(missing) == 1 else 'are'} missing (the ranks of "
        "other nodes are in those nodes' traces: see docs/mpi.md)"
    )


def _rank_list(ranks: Sequence[int], limit: int = 8) -> str:
    """Ranks as "0, 2-5, 7": consecutive ones as a range, at most `limit` ranges."""
    runs: List[List[int]] = []
    for r in ranks:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    text = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        text.append("...")
    return ", ".join(text)


def build_report(trace: TraceData, top: int = 15) -> Dict[str, Any]:
    """The report as a JSON-ready dict (schema in docs/analysis.md)."""
    raw = trace.raw
    symbols = trace.symbols
    processes = []
    rank_rows: List[Dict[str, Any]] = []
    first = raw.first_ns
    for proc in trace.processes:
        # Rate control's counts are the process's (every thread's calls).
        windows = tracing_windows(proc.mode_changes)
        rates = {c.symbol: rate_json(c, windows) for c in proc.rate_controlled}
        threads = []
        for thread in proc.threads:
            entry = {
                "vtid": thread.vtid,
                "python_thread_id": _optional(thread.python_thread_id, -1),
                "label": thread.label,
                "events": thread.events,
                "begin_ns": thread.first_ns,
                "end_ns": thread.last_ns,
            }
            entry.update(_activity(symbols, [thread], top, rates))
            entry["gil"] = gil_thread_section(symbols, thread, top)
            threads.append(entry)
        has_info = proc.has_info
        entry = {
            "vpid": proc.vpid,
            "host": proc.host or None,
            "label": proc.label,
            "mpi_rank": _optional(proc.mpi_rank, -1),
            "mpi_size": _optional(proc.mpi_size, -1),
            "pid": proc.pid if has_info else None,
            "hostname": proc.hostname if has_info else None,
            "argv": proc.argv if has_info else None,
            "python_version": proc.python_version if has_info else None,
            "backend": proc.backend if has_info else None,
            "procname": proc.procname or None,
            "events": proc.events,
        }
        entry.update(_activity(symbols, proc.threads, top, rates))
        entry["configs"] = [
            {"ts_ns": c.ts_ns, "offset_ns": c.ts_ns - first, "path": c.path or None,
             "generation": c.generation}
            for c in proc.configs
        ]
        entry["config"] = entry["configs"][-1] if entry["configs"] else None
        entry["mode_changes"] = [
            {"ts_ns": m.ts_ns, "offset_ns": m.ts_ns - first, "mode": m.mode, "reason": m.reason,
             "generation": m.generation}
            for m in proc.mode_changes
        ]
        entry["rate_controlled"] = sorted(
            ({**symbols[symbol].as_json(), "rate": rate} for symbol, rate in rates.items()),
            key=lambda r: (r["qualname"], r["filename"] or "", r["lineno"] or 0))
        entry["allocations"] = alloc_section(symbols, proc.allocations, top)
        entry["gil"] = gil_process_section(symbols, proc.threads, top)
        entry["threads"] = threads
        processes.append(entry)
        if entry["mpi_rank"] is not None:
            rank_rows.append(_rank_row(symbols, proc, entry))
    mpi = _mpi_summary(rank_rows)
    inclusive = {symbol: row.total_ns for symbol, row in _function_totals(
        t for proc in trace.processes for t in proc.threads).items()}
    native = native_section(trace, _caller_json, inclusive, top)

    warnings = []
    if raw.discarded_events:
        warnings.append(
            f"LTTng discarded {raw.discarded_events:,} events "
            f"({raw.discard_records:,} times): timings near them are unreliable, and "
            "frames whose begin or end was lost show up as unbalanced; record with "
            "larger or more sub-buffers"
        )
    warnings += missing_events(raw)
    for line in trace.unrecorded_processes():
        warnings.append(
            f"process {line} of the run recorded no events (it could not join the "
            "session in time: its functions are missing from this report)"
        )
    if raw.discarded_packets:
        warnings.append(
            f"LTTng discarded {raw.discarded_packets:,} packets: timings near them "
            "are unreliable"
        )
    if raw.events == 0:
        warnings.append(
            "the trace holds no python_pinsight_lttng_ust events "
            f"({raw.other_events:,} events of other providers)"
        )
    mpi_warning = _mpi_warning(mpi) if mpi is not None else None
    if mpi_warning:
        warnings.append(mpi_warning)
    if trace.filters and raw.events and not processes:
        warnings.append(f"no process or thread of the trace matches {trace.filters.describe()}")
    filters = trace.filters
    return {
        "schema": SCHEMA,
        "trace": ", ".join(str(p) for p in trace.paths),
        "trace_dirs": [str(d) for d in trace.trace_dirs],
        "events": raw.events,
        "other_events": raw.other_events,
        "begin_ns": first,
        "end_ns": raw.last_ns,
        "duration_ns": trace.duration_ns,
        "top": top,
        "filters": {
            "pids": list(filters.pids), "ranks": list(filters.ranks),
            "threads": list(filters.threads), "modules": list(filters.modules),
            "excludes": list(filters.excludes), "ignore_frozen": filters.ignore_frozen,
        },
        "event_counts": dict(raw.event_counts),
        "control_threads": raw.control_threads,
        "discarded": {
            "events": raw.discarded_events,
            "packets": raw.discarded_packets,
            "records": raw.discard_records,
            "ranges": [
                {
                    "count": d.discarded,
                    "packets": d.packets,
                    "begin_ns": d.begin_ns or None,
                    "end_ns": d.end_ns,
                    "stream_id": d.stream_id,
                }
                for d in raw.discards
            ],
        },
        "missing_events": [
            {"vpid": m.vpid, "vtid": m.vtid, "python_thread_id": m.python_thread_id,
             "after_ns": m.after_ns, "count": m.missing or None}
            for m in raw.missing_events
        ],
        "warnings": warnings,
        "mpi": mpi,
        "processes": processes,
        **native,
    }


# ----------------------------------------------------------------------------
# Text rendering


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]
) -> List[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
        return ("  " + "  ".join(parts)).rstrip()

    return [line(headers)] + [line(row) for row in rows]


def _name_and_location(entry: Dict[str, Any]) -> Tuple[str, str]:
    if entry.get("filename") is None:
        return entry["qualname"], "[native]"
    lineno = entry["lineno"]
    symbol = Symbol(False, entry["qualname"], entry["filename"], -1 if lineno is None else lineno)
    return entry["qualname"], symbol.short_location


def _where(entry: Dict[str, Any]) -> str:
    name, location = _name_and_location(entry)
    return f"{name} ({location})"


def _plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def _function_table(rows: List[Dict[str, Any]], key: str, top: int) -> List[str]:
    ordered = sorted(rows, key=lambda r: -r[key])
    if top > 0:
        ordered = ordered[:top]
    # Rate-controlled rows say how many of their calls were traced ("capped
    # 10/>=10": traced 10 of at least 10 seen); a column only when one has it.
    rated = any(r.get("rate") for r in ordered)
    cells = [
        [format_ns(r["self_ns"]), format_ns(r["total_ns"]), f"{r['calls']:,}",
         *([rate_text(r["rate"]) if r.get("rate") else ""] if rated else []),
         f"{r['exceptions']:,}" if r["exceptions"] else "", *_name_and_location(r)]
        for r in ordered
    ]
    headers = ["self", "total", "calls", *(["rate control"] if rated else []), "exc", "function",
               "location"]
    right = [True, True, True, *([False] if rated else []), True, False, False]
    return _table(headers, cells, right)


def _rate_lines(proc: Dict[str, Any]) -> List[str]:
    """The configuration in force, rate control's counts, the mode changes."""
    lines: List[str] = []
    for config in proc.get("configs", []):
        path = config["path"] or "built-in defaults (no configuration file)"
        lines.append(f"Configuration: {path} (generation {config['generation']}, "
                     f"at +{format_ns(config['offset_ns'])})")
    rated = proc.get("rate_controlled", [])
    if rated:
        lines.append("Rate control (calls traced of calls seen; the self time of their callers "
                     "includes the untraced calls):")
        for row in rated:
            rate = row["rate"]
            if rate["seen_is_lower_bound"]:
                seen = f"of at least {rate['seen']:,} calls; later calls not counted"
            else:
                seen = f"of {rate['seen']:,} calls"
            settings = [f"max_num_traces = {rate['max_num_traces']}"
                        if rate["max_num_traces"] is not None else ""]
            if rate["tracing_rate"] > 1:
                settings.append(f"tracing_rate = {rate['tracing_rate']}")
            if rate["trace_starts_at"] > 0:
                settings.append(f"trace_starts_at = {rate['trace_starts_at']}")
            where = ", ".join(s for s in [f"[{rate['section']}]" if rate["section"] else "",
                                          *settings] if s)
            kind = ("capped" + _per_windows(rate) if rate["capped"]
                    else "sampled" if rate["sampled"] else "all traced")
            lines.append(f"  {_where(row)}: {kind}, traced {rate['traced']:,} {seen} ({where})")
    changes = proc.get("mode_changes", [])
    if changes:
        lines.append("Mode changes:")
        cells = [[f"+{format_ns(m['offset_ns'])}", m["mode"], m["reason"], str(m["generation"])]
                 for m in changes]
        lines += _table(["at", "mode", "reason", "config generation"], cells,
                        [True, False, False, True])
        if any(m["mode"] != "TRACING" for m in changes):
            lines.append("Functions are traced only while the mode is TRACING: calls made "
                         "under another mode are not in this report.")
    return lines


def _module_table(section: Dict[str, Any], top: int) -> List[str]:
    modules = section["modules"]
    shown = modules[:top] if top > 0 else modules
    if len(modules) < 2:
        return []
    more = f", {len(shown)} of {len(modules):,}" if len(shown) < len(modules) else ""
    lines = [f"Self time by module (the program's own first{more}):"]
    cells = [[format_ns(m["self_ns"]), f"{m['calls']:,}", f"{m['functions']:,}",
              m["module"] or ("[native]" if m["origin"] == "native" else "?"), m["origin"]]
             for m in shown]
    lines += _table(["self", "calls", "functions", "module", "origin"], cells,
                    [True, True, True, False, False])
    return lines


def _generator_lines(rows: List[Dict[str, Any]]) -> List[str]:
    if not rows:
        return []
    lines = ["Generators and coroutines, first start to final end (running: the time in their "
             "segments):"]
    cells = [[format_ns(r["wall_ns"]), format_ns(r["mean_wall_ns"]), format_ns(r["running_ns"]),
              f"{r['instances_finished']:,}/{r['instances_started']:,}", f"{r['segments']:,}",
              *_name_and_location(r)] for r in rows]
    return lines + _table(["wall", "mean wall", "running", "finished", "segments", "function",
                           "location"], cells, [True, True, True, True, True, False, False])


def _activity_lines(section: Dict[str, Any], top: int) -> List[str]:
    lines: List[str] = _module_table(section, top)
    functions = section["functions"]
    if functions:
        shown = min(len(functions), top) if top > 0 else len(functions)
        of = f" (of {section['functions_total']:,})"
        lines.append(f"Top {shown} functions by self time{of}:")
        lines += _function_table(functions, "self_ns", top)
        lines.append(f"Top {shown} functions by total time{of}:")
        lines += _function_table(functions, "total_ns", top)
    natives = section["native_calls"]
    if natives:
        lines.append(
            f"Native calls by Python functions ({len(natives)} of "
            f"{section['native_calls_total']:,} caller -> callee pairs):"
        )
        cells = [
            [f"{n['calls']:,}", format_ns(n["total_ns"]), f"{n['raised']:,}" if n["raised"] else "",
             _where(n["caller"]), n["callee"]]
            for n in natives
        ]
        lines += _table(["calls", "total", "raised", "caller", "-> callee"], cells,
                        [True, True, True, False, False])
    lines += _generator_lines(section["generators"])
    exceptions = section["exceptions"]
    if exceptions:
        lines.append("Exceptions (frames left by unwind; native calls that raised):")
        cells = []
        for e in exceptions:
            if e["kind"] == "unwind":
                where = _where(e["function"])
            else:
                where = f"{_where(e['caller'])} -> {e['callee']}"
            cells.append([f"{e['count']:,}", e["kind"], where])
        lines += _table(["count", "kind", "where"], cells, [True, False, False])
    lines += import_lines(section["imports"])
    return lines + _unbalanced_lines(section["unbalanced"])


def _unbalanced_lines(unbalanced: Dict[str, int]) -> List[str]:
    notes = []
    if unbalanced["ends_without_begin"]:
        notes.append(_plural(unbalanced["ends_without_begin"], "end", "ends")
                     + " without a begin (frames already running when tracing started)")
    if unbalanced["open_at_end"]:
        notes.append(_plural(unbalanced["open_at_end"], "frame", "frames")
                     + " open at trace end (closed at the thread's last event)")
    if unbalanced["stepped_aside"]:
        notes.append(_plural(unbalanced["stepped_aside"], "frame", "frames")
                     + " open when tracing stepped aside for a debugger (closed there)")
    if unbalanced["implicitly_closed"]:
        notes.append(_plural(unbalanced["implicitly_closed"], "frame", "frames")
                     + " closed by an outer frame's end (their own end was lost)")
    return ["Unbalanced input: " + "; ".join(notes) + "."] if notes else []


def _has_activity(section: Dict[str, Any]) -> bool:
    return bool(section["functions"] or section["native_calls"] or section["imports"]["modules"]
                or any(section["unbalanced"].values()))


def _process_title(proc: Dict[str, Any]) -> str:
    details = []
    if proc["mpi_rank"] is not None and f"pid {proc['vpid']}" not in proc["label"]:
        details.append(f"pid {proc['vpid']}")
    # A process outside MPI is labelled by its command ("python -c ... (pid N)"): the
    # command again only where the label had to shorten it.
    command = proc["argv"] or proc["procname"]
    shown = proc["label"].rsplit(" (pid ", 1)[0]
    if command and (proc["mpi_rank"] is not None or shown.endswith("...")):
        details.append(command)
    if proc["hostname"]:
        details.append(f"on {proc['hostname']}")
    if proc["python_version"]:
        details.append(f"Python {proc['python_version']}")
    if proc["backend"]:
        details.append(proc["backend"])
    suffix = f" ({', '.join(details)})" if details else ""
    return f"=== {proc['label']}{suffix}: {proc['events']:,} events ==="


def _mpi_lines(mpi: Dict[str, Any]) -> List[str]:
    ranks = mpi["ranks"]
    hosts = mpi["hosts"]
    size = f" of {mpi['size']:,}" if mpi["size"] is not None else ""
    where = f" on {_plural(len(hosts), 'host', 'hosts')}" if hosts else ""
    if 0 < len(hosts) <= 4:
        where += f" ({', '.join(hosts)})"
    lines = [f"MPI ranks: {_plural(len(ranks), 'process', 'processes')}{size}{where}"]
    cells = []
    for r in ranks:
        top = r["top_function"]
        top_text = f"{top['name']} ({format_ns(top['self_ns'])})" if top else ""
        cells.append([
            str(r["mpi_rank"]), str(r["vpid"]), r["host"] or "", f"{r['threads']:,}",
            f"{r['events']:,}", format_ns(r["end_ns"] - r["begin_ns"]) if r["threads"] else "",
            f"{r['python_calls']:,}", f"{r['native_calls']:,}",
            f"{r['mpi4py_calls']:,}", format_ns(r["mpi4py_ns"]), top_text,
        ])
    lines += _table(
        ["rank", "pid", "host", "threads", "events", "span", "python calls", "native calls",
         "mpi4py calls", "in mpi4py", "top function by self time"],
        cells, [True, True, False, True, True, True, True, True, True, True, False])
    if mpi["repeated_ranks"]:
        repeated = mpi["repeated_ranks"]
        lines.append(
            f"{'Rank' if len(repeated) == 1 else 'Ranks'} {_rank_list(repeated)} "
            f"{'appears' if len(repeated) == 1 else 'appear'} in several processes: "
            "children of a rank inherit its launcher's variables, or several jobs ran "
            "during the session; the sections below name them by pid."
        )
    return lines


def _filter_text(filters: Dict[str, Any]) -> str:
    fields: Dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value
                              for key, value in filters.items()}
    return ReadFilter(**fields).describe()


def _process_lines(proc: Dict[str, Any], top: int) -> List[str]:
    lines = ["", _process_title(proc)]
    rate = _rate_lines(proc)
    if rate:
        lines += ["", *rate]
    if proc.get("gil"):  # first: where each thread's time went (docs/analysis.md)
        lines += ["", *gil_lines(proc["gil"])]
    active = [t for t in proc["threads"] if _has_activity(t)]
    idle = [t for t in proc["threads"] if not _has_activity(t)]
    if len(active) > 1:
        lines += ["", f"--- all {len(active)} threads ---"]
        lines += _activity_lines(proc, top)
    for thread in active:
        span = format_ns(thread["end_ns"] - thread["begin_ns"])
        lines += ["", f"--- {thread['label']}: {thread['events']:,} events over {span} ---"]
        lines += _activity_lines(thread, top)
        if thread.get("gil") and len(active) > 1:
            lines += gil_lines(thread["gil"], threads=False)
    if idle:
        labels = ", ".join(t["label"] for t in idle)
        lines += ["", f"Threads without function events: {labels}"]
    allocations = alloc_lines(proc["allocations"])
    if allocations:
        lines += ["", *allocations]
    return lines


def render_text(report: Dict[str, Any]) -> str:
    top = int(report["top"])
    threads = sum(len(p["threads"]) for p in report["processes"])
    lines = [
        f"Trace {report['trace']}",
        f"  {report['events']:,} events over {format_ns(report['duration_ns'])}, "
        f"{len(report['processes'])} process(es), {threads} thread(s)",
    ]
    if report["other_events"]:
        lines.append(f"  ({report['other_events']:,} events of other providers ignored)")
    shown = _filter_text(report["filters"])
    if shown:
        lines.append(f"  showing only: {shown}")
    for warning in report["warnings"]:
        lines += ["", f"WARNING: {warning}."]
    if report.get("mpi"):
        lines += ["", *_mpi_lines(report["mpi"])]
    for proc in report["processes"]:
        lines += _process_lines(proc, top)
    native = native_lines(report)
    if native:
        lines += ["", *native]
    return "\n".join(lines) + "\n"
