"""Per-function and per-call-site sums over threads, from the reader's records:
what the report's sections (report.py, mpi.py) rank and show."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterable, Tuple

if TYPE_CHECKING:
    from .._pinsight_reader import ThreadRecord


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


def function_totals(threads: Iterable[ThreadRecord]) -> FunctionTotals:
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


def native_totals(threads: Iterable[ThreadRecord]) -> NativeTotals:
    totals: NativeTotals = defaultdict(NativeTotal)
    for thread in threads:
        for n in thread.native_calls:
            row = totals[(n.caller, n.callee)]
            row.calls += n.calls
            row.total_ns += n.total_ns
            row.raised += n.raised
    return totals
