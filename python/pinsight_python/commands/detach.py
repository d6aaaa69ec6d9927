"""``pinsight-python detach``: switch tracing off inside running Python processes
(attach's targets, or any process that activated tracing)."""

from __future__ import annotations

import argparse
import sys

from ..exit_status import EXIT_FAILED, EXIT_OK
from ..recording.injection import AttachError, Channel, for_each, request_action
from ..recording.run import session as run_session
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
    channels = {t.pid: Channel(t) for t in targets}
    request = {"action": "deactivate"}
    results = for_each(
        targets, lambda t: request_action(t, channels[t.pid], request, args.timeout, PROG)
    )
    failed = False
    for target in targets:
        channels[target.pid].close()
        outcome = results[target.pid]
        if isinstance(outcome, AttachError):
            run_session.error(PROG, str(outcome))
            failed = True
        else:
            what = "tracing off" if outcome["was_active"] else "tracing was not active"
            print(f"{PROG}: process {target.pid}: {what}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK
