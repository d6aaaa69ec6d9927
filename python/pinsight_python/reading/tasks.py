"""Report sections of asyncio tasks: which task ran each coroutine step, how long
each ran and waited, how it ended, who created and who awaited it.

Per event loop (the thread a task's steps ran on): each task's steps, running
time (the time in its steps), waiting time (created to done, or to the trace's
end, less running), outcome, the Python call that created it, its top functions
(work it handed to threads with ``asyncio.to_thread`` or ``run_in_executor``
attributed across threads), and the await chains. docs/analysis.md, "asyncio
tasks".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from .analysis import Symbol, format_ns
from .tables import table

if TYPE_CHECKING:
    from .._pinsight_reader import ProcessRecord, TaskRecord

__all__ = ["task_lines", "task_section"]

# Functions listed per task in the report.
TOP_FUNCTIONS_PER_TASK = 3


def _task_label(task: Dict[str, Any]) -> str:
    return f"{task['name'] or '?'} #{task['serial']}"


def _task_json(symbols: Sequence[Symbol], task: TaskRecord) -> Dict[str, Any]:
    return {
        "serial": task.serial,
        "task_id": task.task_id,
        "name": task.name,
        "vtid": task.vtid,
        "created_ns": task.created_ns,
        "first_step_ns": task.first_step_ns or None,
        "done_ns": task.done_ns or None,
        "outcome": task.outcome,
        "steps": task.steps,
        "running_ns": task.running_ns,
        "waiting_ns": task.waiting_ns,
        "offloaded_ns": task.offloaded_ns,
        "offloads": task.offloads,
        "creator": task.creator or None,
        "created_at": symbols[task.created_at].as_json() if task.created_at >= 0 else None,
        "awaited_by": list(task.awaited_by),
        "functions": [
            {**symbols[f.symbol].as_json(), "self_ns": f.self_ns, "offloaded": f.offloaded}
            for f in task.functions
        ],
    }


def _where(symbol: Dict[str, Any]) -> str:
    if symbol["filename"] is None:
        return str(symbol["qualname"])
    line = f":{symbol['lineno']}" if symbol["lineno"] is not None else ""
    return f"{symbol['qualname']} ({symbol['filename']}{line})"


def _parents(task: Dict[str, Any]) -> List[int]:
    """The tasks it hangs under in the await chains: those that awaited it (a gather,
    an await), else the one that created it (a TaskGroup's, create_task's)."""
    if task["awaited_by"]:
        return list(task["awaited_by"])
    return [task["creator"]] if task["creator"] else []


def task_section(symbols: Sequence[Symbol], proc: ProcessRecord, labels: Dict[int, str],
                 top: int) -> Optional[Dict[str, Any]]:
    """The process's tasks by event loop, or None when it ran none. labels: thread
    labels by vtid."""
    if not proc.tasks and not proc.task_groups:
        return None
    loops: Dict[int, Dict[str, Any]] = {}

    def loop(vtid: int) -> Dict[str, Any]:
        if vtid not in loops:
            loops[vtid] = {"vtid": vtid, "thread": labels.get(vtid, f"tid {vtid}"),
                           "tasks": [], "tasks_total": 0, "groups": []}
        return loops[vtid]

    for task in proc.tasks:
        entry = loop(task.vtid)
        entry["tasks"].append(_task_json(symbols, task))
        entry["tasks_total"] += 1
    for g in proc.task_groups:
        entry = loop(g.vtid)
        entry["tasks_total"] += g.tasks
        entry["groups"].append({
            "name": g.name, "tasks": g.tasks, "steps": g.steps, "running_ns": g.running_ns,
            "waiting_ns": g.waiting_ns, "offloaded_ns": g.offloaded_ns,
            "outcomes": {"returned": g.returned, "raised": g.raised, "cancelled": g.cancelled},
        })
    for entry in loops.values():
        entry["tasks"].sort(key=lambda t: (-t["running_ns"], t["serial"]))
        if top > 0:
            entry["tasks"] = entry["tasks"][:top]
    chains = _await_chains([_task_json(symbols, t) for t in proc.tasks])
    return {"loops": sorted(loops.values(), key=lambda e: e["vtid"]), "await_chains": chains}


def _await_chains(tasks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Trees of tasks: each under its parents (_parents); one with several parents
    appears under the first, and names the others."""
    by_serial = {t["serial"]: t for t in tasks}
    children: Dict[int, List[int]] = {}
    roots = []
    for t in tasks:
        parents = [p for p in _parents(t) if p in by_serial]
        if not parents:
            roots.append(t["serial"])
            continue
        children.setdefault(parents[0], []).append(t["serial"])

    def node(serial: int, depth: int) -> Dict[str, Any]:
        t = by_serial[serial]
        parents = _parents(t)
        how = "awaited" if t["awaited_by"] else ("created" if t["creator"] else None)
        return {
            "serial": serial, "name": t["name"], "outcome": t["outcome"], "by": how,
            "parents": parents,
            # Bounded: a chain deeper than this is cut (recursion of tasks).
            "children": [node(c, depth + 1) for c in children.get(serial, [])]
            if depth < 64 else [],
        }

    # Roots with no child say nothing about chains: left out.
    return [node(r, 0) for r in roots if children.get(r)]


def _chain_lines(node: Dict[str, Any], names: Dict[int, str], depth: int,
                 out: List[str], limit: int) -> None:
    if limit > 0 and len(out) >= limit:
        return
    label = f"{node['name'] or '?'} #{node['serial']}"
    notes = [node["outcome"]]
    if depth > 0 and node["by"]:
        notes.append(node["by"])
    if len(node["parents"]) > 1:
        others = ", ".join(names.get(p, f"#{p}") for p in node["parents"])
        notes.append(f"{len(node['parents'])} parents: {others}")
    out.append("  " + "  " * depth + f"{label} ({'; '.join(notes)})")
    for child in node["children"]:
        _chain_lines(child, names, depth + 1, out, limit)


def _loop_lines(entry: Dict[str, Any], names: Dict[int, str]) -> List[str]:
    tasks = entry["tasks"]
    total = entry["tasks_total"]
    shown = f"{len(tasks)} of {total:,}" if len(tasks) < total else f"{total:,}"
    lines = [f"asyncio tasks of the event loop on {entry['thread']} ({shown}, by running time; "
             "waiting: created to done less running):"]
    cells = []
    for t in tasks:
        where = t["created_at"]
        creator = names.get(t["creator"], f"#{t['creator']}") if t["creator"] else ""
        cells.append([
            _task_label(t), f"{t['steps']:,}", format_ns(t["running_ns"]),
            format_ns(t["waiting_ns"]), format_ns(t["offloaded_ns"]) if t["offloads"] else "",
            t["outcome"], creator, _where(where) if where else "",
        ])
    lines += table(["task", "steps", "running", "waiting", "in threads", "outcome",
                         "created by", "created at"], cells,
                        [False, True, True, True, True, False, False, False])
    for g in entry["groups"]:
        outcomes = ", ".join(f"{n:,} {k}" for k, n in g["outcomes"].items() if n)
        lines.append(f"  and {g['tasks']:,} more {g['name']!r} tasks: {g['steps']:,} steps, "
                     f"running {format_ns(g['running_ns'])}, waiting "
                     f"{format_ns(g['waiting_ns'])} ({outcomes})")
    with_functions = [t for t in tasks if t["functions"]]
    if with_functions:
        lines.append("Top functions per task (self time; [thread]: work it handed to a "
                     "thread, attributed across threads):")
        for t in with_functions:
            parts = [f"{f['qualname']}{' [thread]' if f['offloaded'] else ''} "
                     f"{format_ns(f['self_ns'])}"
                     for f in t["functions"][:TOP_FUNCTIONS_PER_TASK]]
            lines.append(f"  {_task_label(t)}: {', '.join(parts)}")
    return lines


def task_lines(section: Optional[Dict[str, Any]], top: int) -> List[str]:
    """The report's text for task_section's section (nothing without tasks)."""
    if not section:
        return []
    names = {t["serial"]: _task_label(t) for entry in section["loops"] for t in entry["tasks"]}
    lines: List[str] = []
    for entry in section["loops"]:
        lines += _loop_lines(entry, names)
    chains = section["await_chains"]
    if chains:
        lines.append("Await chains (each task under the tasks that awaited it, else the task "
                     "that created it):")
        out: List[str] = []
        for node in chains:
            _chain_lines(node, names, 0, out, max(top, 0) * 4)
        lines += out
    return lines
