"""``pinsight-python detach``: switch tracing off inside running Python processes
(attach's targets, or any process that activated tracing)."""

from __future__ import annotations

import argparse

from ..recording import attach
from .attach import add_target_arguments, checked_targets

HELP = "stop tracing inside a running Python process that attach activated"
PROG = "pinsight-python detach"
EXAMPLES = (
    "pinsight-python detach 4242",
    "pinsight-python detach $(pgrep -f 'python rank.py')   # every rank",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    targets, status, _ = checked_targets(args, PROG)
    if targets is None:
        return status
    return attach.deactivate_in(targets, args.timeout, PROG)
