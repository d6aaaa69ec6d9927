"""Report sections of import events and sampled allocations.

Imports: per module, cumulative time (the import and everything it ran) and
self time (minus the imports nested in it, as ``python -X importtime``
counts), and the slowest chains: each outermost import followed down its
slowest nested import. Allocations: per allocating function, the bytes its
samples stand for, the part never freed by the end of the trace, retention.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Sequence

from .analysis import Symbol, format_ns

if TYPE_CHECKING:
    from .._pinsight_reader import AllocStats, ThreadRecord

__all__ = ["alloc_lines", "alloc_section", "format_bytes", "import_lines", "import_section"]


def format_bytes(count: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(count) >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count:.0f} B"


@dataclass
class _ImportTotal:
    """A module's ImportStats records, summed over threads."""

    loads: int = 0
    cumulative_ns: int = 0
    self_ns: int = 0
    raised: int = 0


def import_section(
    symbols: Sequence[Symbol], threads: Iterable[ThreadRecord], top: int
) -> Dict[str, Any]:
    """Imports of these threads: per module, and the slowest chains."""
    totals: Dict[int, _ImportTotal] = defaultdict(_ImportTotal)
    chains: List[Dict[str, Any]] = []
    for thread in threads:
        for i in thread.imports:
            row = totals[i.symbol]
            row.loads += i.loads
            row.cumulative_ns += i.cumulative_ns
            row.self_ns += i.self_ns
            row.raised += i.raised
        for c in thread.import_chains:
            chains.append({
                "cumulative_ns": c.ns,
                "modules": [symbols[m].qualname for m in c.modules],
                "raised": bool(c.raised),
                "vtid": thread.vtid,
            })
    modules: List[Dict[str, Any]] = [
        {
            "module": symbols[symbol].qualname,
            "loads": total.loads,
            "cumulative_ns": total.cumulative_ns,
            "self_ns": total.self_ns,
            "raised": total.raised,
        }
        for symbol, total in totals.items()
    ]
    modules.sort(key=lambda m: (-m["cumulative_ns"], m["module"]))
    chains.sort(key=lambda c: (-c["cumulative_ns"], c["modules"]))
    limit = top if top > 0 else None
    return {
        "modules_total": len(modules),
        "cumulative_ns": sum(c["cumulative_ns"] for c in chains),
        "modules": modules[:limit],
        "slowest_chains": chains[: (top if top > 0 else len(chains))][:10],
    }


def alloc_section(symbols: Sequence[Symbol], allocations: Iterable[AllocStats],
                  top: int) -> Dict[str, Any]:
    """Top allocating functions of one process by sampled bytes."""
    rows = []
    for a in allocations:
        out = symbols[a.symbol].as_json()
        out.update(
            samples=a.samples,
            sampled_bytes=a.sampled_bytes,
            retained_bytes=a.retained_bytes,
            native_bytes=a.native_bytes,
            retention_pct=(round(100.0 * a.retained_bytes / a.sampled_bytes, 1)
                           if a.sampled_bytes else 0.0),
        )
        rows.append(out)
    rows.sort(key=lambda r: (-r["sampled_bytes"], r["qualname"]))
    return {
        "functions_total": len(rows),
        "sampled_bytes": sum(r["sampled_bytes"] for r in rows),
        "retained_bytes": sum(r["retained_bytes"] for r in rows),
        "functions": rows[: top if top > 0 else None],
    }


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        first = f"{cells[0]:<{widths[0]}}"
        rest = [f"{c:>{w}}" for c, w in zip(cells[1:], widths[1:])]
        return "  " + "  ".join([first, *rest]).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def import_lines(section: Dict[str, Any]) -> List[str]:
    modules = section["modules"]
    if not modules:
        return []
    lines = [
        f"Imports ({len(modules)} of {section['modules_total']} modules loaded, "
        f"{format_ns(section['cumulative_ns'])} in outermost imports):"
    ]
    lines += _table(
        ["module", "cumulative", "self", "loads", "raised"],
        [[m["module"], format_ns(m["cumulative_ns"]), format_ns(m["self_ns"]),
          f"{m['loads']:,}", f"{m['raised']:,}" if m["raised"] else ""] for m in modules],
    )
    if section["slowest_chains"]:
        lines.append("Slowest import chains (outermost import, then its slowest nested one):")
        for chain in section["slowest_chains"]:
            failed = " (raised)" if chain["raised"] else ""
            lines.append(
                f"  {format_ns(chain['cumulative_ns']):>9}  {' > '.join(chain['modules'])}{failed}"
            )
    return lines


def alloc_lines(section: Dict[str, Any]) -> List[str]:
    rows = section["functions"]
    if not rows:
        return []
    retained = section["retained_bytes"]
    lines = [
        f"Allocations (sampled; {len(rows)} of {section['functions_total']} functions, "
        f"~{format_bytes(section['sampled_bytes'])} allocated, "
        f"~{format_bytes(retained)} never freed by the end of the trace):"
    ]

    def where(row: Dict[str, Any]) -> str:
        if row["filename"] is None:
            return ""
        return f"{row['filename']}:{row['lineno']}" if row["lineno"] else row["filename"]

    lines += _table(
        ["function", "allocated", "never freed", "retention", "native", "samples", "where"],
        [[r["qualname"], format_bytes(r["sampled_bytes"]), format_bytes(r["retained_bytes"]),
          f"{r['retention_pct']:.0f}%", format_bytes(r["native_bytes"]) if r["native_bytes"]
          else "", f"{r['samples']:,}", where(r)] for r in rows],
    )
    return lines
