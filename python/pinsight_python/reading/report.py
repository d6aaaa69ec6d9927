"""``pinsight-python report``: where the time went, per process and thread.

:func:`build_report` turns the reader's aggregates into the JSON document
documented in docs/analysis.md (schema ``pinsight-python.report/1``);
:func:`render_text` prints the same document as aligned tables. Its sections
are modules of their own, each with its JSON and its text: ``mpi`` (the ranks),
``rates`` (rate control, the configuration, mode changes), ``native``, ``gil``
and ``resources`` (imports, allocations).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .analysis import ORIGINS, ReadFilter, Symbol, TraceData, format_ns, missing_events
from .damage import damage_lines, damaged_files
from .dumps import dump_lines, dump_section
from .gil import gil_lines, gil_process_section, gil_thread_section
from .mpi import mpi_lines, mpi_summary, mpi_warning, rank_row
from .native import native_lines, native_section
from .rates import rate_json, rate_lines, rate_text, tracing_windows
from .resources import alloc_lines, alloc_section, import_lines, import_section
from .tables import function_text, name_and_location, plural, table
from .tasks import task_lines, task_section
from .totals import FunctionTotals, NativeTotals, function_totals, native_totals

if TYPE_CHECKING:
    from .._pinsight_reader import ThreadRecord

__all__ = ["SCHEMA", "build_report", "render_text"]

SCHEMA = "pinsight-python.report/1"

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
    out = {"ends_without_begin": 0, "implicitly_closed": 0, "open_at_end": 0, "stepped_aside": 0,
           "cut_by_damage": 0}
    for thread in threads:
        a = thread.anomalies
        out["ends_without_begin"] += a.ends_without_begin
        out["implicitly_closed"] += a.implicitly_closed
        out["open_at_end"] += a.open_at_end
        out["stepped_aside"] += a.stepped_aside
        out["cut_by_damage"] += a.cut_by_damage
    return out


def _activity(symbols: Sequence[Symbol], threads: List[ThreadRecord], top: int,
              rates: Optional[Dict[int, Dict[str, Any]]] = None) -> Dict[str, Any]:
    functions = function_totals(threads)
    for symbol in [s for s in functions if symbols[s].is_import]:
        del functions[symbol]  # in the imports section
    natives = native_totals(threads)
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
                "lower_bound": thread.lower_bound,
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
            "lower_bound": any(t.lower_bound for t in proc.threads),
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
        entry["tasks"] = task_section(symbols, proc, {t.vtid: t.label for t in proc.threads}, top)
        entry["threads"] = threads
        processes.append(entry)
        if entry["mpi_rank"] is not None:
            rank_rows.append(rank_row(symbols, function_totals(proc.threads), entry))
    mpi = mpi_summary(rank_rows)
    inclusive = {symbol: row.total_ns for symbol, row in function_totals(
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
    warnings += damage_lines(raw)
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
    mpi_note = mpi_warning(mpi) if mpi is not None else None
    if mpi_note:
        warnings.append(mpi_note)
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
        "damaged_files": [f.as_json() for f in damaged_files(raw.damaged, raw.missing_events)],
        "lower_bounds": any(t.lower_bound for p in raw.processes for t in p.threads),
        "warnings": warnings,
        "dump": dump_section(trace),
        "mpi": mpi,
        "processes": processes,
        **native,
    }


# ----------------------------------------------------------------------------
# Text rendering


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
         f"{r['exceptions']:,}" if r["exceptions"] else "", *name_and_location(r)]
        for r in ordered
    ]
    headers = ["self", "total", "calls", *(["rate control"] if rated else []), "exc", "function",
               "location"]
    right = [True, True, True, *([False] if rated else []), True, False, False]
    return table(headers, cells, right)


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
    lines += table(["self", "calls", "functions", "module", "origin"], cells,
                    [True, True, True, False, False])
    return lines


def _generator_lines(rows: List[Dict[str, Any]]) -> List[str]:
    if not rows:
        return []
    lines = ["Generators and coroutines, first start to final end (running: the time in their "
             "segments):"]
    cells = [[format_ns(r["wall_ns"]), format_ns(r["mean_wall_ns"]), format_ns(r["running_ns"]),
              f"{r['instances_finished']:,}/{r['instances_started']:,}", f"{r['segments']:,}",
              *name_and_location(r)] for r in rows]
    return lines + table(["wall", "mean wall", "running", "finished", "segments", "function",
                           "location"], cells, [True, True, True, True, True, False, False])


def _activity_lines(section: Dict[str, Any], top: int, ring: bool = False) -> List[str]:
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
             function_text(n["caller"]), n["callee"]]
            for n in natives
        ]
        lines += table(["calls", "total", "raised", "caller", "-> callee"], cells,
                        [True, True, True, False, False])
    lines += _generator_lines(section["generators"])
    exceptions = section["exceptions"]
    if exceptions:
        lines.append("Exceptions (frames left by unwind; native calls that raised):")
        cells = []
        for e in exceptions:
            if e["kind"] == "unwind":
                where = function_text(e["function"])
            else:
                where = f"{function_text(e['caller'])} -> {e['callee']}"
            cells.append([f"{e['count']:,}", e["kind"], where])
        lines += table(["count", "kind", "where"], cells, [True, False, False])
    lines += import_lines(section["imports"])
    return lines + _unbalanced_lines(section["unbalanced"], ring)


def _unbalanced_lines(unbalanced: Dict[str, int], ring: bool = False) -> List[str]:
    """`ring`: a flight recorder's dump, whose ring overwrote the first begins and
    whose frames were open when it was taken: expected, and said so."""
    notes = []
    if unbalanced["ends_without_begin"]:
        why = ("their begins were overwritten in the flight recorder's ring" if ring
               else "frames already running when tracing started")
        notes.append(plural(unbalanced["ends_without_begin"], "end", "ends")
                     + f" without a begin ({why})")
    if unbalanced["open_at_end"]:
        why = ("open when the dump was taken: see the open stacks above" if ring
               else "closed at the thread's last event")
        notes.append(plural(unbalanced["open_at_end"], "frame", "frames")
                     + f" open at trace end ({why})")
    if unbalanced["stepped_aside"]:
        notes.append(plural(unbalanced["stepped_aside"], "frame", "frames")
                     + " open when tracing stepped aside for a debugger (closed there)")
    if unbalanced["implicitly_closed"]:
        notes.append(plural(unbalanced["implicitly_closed"], "frame", "frames")
                     + " closed by an outer frame's end (their own end was lost)")
    if unbalanced.get("cut_by_damage"):
        notes.append(plural(unbalanced["cut_by_damage"], "frame", "frames")
                     + " cut off by damage to the trace (closed where their stream lost packets)")
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
    bound = ", totals are lower bounds (damaged trace)" if proc.get("lower_bound") else ""
    return f"=== {proc['label']}{suffix}: {proc['events']:,} events{bound} ==="


def _filter_text(filters: Dict[str, Any]) -> str:
    fields: Dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value
                              for key, value in filters.items()}
    return ReadFilter(**fields).describe()


def _process_lines(proc: Dict[str, Any], top: int, ring: bool = False) -> List[str]:
    lines = ["", _process_title(proc)]
    rate = rate_lines(proc)
    if rate:
        lines += ["", *rate]
    if proc.get("gil"):  # first: where each thread's time went (docs/analysis.md)
        lines += ["", *gil_lines(proc["gil"])]
    active = [t for t in proc["threads"] if _has_activity(t)]
    idle = [t for t in proc["threads"] if not _has_activity(t)]
    if len(active) > 1:
        lines += ["", f"--- all {len(active)} threads ---"]
        lines += _activity_lines(proc, top, ring)
    for thread in active:
        span = format_ns(thread["end_ns"] - thread["begin_ns"])
        bound = ", totals are lower bounds" if thread.get("lower_bound") else ""
        lines += ["", f"--- {thread['label']}: {thread['events']:,} events over {span}{bound} ---"]
        lines += _activity_lines(thread, top, ring)
        if thread.get("gil") and len(active) > 1:
            lines += gil_lines(thread["gil"], threads=False)
    if idle:
        labels = ", ".join(t["label"] for t in idle)
        lines += ["", f"Threads without function events: {labels}"]
    tasks = task_lines(proc.get("tasks"), top)
    if tasks:
        lines += ["", *tasks]
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
    if report.get("dump"):  # a flight recorder's: what the user came for, first
        lines += ["", *dump_lines(report["dump"])]
    for warning in report["warnings"]:
        lines += ["", f"WARNING: {warning}."]
    if report.get("mpi"):
        lines += ["", *mpi_lines(report["mpi"])]
    for proc in report["processes"]:
        lines += _process_lines(proc, top, bool(report.get("dump")))
    native = native_lines(report)
    if native:
        lines += ["", *native]
    return "\n".join(lines) + "\n"
