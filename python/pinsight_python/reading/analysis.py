"""Read a pinsight-python trace once; shared by ``report``, ``flamegraph`` and ``export``.

The per-event work (decoding with babeltrace2, replaying stacks, aggregating,
writing Chrome JSON) happens in the compiled ``_pinsight_reader`` module on
threads of its own; this module finds the trace, shows progress and wraps
the aggregates it returns.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Sequence, TextIO, Tuple

if TYPE_CHECKING:  # the compiled module is imported late: `--help` never needs it
    from .._pinsight_reader import ProcessRecord, Progress, TraceResult

__all__ = [
    "ORIGINS",
    "ProgressDisplay",
    "ReadFilter",
    "Symbol",
    "TraceData",
    "TraceNotFoundError",
    "TraceReadError",
    "find_trace_dirs",
    "format_ns",
    "read_trace",
]

PROGRESS_MODES = ("auto", "always", "never")
# The reader's pseudo-file of import frames (src/reader/resource_events.cpp).
IMPORT_FILE = "<import>"

# Where code comes from, the program's own first: the order reports list it in.
ORIGINS = ("program", "library", "stdlib", "frozen", "unknown", "native")


class TraceNotFoundError(Exception):
    """The path given is not (or does not contain) a CTF trace."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class TraceReadError(Exception):
    """babeltrace2 could not read the trace; the message carries its causes."""


# Beside a trace made by ``pinsight-python trace``: processes that recorded no
# events (recording/run/keeper.py writes it, report reads it).
UNRECORDED_FILE = "pinsight-python-unrecorded.txt"


def find_trace_dirs(path: str | os.PathLike[str]) -> List[Path]:
    """The CTF trace directories (holding a ``metadata`` file) under ``path``.

    LTTng writes one per buffer scheme and ABI (``ust/uid/0/64-bit``) or per
    process (``ust/pid/...``); all of them are read together.
    """
    root = Path(path)
    expected = (
        "expected an LTTng trace: the output directory of an LTTng session, "
        "or a directory under it holding a CTF 'metadata' file"
    )
    if not root.exists():
        raise TraceNotFoundError(root, f"no such file or directory ({expected})")
    if not root.is_dir():
        raise TraceNotFoundError(root, f"not a directory ({expected})")
    from .dump_folders import dump_folders

    dumps = dump_folders(root)
    if len(dumps) > 1:
        # A flight recorder's output: each dump is a whole trace of the same ring.
        names = ", ".join(d.name for d in dumps[:5]) + (", ..." if len(dumps) > 5 else "")
        raise TraceNotFoundError(root, f"holds {len(dumps)} flight recorder dumps ({names}): "
                                 "read one of them, e.g. " + str(dumps[-1]))
    if dumps:
        root = dumps[0]
    found: List[Path] = []
    seen = set()
    for dirpath, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:  # a symbolic link loop, or the same trace twice
            dirs.clear()
            continue
        seen.add(real)
        if "metadata" in files:
            found.append(Path(dirpath))
    found.sort()
    if not found:
        raise TraceNotFoundError(root, f"no CTF trace found in this directory ({expected})")
    return found


def format_ns(ns: float) -> str:
    """A duration for people: 3 significant digits, unit chosen to fit."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            value = ns / scale
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"
    return f"{ns:.0f} ns"


def missing_events(raw: TraceResult) -> List[str]:
    """The batched payload's lost records, one line per thread and gap: a block that
    never came (a gap in the thread's record numbers), or a thread whose process ended
    with calls open and without flushing (kill -9, os._exit)."""
    lines = []
    first = raw.first_ns
    # A damaged file loses blocks too: the likelier cause then.
    damaged = any(d.kind != "bad_index" for d in raw.damaged)
    for m in raw.missing_events:
        where = (f"thread {m.vtid} of process {m.vpid} after "
                 f"{format_ns(max(0, m.after_ns - first))}")
        if m.missing:
            lines.append(f"{m.missing:,} events missing on {where} "
                         f"({'a lost block: the trace is damaged' if damaged else 'a lost block'})")
        elif damaged:
            lines.append(f"events missing on {where}: the thread's last block is not in the "
                         "trace (lost to the damage, or the process ended without writing it); "
                         "its calls open then are cut short there")
        else:
            lines.append(f"events missing on {where}: the process ended with calls open "
                         "and without writing its last block (kill -9 or os._exit?); "
                         "its calls open then are cut short there")
    late = raw.late_records
    if late:
        lines.append(f"{late:,} batched records came after later events of their thread had "
                     "been read (a block held back too long, or the 2 million events the reader "
                     "holds ran out): their times were moved forward to keep the order")
    return lines


@dataclass(frozen=True)
class ReadFilter:
    """What a read keeps (the filter options of report, flamegraph and export).

    ``pids``, ``ranks``, ``threads`` (vtids): empty means all. ``modules`` and
    ``excludes`` select Python functions as the configuration's
    ``module_filter`` and ``module_exclude`` do; ``ignore_frozen`` hides
    importlib's frozen frames. A hidden function's time is its caller's self
    time, and the frames it leads to nest in that caller.
    """

    pids: Tuple[int, ...] = ()
    ranks: Tuple[int, ...] = ()
    threads: Tuple[int, ...] = ()
    modules: Tuple[str, ...] = ()
    excludes: Tuple[str, ...] = ()
    ignore_frozen: bool = False

    def __bool__(self) -> bool:
        return any((self.pids, self.ranks, self.threads, self.modules, self.excludes,
                    self.ignore_frozen))

    def describe(self) -> str:
        """The options that built this filter, for messages."""
        parts = [f"--pid {','.join(map(str, self.pids))}" if self.pids else "",
                 f"--rank {','.join(map(str, self.ranks))}" if self.ranks else "",
                 f"--thread {','.join(map(str, self.threads))}" if self.threads else "",
                 f"--module {','.join(self.modules)}" if self.modules else "",
                 f"--exclude {','.join(self.excludes)}" if self.excludes else "",
                 "--ignore-frozen" if self.ignore_frozen else ""]
        return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class Symbol:
    """A Python function (qualname, filename, def line) or a native callee."""

    native: bool
    qualname: str
    filename: str
    lineno: int  # -1: a Python caller whose definition line the trace did not show
    module: str = ""  # derived from the file name by the reader; "" for native calls
    origin: str = "unknown"  # one of ORIGINS

    @property
    def is_import(self) -> bool:
        """An import frame (import_begin/import_end): qualname is the module."""
        return not self.native and self.filename == IMPORT_FILE

    @property
    def location(self) -> str:
        if self.native:
            return "[native]"
        if self.is_import:
            return "[import]"
        line = f":{self.lineno}" if self.lineno >= 0 else ""
        return f"{self.filename}{line}"

    @property
    def short_location(self) -> str:
        """The last two path components: enough to tell files apart in a table."""
        if self.native:
            return "[native]"
        parts = Path(self.filename).parts
        short = str(Path(*parts[-2:])) if len(parts) >= 2 else self.filename
        line = f":{self.lineno}" if self.lineno >= 0 else ""
        return f"{short}{line}"

    @property
    def frame_name(self) -> str:
        """The name of a frame in folded stacks and flame graphs."""
        if self.native:
            return self.qualname
        if self.is_import:
            return f"import {self.qualname}"
        return f"{self.qualname} ({self.location})"

    def as_json(self) -> Dict[str, Any]:
        if self.native:
            return {"kind": "native", "name": self.qualname, "qualname": self.qualname,
                    "filename": None, "lineno": None}
        if self.is_import:
            return {"kind": "import", "name": self.qualname, "qualname": self.qualname,
                    "filename": None, "lineno": None}
        return {
            "kind": "python",
            "name": self.qualname,
            "qualname": self.qualname,
            "filename": self.filename,
            "lineno": self.lineno if self.lineno >= 0 else None,
        }


class TraceData:
    """The aggregates of one trace, as returned by ``_pinsight_reader``."""

    def __init__(self, path: Path, trace_dirs: List[Path], raw: TraceResult,
                 wall_seconds: float, filters: Optional[ReadFilter] = None,
                 paths: Optional[List[Path]] = None) -> None:
        self.path = path  # the first directory given
        self.paths = paths or [path]  # every directory given, read as one trace
        self.trace_dirs = trace_dirs
        self.raw = raw
        self.wall_seconds = wall_seconds
        self.filters = filters or ReadFilter()
        self.symbols = [Symbol(s.native, s.qualname, s.filename, s.lineno, s.module, s.origin)
                        for s in raw.symbols]

    def unrecorded_processes(self) -> List[str]:
        """"PID ARGV" of the processes of a ``trace`` run that recorded no events
        (written beside the trace by ``pinsight-python trace``)."""
        lines: List[str] = []
        for path in self.paths:
            try:
                text = (path / UNRECORDED_FILE).read_text()
            except OSError:
                continue
            lines.extend(ln for ln in text.splitlines() if ln.strip())
        return lines

    @property
    def processes(self) -> List[ProcessRecord]:
        return list(self.raw.processes)

    @property
    def events(self) -> int:
        return self.raw.events

    @property
    def duration_ns(self) -> int:
        return max(0, self.raw.last_ns - self.raw.first_ns)


class ProgressDisplay:
    """A one-line progress bar on stderr for reads that take a while.

    Shown only after ``delay`` seconds, and (in ``auto`` mode) only when
    stderr is a terminal; ``always`` forces it, e.g. for logs.
    """

    WIDTH = 30

    def __init__(self, mode: str = "auto", stream: Optional[TextIO] = None,
                 delay: float = 2.0, label: str = "reading trace") -> None:
        if mode not in PROGRESS_MODES:
            raise ValueError(f"progress mode must be one of {PROGRESS_MODES}, not {mode!r}")
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", lambda: False)
        self.enabled = mode == "always" or (mode == "auto" and bool(isatty()))
        self.delay = delay
        self.label = label
        self.start = time.monotonic()
        self.shown = False

    def update(self, events: int, ts_ns: int, begin_ns: int, end_ns: int) -> None:
        elapsed = time.monotonic() - self.start
        if not self.enabled or elapsed < self.delay:
            return
        rate = events / elapsed if elapsed > 0 else 0.0
        text = f"{self.label}: {events / 1e6:.1f}M events, {rate / 1e6:.2f}M events/s"
        if end_ns > begin_ns and ts_ns >= begin_ns:
            fraction = min(1.0, (ts_ns - begin_ns) / (end_ns - begin_ns))
            filled = int(fraction * self.WIDTH)
            bar = "#" * filled + "." * (self.WIDTH - filled)
            text = f"{self.label} [{bar}] {fraction * 100:3.0f}%, {text[len(self.label) + 2:]}"
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def _distinct_trace_dirs(given: Sequence[Path]) -> List[Path]:
    """The traces under the directories given, each once (the same trace named twice)."""
    trace_dirs: List[Path] = []
    seen = set()
    for directory in given:
        for found in find_trace_dirs(directory):
            if os.path.realpath(found) not in seen:
                seen.add(os.path.realpath(found))
                trace_dirs.append(found)
    return trace_dirs


def read_trace(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    call_trees: bool = True,
    chrome_path: Optional[str | os.PathLike[str]] = None,
    perfetto_path: Optional[str | os.PathLike[str]] = None,
    compress: bool = True,
    progress: str = "auto",
    progress_stream: Optional[TextIO] = None,
    decode_threads: int = 0,
    filters: Optional[ReadFilter] = None,
    progress_label: str = "reading trace",
) -> TraceData:
    """Read the whole trace under ``path`` once: one directory, or several read as
    one trace, as a directory holding them all is (e.g. the traces of several nodes).

    ``call_trees`` keeps per-thread call paths (flame graphs need them);
    ``chrome_path`` also writes Chrome trace-event JSON there, streaming;
    ``perfetto_path`` Perfetto's protobuf instead (its packets deflated unless
    ``compress`` is false);
    ``decode_threads`` caps the decoding threads (0: one per core, at most
    one per data stream); ``filters`` selects what the aggregates and the
    Chrome JSON keep.
    Raises TraceNotFoundError, TraceReadError; KeyboardInterrupt stops the
    reader threads before propagating.
    """
    from .. import _pinsight_reader  # compiled; imported late so `--help` never needs it

    given = [Path(path)] if isinstance(path, (str, os.PathLike)) else [Path(p) for p in path]
    if not given:
        raise TraceNotFoundError(Path("."), "no trace directory given")
    root = given[0]
    trace_dirs = _distinct_trace_dirs(given)
    selected = filters or ReadFilter()
    reader = _pinsight_reader.Analysis(
        [str(d) for d in trace_dirs],
        call_trees=call_trees,
        chrome_path=str(chrome_path) if chrome_path is not None else "",
        perfetto_path=str(perfetto_path) if perfetto_path is not None else "",
        compress=compress,
        decode_threads=decode_threads,
        pids=list(selected.pids),
        ranks=list(selected.ranks),
        threads=list(selected.threads),
        modules=list(selected.modules),
        excludes=list(selected.excludes),
        ignore_frozen=selected.ignore_frozen,
    )
    display = ProgressDisplay(progress, progress_stream, label=progress_label)
    started = time.monotonic()
    try:
        run_with_progress(reader, display)
    except _pinsight_reader.ReaderError as error:
        raise TraceReadError(f"{root}: cannot read the trace: {error}") from error
    wall = time.monotonic() - started
    raw = reader.result()
    if raw.damaged and not raw.events and not raw.other_events:
        # Damage left nothing: what each damaged file said (reading/damage.py's words
        # are for a trace read in part).
        what = "; ".join(dict.fromkeys(f"{d.file}: {d.kind}: {d.detail}" for d in raw.damaged))
        raise TraceReadError(f"{root}: nothing of the trace could be read: {what}")
    return TraceData(root, trace_dirs, raw, wall, selected, paths=given)


class _Job(Protocol):
    """What the reader's long calls offer (Analysis, Unbatcher)."""

    def run(self) -> bool: ...
    def cancel(self) -> None: ...
    def progress(self) -> Progress: ...


def run_with_progress(job: _Job, display: ProgressDisplay) -> None:
    """``job.run()`` on a thread of its own (it releases the GIL), its progress on
    ``display`` meanwhile. Re-raises what run() raised; KeyboardInterrupt (Ctrl-C,
    or run() stopped early) cancels the job and waits for it first."""
    outcome: Dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["completed"] = job.run()  # releases the GIL
        except BaseException as error:
            outcome["error"] = error

    worker = threading.Thread(target=work, name="pinsight-reader", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
            reached = job.progress()
            display.update(reached.events, reached.ts_ns, reached.begin_ns, reached.end_ns)
    except KeyboardInterrupt:
        job.cancel()
        worker.join()
        raise
    finally:
        display.close()
    error = outcome.get("error")
    if error is not None:
        raise error
    if not outcome.get("completed"):
        raise KeyboardInterrupt

