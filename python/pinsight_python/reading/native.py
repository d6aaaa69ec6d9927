"""Native regions by Python caller: the time PInsight's domains (OpenMP, MPI, CUDA) and
any provider's ``NAME_begin``/``NAME_end`` pairs spent under each Python call.

The reader attributes each region to the Python function whose call made it (the
innermost Python frame open on its thread at its begin) and, apart, to the native callee
that call went through when there is one (mpi4py's ``Comm.Allreduce``, a ctypes or
pybind11 function); :func:`native_section` aggregates them over processes for ``report``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .analysis import Symbol, TraceData, format_ns

__all__ = ["display_name", "native_lines", "native_section"]

# (caller symbol or -1, native callee symbol or -1, how attributed, domain, region)
Key = Tuple[int, int, str, str, str]

# Why a row has no Python caller, or how it found one on another thread.
_ATTRIBUTED = {
    "blocked_call": "launched by a thread without Python while this call was blocked in "
                    "a native call",
    "no_blocked_call": "launched by a thread without Python while no Python call was "
                       "blocked in a native call",
    "several_blocked_calls": "launched by a thread without Python while several Python "
                             "calls were blocked in native calls",
    "no_launch": "device activity whose launch is not in the trace (launched through the "
                 "driver API, or before tracing)",
}


# Text tables cut any region name past this (the JSON keeps it whole).
_NAME_CHARS = 100


def display_name(name: str, demangled: bool = False) -> str:
    """A region's name as text tables show it. A demangled C++ kernel's is its qualified
    name alone (``at::native::reduce_kernel``), without the return type, template
    arguments and parameters that make PyTorch's run to kilobytes (Nsight Systems'
    short kernel names); the JSON keeps the whole name and the mangled one. Any name
    still longer than the table allows is cut with an ellipsis."""
    if demangled:
        short = _qualified_name(name[: -len(" const")] if name.endswith(" const") else name)
    else:
        short = name
    return short if len(short) <= _NAME_CHARS else short[: _NAME_CHARS - 1] + "\u2026"


def _qualified_name(name: str) -> str:
    """``void ns::f<int>(float*)`` -> ``ns::f``; the name itself when it does not parse."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):  # the parameter list: the last balanced (...)
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return _without_templates(name[:i]) or name
    return name


def _without_templates(head: str) -> str:
    """The head of a C++ signature without its return type and template arguments;
    empty when its brackets do not balance."""
    parts: List[str] = []
    nesting = 0  # <...>, (...), {...}: template arguments, (anonymous namespace), lambdas
    start = 0
    for i, c in enumerate(head):
        if c in "<({":
            if nesting == 0 and c == "<":
                parts.append(head[start:i])
            nesting += 1
        elif c in ">)}":
            nesting -= 1
            if nesting < 0:
                return ""
            if nesting == 0 and c == ">":
                start = i + 1
        elif c == " " and nesting == 0:  # the return type ends here
            parts, start = [], i + 1
    return "" if nesting else "".join([*parts, head[start:]]).strip()


@dataclass
class _RegionTotal:
    """Regions of one (caller, domain, name), summed over processes."""

    count: int = 0
    total_ns: int = 0


def native_section(
    trace: TraceData, caller_json: Callable[[Symbol], Dict[str, Any]],
    inclusive_ns: Dict[int, int], top: int,
) -> Dict[str, Any]:
    """``native``: one row per (caller, domain, name); ``unmatched``: begins that
    never ended (listed, never timed); ``ends_without_begin``."""
    raw = trace.raw
    totals: Dict[Key, _RegionTotal] = defaultdict(_RegionTotal)
    ranks: Dict[Key, Dict[int, int]] = defaultdict(lambda: defaultdict(int))
    # The reader names the domains ("openmp", "mpi", "cuda", else the provider's name).
    mangled: Dict[Tuple[str, str], str] = {}
    for r in raw.native:
        key = (r.caller, r.via, r.attributed, r.domain, r.region)
        if r.mangled is not None:
            mangled[(r.domain, r.region)] = r.mangled
        totals[key].count += r.instances
        totals[key].total_ns += r.total_ns
        if r.mpi_rank >= 0:
            ranks[key][r.mpi_rank] += r.total_ns
    keys = sorted(totals, key=lambda k: (-totals[k].total_ns, k[3], k[4], k[0], k[1], k[2]))
    if top > 0:
        keys = keys[:top]
    rows = []
    for key in keys:
        caller, via, attributed, domain, region = key
        count, total_ns = totals[key].count, totals[key].total_ns
        inclusive = inclusive_ns.get(caller, 0) if caller >= 0 else 0
        row: Dict[str, Any] = {
            # The Python function whose call made the region, and the native callee
            # that call went through (mpi4py's Comm.Allreduce, a ctypes function).
            "caller": caller_json(trace.symbols[caller]) if caller >= 0 else None,
            "via": trace.symbols[via].qualname if via >= 0 else None,
            # "own_thread", or across threads ("blocked_call"), or why no caller.
            "attributed": attributed,
            "domain": domain,
            "name": region,
            "count": count,
            "total_ns": total_ns,
            "share_of_caller": round(total_ns / inclusive, 4) if inclusive else None,
        }
        if (domain, region) in mangled:
            row["mangled"] = mangled[(domain, region)]
        if key in ranks:
            per_rank = dict(sorted(ranks[key].items()))
            row["ranks"] = {str(r): ns for r, ns in per_rank.items()}
            row["imbalance"] = _imbalance(per_rank)
        rows.append(row)
    unmatched: Dict[Tuple[str, str], int] = defaultdict(int)
    for u in raw.native_unmatched:
        unmatched[(u.domain, u.region)] += u.begins
    return {
        "native": rows,
        "native_unmatched": [{"domain": d, "name": n, "count": c}
                             for (d, n), c in sorted(unmatched.items())],
        "native_ends_without_begin": raw.native_ends_without_begin,
        "native_labels": dict(raw.native_labels),
    }


def _imbalance(per_rank: Dict[int, int]) -> Optional[Dict[str, Any]]:
    """Slowest and fastest rank and their ratio, when there are two ranks or more."""
    if len(per_rank) < 2:
        return None
    slowest = max(per_rank, key=lambda r: (per_rank[r], -r))
    fastest = min(per_rank, key=lambda r: (per_rank[r], r))
    ratio = per_rank[slowest] / per_rank[fastest] if per_rank[fastest] else None
    return {"slowest_rank": slowest, "fastest_rank": fastest,
            "ratio": round(ratio, 3) if ratio is not None else None}


def _caller_text(caller: Optional[Dict[str, Any]]) -> str:
    """The Python function as other rows name it: qualname (file:line)."""
    if caller is None:
        return "(no Python caller)"
    where = caller.get("filename")
    if not where:
        return str(caller["qualname"])
    return f"{caller['qualname']} ({os.path.basename(str(where))}:{caller.get('lineno')})"


def native_lines(section: Dict[str, Any]) -> List[str]:
    """The text of the section; nothing when the trace holds no native region."""
    rows: Sequence[Dict[str, Any]] = section["native"]
    unmatched = section["native_unmatched"]
    if not rows and not unmatched:
        return []
    lines = ["Native time by Python caller:"]
    width = max([len(_caller_text(r["caller"])) + 3 for r in rows] + [6])
    via_width = max([len(r["via"] or "-") for r in rows] + [3])
    labels = section["native_labels"]
    names = [f"[{labels.get(r['domain'], r['domain'])}] {display_name(r['name'], 'mangled' in r)}"
             for r in rows]
    name_width = max([len(n) for n in names] + [6])
    lines.append(f"  {'caller':<{width}}  {'via':<{via_width}}  {'region':<{name_width}}  "
                 f"{'count':>8}  {'total':>10}  {'of caller':>9}")
    notes: Dict[str, str] = {}
    for row, name in zip(rows, names):
        share = f"{row['share_of_caller']:.1%}" if row["share_of_caller"] is not None else "-"
        how = row.get("attributed", "own_thread")
        mark = ""
        if how in _ATTRIBUTED:
            mark = notes.setdefault(how, "*" * (len(notes) + 1))
        lines.append(f"  {_caller_text(row['caller']) + mark:<{width}}  "
                     f"{row['via'] or '-':<{via_width}}  "
                     f"{name:<{name_width}}  {row['count']:>8,}  "
                     f"{format_ns(row['total_ns']):>10}  {share:>9}")
        imbalance = row.get("imbalance")
        if imbalance and imbalance["ratio"] is not None:
            ranks = row["ranks"]
            lines.append(
                f"  {'':<{width}}    ranks: slowest {imbalance['slowest_rank']} "
                f"({format_ns(ranks[str(imbalance['slowest_rank'])])}), fastest "
                f"{imbalance['fastest_rank']} "
                f"({format_ns(ranks[str(imbalance['fastest_rank'])])}), "
                f"ratio {imbalance['ratio']:g}")
    for how, mark in notes.items():
        lines.append(f"  {mark} {_ATTRIBUTED[how]}")
    for entry in unmatched:
        label = labels.get(entry["domain"], entry["domain"])
        lines.append(f"  unmatched: {entry['count']:,} [{label}] {display_name(entry['name'])} "
                     "begin(s) without an end (not counted as regions)")
    if section["native_ends_without_begin"]:
        lines.append(f"  {section['native_ends_without_begin']:,} native end(s) without a begin")
    return lines
