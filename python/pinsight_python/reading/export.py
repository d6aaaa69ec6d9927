"""``pinsight-python export``: convert a trace for other viewers.

``perfetto``: Perfetto's own format (the ``Trace`` protobuf of
protos/perfetto/trace: ``TracePacket``\\ s holding ``TrackEvent``\\ s), which
https://ui.perfetto.dev and trace_processor read natively at any size: a packet
sequence per thread with interned names and delta-encoded timestamps, deflated
in chunks (``compressed_packets``). The reader writes it while it reads
(src/reader/perfetto_trace_writer), so memory stays bounded; docs/analysis.md
describes its tracks.

``chrome``: Chrome trace-event JSON (chrome://tracing, and Perfetto UI's legacy
importer). A begin ("B") and an end ("E") event per frame segment, in time
order, pid = vpid and tid = vtid, native calls nested in their Python caller,
process and thread names as metadata ("M") events, LTTng's discarded events as
global instant events; about 100 bytes per event.

Either file is written under a temporary name in the output's folder and
renamed once complete: an interrupted or failed export leaves no file that
looks complete.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence

from .analysis import ReadFilter, TraceData, TraceReadError, read_trace

__all__ = [
    "FORMATS",
    "PERFETTO_SUFFIXES",
    "PERFETTO_UI_BYTES",
    "export_chrome",
    "export_perfetto",
    "format_for",
]

FORMATS = ("chrome", "perfetto")
# Output names that choose the format when --format is not given.
PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")
# Perfetto UI loads a trace into about 2 GB of browser memory, and its legacy
# JSON importer needs several times the file's size: past this a JSON export
# says to write Perfetto's own format instead.
PERFETTO_UI_BYTES = 1 << 30


def format_for(output: str, chosen: Optional[str]) -> str:
    """The format to write: the one chosen, else the output's suffix's, else chrome."""
    if chosen is not None:
        return chosen
    return "perfetto" if output.endswith(PERFETTO_SUFFIXES) else "chrome"


def _written_whole(output: str | os.PathLike[str], write: Any) -> TraceData:
    """``write(path)`` into a temporary file beside ``output``, renamed to it once
    complete; removed when anything fails (a full disk, Ctrl-C, a bad trace)."""
    final = Path(output)
    partial = final.with_name(final.name + ".partial")
    done = False
    try:
        trace: TraceData = write(partial)
        _check_events(trace)
        os.replace(partial, final)
        done = True
        return trace
    finally:
        if not done:
            partial.unlink(missing_ok=True)


def _check_events(trace: TraceData) -> None:
    """A trace without our events (nor any other provider's region) is not a
    pinsight-python trace: an error rather than an empty timeline."""
    raw = trace.raw
    if raw.events == 0 and not raw.native:
        raise TraceReadError(
            f"{trace.path}: no python_pinsight_lttng_ust events in this trace "
            f"({raw.other_events:,} events of other providers): expected a trace "
            "recorded by pinsight-python trace, or an LTTng session with "
            "python_pinsight_lttng_ust:* enabled")


def export_chrome(
    trace_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    progress: str = "auto",
    filters: Optional[ReadFilter] = None,
) -> TraceData:
    """Writes Chrome trace-event JSON to ``output`` (``-`` for stdout); returns the
    trace's aggregates."""
    if str(output) == "-":
        return read_trace(trace_path, call_trees=False, chrome_path="/dev/stdout",
                          progress=progress, filters=filters)
    return _written_whole(output, lambda partial: read_trace(
        trace_path, call_trees=False, chrome_path=partial, progress=progress, filters=filters))


def export_perfetto(
    trace_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    progress: str = "auto",
    filters: Optional[ReadFilter] = None,
    compress: bool = True,
) -> TraceData:
    """Writes Perfetto's protobuf trace to ``output`` (a file: the format is binary);
    returns the trace's aggregates. ``compress=False`` writes plain packets, for
    protobuf readers that do not inflate ``compressed_packets``."""
    return _written_whole(output, lambda partial: read_trace(
        trace_path, call_trees=False, perfetto_path=partial, compress=compress,
        progress=progress, filters=filters, progress_label="exporting"))
