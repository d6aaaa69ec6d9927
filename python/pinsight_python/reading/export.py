"""``pinsight-python export``: convert a trace for other viewers.

``chrome``: Chrome trace-event JSON (chrome://tracing, https://ui.perfetto.dev).
A begin ("B") and an end ("E") event per frame segment, in time order,
pid = vpid and tid = vtid,
native calls nested in their Python caller, process and thread names as
metadata ("M") events, LTTng's discarded events as global instant events.
The reader writes it while it reads, so memory stays bounded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

from .analysis import ReadFilter, TraceData, read_trace

__all__ = ["FORMATS", "export_chrome"]

FORMATS = ("chrome",)


def export_chrome(
    trace_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    progress: str = "auto",
    filters: Optional[ReadFilter] = None,
) -> TraceData:
    """Writes ``output`` (``-`` for stdout); returns the trace's aggregates.

    A file is written under a temporary name and renamed once complete, so
    an interrupted export leaves no truncated JSON behind.
    """
    if str(output) == "-":
        return read_trace(trace_path, call_trees=False, chrome_path="/dev/stdout",
                          progress=progress, filters=filters)
    final = Path(output)
    partial = final.with_name(final.name + ".partial")
    done = False
    try:
        trace = read_trace(trace_path, call_trees=False, chrome_path=partial, progress=progress,
                           filters=filters)
        os.replace(partial, final)
        done = True
        return trace
    finally:
        if not done and partial.exists():
            partial.unlink()
