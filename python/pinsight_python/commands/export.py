"""``pinsight-python export``: a trace converted for other tools (the conversion
itself: ``pinsight_python.reading.export``)."""

from __future__ import annotations

import argparse
import sys

from ..exit_status import EXIT_OK
from . import reading_options as options

HELP = "convert a trace (Chrome trace-event JSON for Perfetto UI)"
EXAMPLES = (
    "pinsight-python export -o sim.json sim-trace   # open in https://ui.perfetto.dev",
    "pinsight-python export -o - sim-trace | gzip > sim.json.gz",
)


def configure(parser: argparse.ArgumentParser) -> None:
    from ..reading.export import FORMATS

    options.add_trace_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="chrome",
                        help="chrome: Chrome trace-event JSON for Perfetto UI and "
                        "chrome://tracing (default)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the file to write ('-': stdout)")
    options.add_filter_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..reading.export import export_chrome

    options.check_output(args.output)
    trace = export_chrome(args.trace_dir, args.output, progress=args.progress,
                          filters=options.filters(args))
    options.warn_discards(trace)
    if args.output != "-":
        print(f"wrote {args.output}: {trace.raw.chrome_events:,} trace events from "
              f"{trace.events:,} events read in {', '.join(args.trace_dir)}", file=sys.stderr)
    return EXIT_OK
