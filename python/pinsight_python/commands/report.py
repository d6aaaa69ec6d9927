"""``pinsight-python report``: per process and thread, the top functions, native
calls and exceptions of a trace (the view itself: ``pinsight_python.reading.report``)."""

from __future__ import annotations

import argparse
import json

from ..exit_status import EXIT_OK
from . import reading_options as options

HELP = "per process and thread: top functions, native calls, exceptions"
EXAMPLES = (
    "pinsight-python report pinsight-trace-20260121-101500",
    "pinsight-python report --top 40 -o report.txt sim-trace",
    "pinsight-python report --json sim-trace | jq '.processes[0]'",
)


def configure(parser: argparse.ArgumentParser) -> None:
    options.add_trace_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the report as JSON (schema: docs/analysis.md)")
    parser.add_argument("--top", type=options.positive_or_zero, default=15, metavar="N",
                        help="rows per table (0: all; default: %(default)s)")
    parser.add_argument("-o", "--output", default="-", metavar="FILE",
                        help="write the report there instead of stdout")
    options.add_filter_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..reading.report import build_report, render_text

    report = build_report(options.read(args, call_trees=False), top=args.top)
    with options.output(args.output) as out:
        if args.json:
            json.dump(report, out, indent=2)
            out.write("\n")
        else:
            out.write(render_text(report))
    return EXIT_OK
