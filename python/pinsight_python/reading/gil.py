"""Report sections of ``gil`` events: where each thread's time went with respect to the GIL.

Per thread: wall time (its first to last event), time waiting for the GIL (at
hand-offs between threads and when taking it back after a release), time in
native code with the GIL released, and the rest, held. Per Python function: the
waits while it was the innermost Python frame. Per native callee: how often and
how long it released the GIL. docs/analysis.md, "The GIL".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence

from .analysis import Symbol, format_ns

if TYPE_CHECKING:
    from .._pinsight_reader import ThreadRecord

__all__ = ["gil_lines", "gil_process_section", "gil_thread_section"]


def gil_thread_section(symbols: Sequence[Symbol], thread: ThreadRecord,
                       top: int) -> Optional[Dict[str, Any]]:
    """One thread's GIL times, or None when the trace has no gil events for it."""
    if not thread.gil:
        return None
    return _section(symbols, [thread], top)


def gil_process_section(symbols: Sequence[Symbol], threads: Iterable[ThreadRecord],
                        top: int) -> Optional[Dict[str, Any]]:
    """The process's threads with gil events, and their functions and callees together."""
    with_gil = [t for t in threads if t.gil]
    return _section(symbols, with_gil, top) if with_gil else None


@dataclass
class _CalleeTotal:
    """A native callee's GilRelease records (or no callee's: -1), summed over threads."""

    releases: int = 0
    released_ns: int = 0
    wait_ns: int = 0


def _section(symbols: Sequence[Symbol], threads: List[ThreadRecord],
             top: int) -> Dict[str, Any]:
    rows: List[Dict[str, Any]] = []
    waits: Dict[int, int] = defaultdict(int)
    callees: Dict[int, _CalleeTotal] = defaultdict(_CalleeTotal)
    for thread in threads:
        gil = thread.gil
        if gil is None:  # the callers pass only threads with gil events
            continue
        wall = max(0, thread.last_ns - thread.first_ns)
        wait = gil.switch_wait_ns + gil.take_back_wait_ns
        released = gil.released_ns
        rows.append({
            "vtid": thread.vtid,
            "label": thread.label,
            "wall_ns": wall,
            "gil_held_ns": max(0, wall - wait - released),
            "gil_wait_ns": wait,
            "switch_wait_ns": gil.switch_wait_ns,
            "take_back_wait_ns": gil.take_back_wait_ns,
            "released_ns": released,
            "switches": gil.switches,
            "releases": gil.releases,
        })
        for w in gil.function_waits:
            waits[w.symbol] += w.gil_wait_ns
        for r in gil.releases_by_callee:
            row = callees[r.callee]
            row.releases += r.releases
            row.released_ns += r.released_ns
            row.wait_ns += r.wait_ns
    limit = top if top > 0 else None
    functions = []
    for symbol, ns in sorted(waits.items(), key=lambda kv: (-kv[1], symbols[kv[0]].qualname)):
        out = symbols[symbol].as_json()
        out["gil_wait_ns"] = ns
        functions.append(out)
    ordered = sorted(callees.items(), key=lambda kv: (
        -kv[1].released_ns, symbols[kv[0]].qualname if kv[0] >= 0 else ""))
    native: List[Dict[str, Any]] = [
        {
            "callee": symbols[symbol].qualname if symbol >= 0 else None,
            "releases": callee.releases,
            "released_ns": callee.released_ns,
            "wait_ns": callee.wait_ns,
        }
        for symbol, callee in ordered
    ]
    total = {key: sum(r[key] for r in rows) for key in (
        "wall_ns", "gil_held_ns", "gil_wait_ns", "switch_wait_ns", "take_back_wait_ns",
        "released_ns", "switches", "releases")}
    return {
        **total,
        "threads": rows,
        "functions_total": len(functions),
        "functions": functions[:limit],
        "native_total": len(native),
        "native": native[:limit],
    }


def gil_lines(section: Optional[Dict[str, Any]], threads: bool = True) -> List[str]:
    """The text tables of a GIL section (threads: with the per-thread table)."""
    if not section:
        return []
    lines: List[str] = []
    if threads:
        lines.append("GIL (events = gil): wall = held + waited + released")
        lines.append(f"  {'wall':>9}  {'held':>9}  {'waited':>9}  {'released':>9}  thread")
        for r in section["threads"]:
            lines.append(
                f"  {format_ns(r['wall_ns']):>9}  {format_ns(r['gil_held_ns']):>9}  "
                f"{format_ns(r['gil_wait_ns']):>9}  {format_ns(r['released_ns']):>9}  "
                f"{r['label']}")
    if section["functions"]:
        lines.append(f"Waiting for the GIL, by Python function ({len(section['functions'])} of "
                     f"{section['functions_total']}):")
        lines.append(f"  {'waited':>9}  function  location")
        for f in section["functions"]:
            where = f"{f['filename']}:{f['lineno']}" if f.get("filename") else "[native]"
            lines.append(f"  {format_ns(f['gil_wait_ns']):>9}  {f['name']}  {where}")
    if section["native"]:
        lines.append(f"Native calls releasing the GIL ({len(section['native'])} of "
                     f"{section['native_total']}):")
        lines.append(f"  {'releases':>9}  {'released':>9}  {'take back':>9}  callee")
        for n in section["native"]:
            lines.append(f"  {n['releases']:>9,}  {format_ns(n['released_ns']):>9}  "
                         f"{format_ns(n['wait_ns']):>9}  {n['callee'] or '(no native call open)'}")
    return lines
