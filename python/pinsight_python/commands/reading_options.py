"""What the commands that read a trace back (report, flamegraph, export) share:
their arguments (the trace, the progress bar, the filters), checking and opening
the output, and the warnings about what the trace lost (discarded events, damage)."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from typing import Any, Iterator, List, TextIO, Tuple

from ..reading.analysis import PROGRESS_MODES, ReadFilter, TraceData, missing_events
from ..reading.damage import damage_lines


def positive_or_zero(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trace_dir",
        metavar="TRACE_DIR",
        nargs="+",
        help="an LTTng trace: the session's output directory (or any directory under it "
        "holding CTF 'metadata' files); several are read as one trace, as a directory "
        "holding them all is (e.g. the traces of several nodes or runs)",
    )
    parser.add_argument(
        "--progress",
        choices=PROGRESS_MODES,
        default="auto",
        help="progress bar on stderr for long reads: auto (when stderr is a terminal), "
        "always, never (default: %(default)s)",
    )


# The configuration's rule for module_filter entries (src/config.cpp): dotted
# names, no wildcards.
_MODULE_NAME = re.compile(r"[^\W.][\w]*(\.[^\W.][\w]*)*")


def _numbers(text: str) -> List[int]:
    values = []
    for item in text.split(","):
        try:
            value = int(item.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected whole numbers separated by commas, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
        values.append(value)
    return values


def _modules(text: str) -> List[str]:
    names = [name.strip() for name in text.split(",")]
    for name in names:
        if not _MODULE_NAME.fullmatch(name):
            raise argparse.ArgumentTypeError(
                f"expected module names such as numpy or numpy.linalg, got {name!r} (a name "
                "matches the module and its submodules; no wildcards)")
    return names


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "filters",
        "keep part of the trace (options may be repeated, values separated by commas); "
        "a function left out counts as its caller's self time, as with the configuration's "
        "module_filter")
    group.add_argument("--module", type=_modules, action="append", default=[], metavar="NAMES",
                       help="only functions of these modules and their submodules "
                       "(a script's module is __main__, or its file name)")
    group.add_argument("--exclude", type=_modules, action="append", default=[], metavar="NAMES",
                       help="leave out functions of these modules (wins over --module)")
    group.add_argument("--ignore-frozen", action="store_true",
                       help="leave out importlib's frozen frames (<frozen importlib._bootstrap> "
                       "...), the import machinery")
    group.add_argument("--pid", type=_numbers, action="append", default=[], metavar="PIDS",
                       help="only these processes (vpid)")
    group.add_argument("--rank", type=_numbers, action="append", default=[], metavar="RANKS",
                       help="only these MPI ranks")
    group.add_argument("--thread", type=_numbers, action="append", default=[], metavar="TIDS",
                       help="only these threads (vtid: the 'tid N' of the labels)")


def filters(args: argparse.Namespace) -> ReadFilter:
    def flat(lists: List[List[Any]]) -> Tuple[Any, ...]:
        return tuple(dict.fromkeys(v for values in lists for v in values))

    return ReadFilter(pids=flat(args.pid), ranks=flat(args.rank), threads=flat(args.thread),
                      modules=flat(args.module), excludes=flat(args.exclude),
                      ignore_frozen=args.ignore_frozen)


def check_output(path: str) -> None:
    """Fails before a long read when the output cannot be written."""
    if path == "-":
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OSError(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise OSError(f"cannot write {path}: directory {parent} is not writable")


@contextlib.contextmanager
def output(path: str) -> Iterator[TextIO]:
    """The file to write (stdout for '-'), closed afterwards unless it is stdout."""
    if path == "-":
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8") as out:
        yield out


def read(args: argparse.Namespace, call_trees: bool) -> TraceData:
    """The trace the arguments name, read through their filters, after checking the
    output can be written; the warnings about what the trace lost said."""
    from ..reading.analysis import read_trace

    check_output(args.output)
    trace = read_trace(args.trace_dir, call_trees=call_trees, progress=args.progress,
                       filters=filters(args))
    warn_discards(trace)
    return trace


def warn_discards(trace: TraceData) -> None:
    """Every view says it, on stderr, whatever it writes: the figures are short (LTTng
    discarded events, damage to the trace's files, batched records missing)."""
    raw = trace.raw
    if raw.discarded_events or raw.discarded_packets:
        lost = (f"{raw.discarded_events:,} events" if raw.discarded_events
                else f"{raw.discarded_packets:,} packets")
        print(f"pinsight-python: warning: LTTng discarded {lost} of this trace (its buffers "
              "overflowed): functions are cut short and timings too low near them; record "
              "again with more buffer (pinsight-python trace --num-subbuf 32, or "
              "lttng enable-channel --num-subbuf/--subbuf-size)", file=sys.stderr)
    for line in damage_lines(raw) + missing_events(raw):
        print(f"pinsight-python: warning: {line}", file=sys.stderr)
