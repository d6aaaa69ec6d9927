"""A flight recorder's dump, read back: what the report shows first.

``pinsight-python trace --flight-recorder`` writes each dump as a trace of its
own, ``OUTPUT/dump-N-REASON/``, with ``dump.json`` beside LTTng's files (why,
when, who asked: recording/run/flight.py). At the dump every traced process
wrote its threads' open frames (``open_frame``) and a ``dump_marker``: the ring
had long lost the outer frames' begins. :func:`dump_section` makes the report's
``dump`` section of them (schema in docs/analysis.md): per process and thread,
the stack open when the dump was taken, how long each frame had been open, the
native regions open under it and the thread's last events; and, for an MPI
job, one line per group of ranks. :func:`dump_lines` renders it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from .dump_folders import DUMP_FILE, dump_folders
from .mpi import rank_list

if TYPE_CHECKING:
    from .._pinsight_reader import DumpRecord, ProcessRecord, ThreadRecord
    from .analysis import Symbol, TraceData

__all__ = ["dump_lines", "dump_section"]

# dump_marker's status bits (src/format/wire.h, PINSIGHT_DUMP_*): what a
# process could not write.
_STATUS = (
    (1, "no_gil", "the GIL did not come within 1 s (a thread holds it in native code): no "
                  "open stacks, and its threads' last records (up to 1 ms or 512 calls each) "
                  "are not in the dump"),
    (2, "signal_without_gil", "the fatal signal came on a thread that did not hold the GIL: "
                              "its own records only, no open stacks"),
    (4, "busy", "a fatal signal interrupted a change of the thread list: no open stacks"),
    (8, "unflushed", "its pending records were not flushed first (up to 100 ms missing)"),
)
# Native callees shown by their last name in the ranks' lines: mpi4py.MPI.Comm.Allreduce.
_SHORT_NATIVE = 1


def _described(paths: Sequence[Path]) -> Optional[Dict[str, Any]]:
    """The dump.json of the (first) dump read, if any: a dump's folder, or a flight
    recorder's output holding one dump."""
    for given in paths:
        folders = dump_folders(given)
        path = folders[0] if len(folders) == 1 else given
        try:
            text = (path / DUMP_FILE).read_text()
        except OSError:
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _status(bits: int) -> List[Dict[str, str]]:
    return [{"status": name, "text": text} for bit, name, text in _STATUS if bits & bit]


def _frame(symbols: Sequence[Symbol], frame: Any, dump_ns: int) -> Dict[str, Any]:
    symbol = symbols[frame.symbol] if frame.symbol >= 0 else None
    caller = symbols[frame.caller] if frame.caller >= 0 else None
    native = frame.caller >= 0 or (symbol is not None and symbol.native)
    out: Dict[str, Any] = {
        "depth": frame.depth,
        "kind": "native" if native else "python",
        "name": symbol.qualname if symbol else "?",
        "line": frame.line,
        "begin_ns": frame.begin_ns or None,
        "open_ns": dump_ns - frame.begin_ns if frame.begin_ns and dump_ns >= frame.begin_ns
        else None,
    }
    if native:
        out["caller"] = caller.qualname if caller else None
        out["filename"] = caller.filename if caller else None
    else:
        out["filename"] = symbol.filename if symbol else None
    return out


def _recent(symbols: Sequence[Symbol], thread: Optional[ThreadRecord], dump_ns: int
            ) -> List[Dict[str, Any]]:
    if thread is None:
        return []
    return [{"offset_ns": e.ts_ns - dump_ns, "kind": e.kind,
             "name": symbols[e.symbol].qualname if e.symbol >= 0 else "?"}
            for e in thread.recent]


def _thread_label(proc: ProcessRecord, vtid: int, python_thread_id: int) -> Tuple[str, Any]:
    for thread in proc.threads:
        if thread.vtid == vtid:
            return thread.label, thread
    name = "main thread" if python_thread_id == 0 else f"thread {python_thread_id}"
    return f"{name} (tid {vtid})", None


def _process_entry(symbols: Sequence[Symbol], proc: ProcessRecord, dump: DumpRecord
                   ) -> Dict[str, Any]:
    threads: List[Dict[str, Any]] = []
    for stack in dump.stacks:
        label, thread = _thread_label(proc, stack.vtid, stack.python_thread_id)
        threads.append({
            "vtid": stack.vtid,
            "python_thread_id": stack.python_thread_id,
            "label": label,
            "stack": [_frame(symbols, f, dump.ts_ns) for f in stack.frames],
            "regions": [{"label": r.label, "open_ns": max(0, dump.ts_ns - r.begin_ns)}
                        for r in stack.regions],
            "recent": _recent(symbols, thread, dump.ts_ns),
        })
    # Threads with nothing open (a process whose exception unwound every frame)
    # still show their last events: where it came from.
    listed = {t["vtid"] for t in threads}
    for thread in proc.threads:
        if thread.vtid not in listed and thread.recent:
            threads.append({"vtid": thread.vtid, "python_thread_id": thread.python_thread_id,
                            "label": thread.label, "stack": [], "regions": [],
                            "recent": _recent(symbols, thread, dump.ts_ns)})
    threads.sort(key=lambda t: (int(t["python_thread_id"]) < 0, int(t["python_thread_id"]),
                                int(t["vtid"])))
    return {
        "vpid": proc.vpid,
        "label": proc.label,
        "mpi_rank": proc.mpi_rank if proc.mpi_rank >= 0 else None,
        "reason": dump.reason,
        "ts_ns": dump.ts_ns,
        "status": _status(dump.status),
        "threads_written": dump.threads,
        "frames_written": dump.frames,
        "threads": threads,
    }


def _where(thread: Dict[str, Any]) -> Tuple[str, Optional[int]]:
    """Where a thread was, in few words: its innermost Python function and the
    native call it was in ("exchange → Allreduce"), and since when."""
    stack = thread["stack"]
    if not stack:
        return "no open frame", None
    top = stack[-1]
    if top["kind"] == "native":
        callee = top["name"].rsplit(".", _SHORT_NATIVE)[-1]
        caller = top.get("caller") or "?"
        return f"in {caller} → {callee}", top["open_ns"]
    return f"in {top['name']}", top["open_ns"]


def _rank_lines(processes: List[Dict[str, Any]]) -> List[str]:
    """One line per group of ranks at the same place, the fewest first; the
    largest group last as "every other rank"."""
    from .analysis import format_ns

    places: Dict[str, List[Tuple[int, Optional[int]]]] = defaultdict(list)
    for proc in processes:
        if proc["mpi_rank"] is None:
            continue
        main = next((t for t in proc["threads"] if t["python_thread_id"] == 0),
                    proc["threads"][0] if proc["threads"] else None)
        if main is None:
            why = proc["status"][0]["status"] if proc["status"] else "no stack"
            where, since = f"unknown ({why})", None
        else:
            where, since = _where(main)
        places[where].append((proc["mpi_rank"], since))
    if not places:
        return []
    groups = sorted(places.items(), key=lambda item: (len(item[1]), min(r for r, _ in item[1])))
    lines = []
    for i, (where, ranks) in enumerate(groups):
        durations = [s for _, s in ranks if s is not None]
        span = ""
        if durations:
            low, high = min(durations), max(durations)
            span = (f" for {format_ns(high)}" if high - low < max(high // 10, 1_000_000)
                    else f" for {format_ns(low)} to {format_ns(high)}")
        numbers = sorted(r for r, _ in ranks)
        last = i == len(groups) - 1
        if last and len(groups) > 1 and len(numbers) > 1:
            who = "every other rank"
        elif len(groups) == 1 and len(numbers) > 1:
            who = "every rank"
        else:
            who = ("rank " if len(numbers) == 1 else "ranks ") + rank_list(numbers)
        lines.append(f"{who}: {where}{span}")
    return lines


def dump_section(trace: TraceData) -> Optional[Dict[str, Any]]:
    """The report's "dump" section; None when the trace is no flight recorder's dump."""
    described = _described(trace.paths)
    dumped = [(proc, proc.dump) for proc in trace.processes if proc.dump is not None]
    if described is None and not dumped:
        return None
    processes = [_process_entry(trace.symbols, proc, dump) for proc, dump in dumped]
    processes.sort(key=lambda p: (p["mpi_rank"] is None, p["mpi_rank"] or 0, p["vpid"]))
    silent = []
    if described is not None:
        marked = {proc.pid for proc, _ in dumped} | {proc.vpid for proc, _ in dumped}
        silent = [p for p in described.get("processes", [])
                  if p.get("pid") not in marked]
    return {
        "dump": described.get("dump") if described else None,
        "name": described.get("name") if described else None,
        "reason": described.get("reason") if described else (dumped[0][1].reason
                                                            if dumped else None),
        "detail": described.get("detail") if described else None,
        "time": described.get("time") if described else None,
        "requested_by": described.get("requested_by") if described else None,
        "processes": processes,
        "without_stacks": silent,
        "ranks": _rank_lines(processes),
    }


def _requester(asked: Optional[Dict[str, Any]]) -> str:
    if not asked:
        return ""
    if asked.get("trace"):
        return f", asked by trace ({asked['trace']})"
    rank = f", rank {asked['mpi_rank']}" if asked.get("mpi_rank") is not None else ""
    return f", asked by process {asked.get('pid')}{rank}"


def _frame_text(frame: Dict[str, Any]) -> str:
    from .analysis import format_ns

    since = f"  open {format_ns(frame['open_ns'])}" if frame["open_ns"] is not None else ""
    if frame["kind"] == "native":
        where = f"called by {frame.get('caller') or '?'} at line {frame['line']}"
        return f"{frame['name']} [native, {where}]{since}"
    file = Path(frame["filename"]).name if frame.get("filename") else "?"
    return f"{frame['name']} ({file}:{frame['line']}){since}"


def dump_lines(section: Dict[str, Any]) -> List[str]:
    """The dump as text: the first thing the report says."""
    from .analysis import format_ns

    title = section["name"] or "flight recorder dump"
    detail = f": {section['detail']}" if section.get("detail") else ""
    when = f" at {section['time']}" if section.get("time") else ""
    lines = [f"Dump {title} ({section['reason']}{detail}){when}"
             f"{_requester(section.get('requested_by'))}"]
    if section["ranks"]:
        lines += ["MPI ranks at the dump:", *(f"  {line}" for line in section["ranks"])]
    for proc in section["processes"]:
        lines.append(f"--- {proc['label']}: open stacks at the dump ---")
        for status in proc["status"]:
            lines.append(f"  (stacks incomplete: {status['text']})")
        if not any(t["stack"] for t in proc["threads"]) and not proc["status"]:
            lines.append("  no thread had an open frame")
        for thread in proc["threads"]:
            lines.append(f"  {thread['label']}:" + ("" if thread["stack"] else " nothing open"))
            for depth, frame in enumerate(thread["stack"]):
                lines.append(f"    {'  ' * min(depth, 12)}{_frame_text(frame)}")
            indent = "  " * min(len(thread["stack"]), 12)
            for region in thread["regions"]:
                lines.append(f"    {indent}{region['label']}  open {format_ns(region['open_ns'])}")
            if thread["recent"]:
                last = ", ".join(f"{e['kind']} {e['name']} ({format_ns(-e['offset_ns'])} before)"
                                 for e in thread["recent"][-4:])
                lines.append(f"    last events: {last}")
    for gone in section.get("without_stacks", []):
        flush = gone.get("flush")
        why = {"none": "did not answer in time", "gone": "had ended"}.get(flush, flush)
        lines.append(f"--- process {gone.get('pid')}: no open stacks ({why}) ---")
    return lines
