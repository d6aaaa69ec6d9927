"""``pinsight-python flamegraph``: a flame graph (SVG) or folded stacks of a trace
(the view itself: ``pinsight_python.reading.flamegraph``)."""

from __future__ import annotations

import argparse

from ..exit_status import EXIT_OK
from . import reading_options as options

HELP = "flame graph (SVG) or folded stacks of a trace"
EXAMPLES = (
    "pinsight-python flamegraph -o sim.svg sim-trace",
    "pinsight-python flamegraph --folded sim-trace | flamegraph.pl > sim.svg",
)


def _width(text: str) -> int:
    value = options.positive_or_zero(text)
    if value < 100:
        raise argparse.ArgumentTypeError(f"expected at least 100 pixels, got {value}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    options.add_trace_arguments(parser)
    parser.add_argument("-o", "--output", default="-", metavar="FILE",
                        help="where to write the SVG or folded stacks (default: stdout)")
    parser.add_argument("--folded", action="store_true",
                        help="write collapsed stacks ('proc;thread;f;g;h NANOSECONDS' lines, "
                        "for flamegraph.pl, inferno, speedscope) instead of an SVG")
    parser.add_argument("--title", help="title of the SVG")
    weights = parser.add_mutually_exclusive_group()
    weights.add_argument("--alloc", action="store_true",
                         help="weight stacks by sampled allocated bytes (events = alloc) "
                         "instead of time")
    weights.add_argument("--by-task", action="store_true",
                         help="asyncio: each task's steps under the task (tasks of one name "
                         "together) instead of under the event loop's frames")
    parser.add_argument("--width", type=_width, default=1200,
                        help="SVG width in pixels (default: %(default)s)")
    parser.add_argument("--min-width", type=float, default=0.1, metavar="PX",
                        help="leave out frames narrower than this (default: %(default)s px)")
    options.add_filter_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..reading.flamegraph import alloc_weighted, by_task, render_svg, write_folded

    trace = options.read(args, call_trees=True)
    if args.by_task:
        trace = by_task(trace)
    if args.alloc and args.folded:
        trace = alloc_weighted(trace)
    svg = None if args.folded else render_svg(trace, title=args.title, width=args.width,
                                              min_width=args.min_width, alloc=args.alloc)
    with options.output(args.output) as out:
        if svg is None:
            write_folded(trace, out)
        else:
            out.write(svg)
    return EXIT_OK
