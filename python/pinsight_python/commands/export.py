"""``pinsight-python export``: a trace converted for other tools (the conversion
itself: ``pinsight_python.reading.export``)."""

from __future__ import annotations

import argparse
import os
import sys

from ..exit_status import EXIT_OK
from . import reading_options as options

HELP = "convert a trace (Perfetto's own format, or Chrome trace-event JSON)"
EXAMPLES = (
    "pinsight-python export -o run.pftrace sim-trace   # open in https://ui.perfetto.dev",
    "pinsight-python export --format perfetto -o run.pb sim-trace",
    "pinsight-python export -o sim.json sim-trace      # chrome://tracing",
    "pinsight-python export -o - sim-trace | gzip > sim.json.gz",
)


def configure(parser: argparse.ArgumentParser) -> None:
    from ..reading.export import FORMATS

    options.add_trace_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="perfetto: Perfetto's own protobuf format, read natively by "
                        "Perfetto UI and trace_processor at any size; chrome: Chrome "
                        "trace-event JSON for chrome://tracing and the tools that read it "
                        "(default: perfetto for an output ending in .pftrace or "
                        ".perfetto-trace, else chrome)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the file to write ('-': stdout, chrome only)")
    options.add_filter_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..reading.export import PERFETTO_UI_BYTES, export_chrome, export_perfetto, format_for

    chosen = format_for(args.output, args.format)
    if chosen == "perfetto" and args.output == "-":
        args.subparser.error("--format perfetto writes a file (-o FILE): its format is binary")
    options.check_output(args.output)
    sources = ", ".join(args.trace_dir)
    if chosen == "perfetto":
        trace = export_perfetto(args.trace_dir, args.output, progress=args.progress,
                                filters=options.filters(args))
        options.warn_discards(trace)
        print(f"wrote {args.output}: {trace.raw.perfetto_packets:,} packets from "
              f"{trace.events:,} events read in {sources}; open it in "
              "https://ui.perfetto.dev", file=sys.stderr)
        return EXIT_OK
    trace = export_chrome(args.trace_dir, args.output, progress=args.progress,
                          filters=options.filters(args))
    options.warn_discards(trace)
    if args.output != "-":
        print(f"wrote {args.output}: {trace.raw.chrome_events:,} trace events from "
              f"{trace.events:,} events read in {sources}", file=sys.stderr)
        size = os.path.getsize(args.output)
        if size > PERFETTO_UI_BYTES:
            print(f"pinsight-python: warning: {args.output} is {size / 2**30:.1f} GiB of JSON: "
                  "too large for Perfetto UI (about 2 GB of browser memory) and chrome://tracing; "
                  "write Perfetto's own format instead, about a tenth of the size: "
                  "pinsight-python export --format perfetto -o trace.pftrace", file=sys.stderr)
    return EXIT_OK
