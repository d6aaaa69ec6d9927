"""What the commands that make an LTTng session (trace, attach) share: the trace's format."""

from __future__ import annotations

import argparse

from ..recording import lttng


def add_trace_format_argument(parser: argparse.ArgumentParser) -> None:
    """--trace-format: CTF 1.8 unless CTF 2 is asked for (recording/lttng.py)."""
    parser.add_argument(
        "--trace-format", choices=lttng.TRACE_FORMATS, default=lttng.DEFAULT_TRACE_FORMAT,
        help="the trace's format: ctf-1.8 (the default), which Trace Compass and "
        "babeltrace2 2.0 read, or ctf-2, LTTng's own default from 2.15 on, which needs "
        "LTTng 2.15 or later, and babeltrace2 2.1 to read it back",
    )
