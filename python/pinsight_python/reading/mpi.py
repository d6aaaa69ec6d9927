"""The report's MPI section: one line per rank (who it is, what it did, its top
function, its time in mpi4py), the ranks missing from the trace or found in several
processes, as JSON (:func:`rank_row`, :func:`mpi_summary`, :func:`mpi_warning`) and as
text (:func:`mpi_lines`). docs/mpi.md says how the ranks are found."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence

from .analysis import Symbol, format_ns
from .tables import plural, table
from .totals import FunctionTotals

# Native callables of mpi4py are named "mpi4py.MPI.Comm.allreduce" and the like.
MPI_PREFIX = "mpi4py."


def rank_row(symbols: Sequence[Symbol], totals: FunctionTotals, entry: Dict[str, Any]
             ) -> Dict[str, Any]:
    """One MPI rank's line: who it is and what it did, from all its functions (the
    sums over its threads, `totals`; `entry`, its process's entry of the report)."""
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


def mpi_summary(rows: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
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


def mpi_warning(mpi: Dict[str, Any]) -> Optional[str]:
    missing = mpi["missing_ranks"]
    if not missing:
        return None
    present = sorted({r["mpi_rank"] for r in mpi["ranks"]})

    def ranks(numbers: List[int]) -> str:
        return f"{'rank' if len(numbers) == 1 else 'ranks'} {rank_list(numbers)}"

    return (
        f"the MPI job has {mpi['size']:,} ranks but the trace holds only {ranks(present)}: "
        f"{ranks(missing)} {'is' if len(missing) == 1 else 'are'} missing (the ranks of "
        "other nodes are in those nodes' traces: see docs/mpi.md)"
    )


def rank_list(ranks: Sequence[int], limit: int = 8) -> str:
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


def mpi_lines(mpi: Dict[str, Any]) -> List[str]:
    ranks = mpi["ranks"]
    hosts = mpi["hosts"]
    size = f" of {mpi['size']:,}" if mpi["size"] is not None else ""
    where = f" on {plural(len(hosts), 'host', 'hosts')}" if hosts else ""
    if 0 < len(hosts) <= 4:
        where += f" ({', '.join(hosts)})"
    lines = [f"MPI ranks: {plural(len(ranks), 'process', 'processes')}{size}{where}"]
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
    lines += table(
        ["rank", "pid", "host", "threads", "events", "span", "python calls", "native calls",
         "mpi4py calls", "in mpi4py", "top function by self time"],
        cells, [True, True, False, True, True, True, True, True, True, True, False])
    if mpi["repeated_ranks"]:
        repeated = mpi["repeated_ranks"]
        lines.append(
            f"{'Rank' if len(repeated) == 1 else 'Ranks'} {rank_list(repeated)} "
            f"{'appears' if len(repeated) == 1 else 'appear'} in several processes: "
            "children of a rank inherit its launcher's variables, or several jobs ran "
            "during the session; the sections below name them by pid."
        )
    return lines
