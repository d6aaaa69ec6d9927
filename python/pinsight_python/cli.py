"""The ``pinsight-python`` command.

Each subcommand is one entry of :data:`SUBCOMMANDS`, the one place where they
are registered: its name, a one-line help, examples, a function that adds its
arguments and a function that runs it and returns the exit status. Every
subcommand's help has the same layout: usage, description, options, examples.
Exit status: 0 success, 1 the trace could not be read or an output not
written, 2 bad arguments (including a path that holds no trace), 130
interrupted; ``trace`` exits with its command's status.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, TextIO, Tuple

from . import attach, trace_cmd
from ._startup import add_version_argument
from .analysis import PROGRESS_MODES, ReadFilter, TraceData, TraceNotFoundError, TraceReadError

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    examples: Sequence[str] = ()  # shown at the end of the subcommand's help


def _positive_or_zero(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _width(text: str) -> int:
    value = _positive_or_zero(text)
    if value < 100:
        raise argparse.ArgumentTypeError(f"expected at least 100 pixels, got {value}")
    return value


def _add_trace_arguments(parser: argparse.ArgumentParser) -> None:
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


def _add_filter_arguments(parser: argparse.ArgumentParser) -> None:
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


def _filters(args: argparse.Namespace) -> ReadFilter:
    def flat(lists: List[List[Any]]) -> Tuple[Any, ...]:
        return tuple(dict.fromkeys(v for values in lists for v in values))

    return ReadFilter(pids=flat(args.pid), ranks=flat(args.rank), threads=flat(args.thread),
                      modules=flat(args.module), excludes=flat(args.exclude),
                      ignore_frozen=args.ignore_frozen)


def _check_output(path: str) -> None:
    """Fails before a long read when the output cannot be written."""
    if path == "-":
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OSError(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise OSError(f"cannot write {path}: directory {parent} is not writable")


def _open_output(path: str) -> TextIO:
    if path == "-":
        return sys.stdout
    return open(path, "w", encoding="utf-8")


# ---------------------------------------------------------------------------- report


def configure_report(parser: argparse.ArgumentParser) -> None:
    _add_trace_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the report as JSON (schema: docs/analysis.md)")
    parser.add_argument("--top", type=_positive_or_zero, default=15, metavar="N",
                        help="rows per table (0: all; default: %(default)s)")
    parser.add_argument("-o", "--output", default="-", metavar="FILE",
                        help="write the report there instead of stdout")
    _add_filter_arguments(parser)


def _warn_discards(trace: TraceData) -> None:
    """Every view says it, on stderr, whatever it writes: the figures are short."""
    raw = trace.raw
    if raw["discarded_events"] or raw["discarded_packets"]:
        lost = (f"{raw['discarded_events']:,} events" if raw["discarded_events"]
                else f"{raw['discarded_packets']:,} packets")
        print(f"pinsight-python: warning: LTTng discarded {lost} of this trace (its buffers "
              "overflowed): functions are cut short and timings too low near them; record "
              "again with more buffer (pinsight-python trace --num-subbuf 32, or "
              "lttng enable-channel --num-subbuf/--subbuf-size)", file=sys.stderr)


def run_report(args: argparse.Namespace) -> int:
    from .analysis import read_trace
    from .report import build_report, render_text

    _check_output(args.output)
    trace = read_trace(args.trace_dir, call_trees=False, progress=args.progress,
                       filters=_filters(args))
    _warn_discards(trace)
    report = build_report(trace, top=args.top)
    out = _open_output(args.output)
    try:
        if args.json:
            json.dump(report, out, indent=2)
            out.write("\n")
        else:
            out.write(render_text(report))
    finally:
        if out is not sys.stdout:
            out.close()
    return EXIT_OK


# ---------------------------------------------------------------------------- flamegraph


def configure_flamegraph(parser: argparse.ArgumentParser) -> None:
    _add_trace_arguments(parser)
    parser.add_argument("-o", "--output", default="-", metavar="FILE",
                        help="where to write the SVG or folded stacks (default: stdout)")
    parser.add_argument("--folded", action="store_true",
                        help="write collapsed stacks ('proc;thread;f;g;h NANOSECONDS' lines, "
                        "for flamegraph.pl, inferno, speedscope) instead of an SVG")
    parser.add_argument("--title", help="title of the SVG")
    parser.add_argument("--alloc", action="store_true",
                        help="weight stacks by sampled allocated bytes (events = alloc) "
                        "instead of time")
    parser.add_argument("--width", type=_width, default=1200,
                        help="SVG width in pixels (default: %(default)s)")
    parser.add_argument("--min-width", type=float, default=0.1, metavar="PX",
                        help="leave out frames narrower than this (default: %(default)s px)")
    _add_filter_arguments(parser)


def run_flamegraph(args: argparse.Namespace) -> int:
    from .analysis import read_trace
    from .flamegraph import render_svg, write_folded

    _check_output(args.output)
    from .flamegraph import alloc_weighted

    trace = read_trace(args.trace_dir, call_trees=True, progress=args.progress,
                       filters=_filters(args))
    _warn_discards(trace)
    if args.alloc and args.folded:
        trace = alloc_weighted(trace)
    svg = None if args.folded else render_svg(trace, title=args.title, width=args.width,
                                              min_width=args.min_width, alloc=args.alloc)
    out = _open_output(args.output)
    try:
        if svg is None:
            write_folded(trace, out)
        else:
            out.write(svg)
    finally:
        if out is not sys.stdout:
            out.close()
    return EXIT_OK


# ---------------------------------------------------------------------------- export


def configure_export(parser: argparse.ArgumentParser) -> None:
    from .export import FORMATS

    _add_trace_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="chrome",
                        help="chrome: Chrome trace-event JSON for Perfetto UI and "
                        "chrome://tracing (default)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the file to write ('-': stdout)")
    _add_filter_arguments(parser)


def run_export(args: argparse.Namespace) -> int:
    from .export import export_chrome

    _check_output(args.output)
    trace = export_chrome(args.trace_dir, args.output, progress=args.progress,
                          filters=_filters(args))
    _warn_discards(trace)
    if args.output != "-":
        print(f"wrote {args.output}: {trace.raw['chrome_events']:,} trace events from "
              f"{trace.events:,} events read in {', '.join(args.trace_dir)}", file=sys.stderr)
    return EXIT_OK


SUBCOMMANDS: List[Subcommand] = [
    # trace and startup-file carry their examples in their own epilog.
    Subcommand("trace", trace_cmd.TRACE_HELP, trace_cmd.configure_trace, trace_cmd.run_trace),
    Subcommand("startup-file", trace_cmd.STARTUP_FILE_HELP, trace_cmd.configure_startup_file,
               trace_cmd.run_startup_file),
    Subcommand("attach", attach.ATTACH_HELP, attach.configure_attach, attach.run_attach),
    Subcommand("detach", attach.DETACH_HELP, attach.configure_detach, attach.run_detach,
               ("pinsight-python detach 4242",
                "pinsight-python detach $(pgrep -f 'python rank.py')   # every rank")),
    Subcommand("report", "per process and thread: top functions, native calls, exceptions",
               configure_report, run_report,
               ("pinsight-python report pinsight-trace-20260121-101500",
                "pinsight-python report --top 40 -o report.txt sim-trace",
                "pinsight-python report --json sim-trace | jq '.processes[0]'")),
    Subcommand("flamegraph", "flame graph (SVG) or folded stacks of a trace",
               configure_flamegraph, run_flamegraph,
               ("pinsight-python flamegraph -o sim.svg sim-trace",
                "pinsight-python flamegraph --folded sim-trace | flamegraph.pl > sim.svg")),
    Subcommand("export", "convert a trace (Chrome trace-event JSON for Perfetto UI)",
               configure_export, run_export,
               ("pinsight-python export -o sim.json sim-trace   # open in https://ui.perfetto.dev",
                "pinsight-python export -o - sim-trace | gzip > sim.json.gz")),
]

_MAIN_EPILOG = """\
examples:
  pinsight-python trace -- python sim.py               # trace a run, keep the trace
  pinsight-python report pinsight-trace-*               # what ran, per process and thread
  pinsight-python flamegraph -o sim.svg pinsight-trace-*
  pinsight-python COMMAND --help                        # each command's options

docs: README.md, docs/activation.md (trace), docs/analysis.md (report, flamegraph, export)
"""


def _epilog(command: Subcommand, parser: argparse.ArgumentParser) -> Optional[str]:
    if not command.examples:
        return parser.epilog
    lines = "\n".join(f"  {example}" for example in command.examples)
    return (parser.epilog + "\n" if parser.epilog else "") + f"examples:\n{lines}\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinsight-python",
        description="Trace Python calls and native calls into LTTng, and analyse the traces.",
        epilog=_MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version_argument(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in SUBCOMMANDS:
        sub = commands.add_parser(
            command.name,
            help=command.help,
            description=command.help[:1].upper() + command.help[1:] + ".",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.configure(sub)
        sub.epilog = _epilog(command, sub)
        sub.set_defaults(run=command.run)
    return parser


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reading end is closed."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"pinsight-python {args.command}"
    try:
        return int(args.run(args))
    except TraceNotFoundError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (TraceReadError, OSError) as error:
        if isinstance(error, BrokenPipeError) or _stdout_closed():
            # The reader of our stdout went away (`| head`): not an error. The C++
            # reader, which writes there itself, reports it as a failed read.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_OK
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
