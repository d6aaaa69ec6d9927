"""The report's text tables, shared by its sections (report.py, mpi.py, rates.py):
aligned columns, a function as "name (file:line)", counts in words."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from .analysis import Symbol


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]
) -> List[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
        return ("  " + "  ".join(parts)).rstrip()

    return [line(headers)] + [line(row) for row in rows]


def name_and_location(entry: Dict[str, Any]) -> Tuple[str, str]:
    if entry.get("filename") is None:
        return entry["qualname"], "[native]"
    lineno = entry["lineno"]
    symbol = Symbol(False, entry["qualname"], entry["filename"], -1 if lineno is None else lineno)
    return entry["qualname"], symbol.short_location


def function_text(entry: Dict[str, Any]) -> str:
    name, location = name_and_location(entry)
    return f"{name} ({location})"


def plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"
