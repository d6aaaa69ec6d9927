"""``pinsight-python attach``: trace a Python process that is already running.

Without -o or --duration, tracing is switched on inside the targets and attach
returns (the user's own session records them). With either, attach records them in a
session of its own until the duration elapses, a stop signal arrives or every target
has exited, then switches tracing off again. The command line only: the attach itself
is recording/attach.py's, how a request gets into a running interpreter injection.py's.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..activation import arguments, settings
from ..exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ..recording import attach
from ..recording.run import session as run_session
from ..recording.target import AttachError, Target
from .recording_options import add_trace_format_argument

HELP = "trace a running Python process (no restart): activate tracing inside it"
PROG = "pinsight-python attach"
DEFAULT_TIMEOUT = 30.0
# How long the target's LTTng-UST may wait for a busy session daemon (see activation/remote.py).
REGISTER_TIMEOUT_MS = 10000
# The settings attach takes: what the target's activate() takes but its module filters.
SETTINGS = ("events", "mode", "backend", "config", "payload")

_EPILOG = """\
Without -o or --duration, tracing is switched on in the running process and attach
returns: record it with your own LTTng session (docs/activation.md), and switch it off
with `pinsight-python detach PID`. With -o DIR (or --duration), attach creates the
session itself as `trace` does, records until --duration elapses, Ctrl-C, or every
target has exited, then switches tracing off, destroys the session and prints a summary.

Tracing starts when the target's main thread next runs Python code: at once for a busy
program, when the call returns for one blocked in a C call (time.sleep, a read). The
target's interpreter must be able to import pinsight_python (install it into the
environment the program runs in). Needs the right to ptrace the process (its owner,
or root); nothing else on x86-64 or with CPython 3.14+ (gdb on other processors).
Exit status: 0, 1 when a target was refused or did not answer, 2 bad arguments.

examples:
  pinsight-python attach 4242 -o app-trace --duration 10
  pinsight-python attach $(pgrep -f 'python rank.py') -o ranks-trace    # MPI ranks
  pinsight-python attach 4242 && sleep 5 && pinsight-python detach 4242   # own session
  pinsight-python attach 4242 --join 4100    # into trace --flight-recorder's run (pid 4100)
"""


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """The targets and how long to wait for each: attach's and detach's."""
    parser.add_argument("pids", metavar="PID", nargs="+", help="process id(s) of the targets")
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="how long to wait for a target's main thread to run Python code "
        "(default: %(default)g s)",
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    add_target_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="record in a new LTTng session writing to DIR (must not exist or be empty)",
    )
    parser.add_argument(
        "--duration",
        metavar="S",
        type=float,
        help="record for S seconds, then detach (default: until Ctrl-C or the targets exit); "
        "implies a new session",
    )
    arguments.add_arguments(parser, SETTINGS, for_target=True)
    add_trace_format_argument(parser)
    parser.add_argument(
        "--join", metavar="TRACE_PID", type=int,
        help="join the flight-recorder run of `pinsight-python trace --flight-recorder` whose "
        "process is TRACE_PID: the targets trace as its processes do, into its ring, and its "
        "dumps hold them (not with -o or --duration)",
    )
    parser.add_argument(
        "--no-summary", action="store_true", help="do not read the trace back for a summary"
    )


def _parse_pids(texts: Sequence[str]) -> List[int]:
    pids: List[int] = []
    for text in texts:
        if not (text.isascii() and text.isdigit()) or int(text) <= 0:
            raise settings.SettingsError(f"PID {text!r}: expected a process id (a positive number)")
        if int(text) not in pids:
            pids.append(int(text))
    return pids


def _activation_request(args: argparse.Namespace) -> Dict[str, Any]:
    errors: List[str] = []
    chosen = arguments.from_arguments(args, errors, SETTINGS)
    if errors:
        raise settings.SettingsError(errors[0])
    # Each under its name, as the target's activate() takes it (activation/remote.py).
    return {"action": "activate", **{name: getattr(chosen, name) for name in SETTINGS},
            "register_timeout_ms": REGISTER_TIMEOUT_MS}


def _output_dir(args: argparse.Namespace) -> Optional[Path]:
    if args.output is None and args.duration is None:
        return None
    if args.duration is not None and args.duration <= 0:
        raise settings.SettingsError(f"--duration {args.duration:g}: expected a positive number")
    if args.output is None:
        return run_session.default_output()
    return run_session.check_new_output(args.output)


def checked_targets(
    args: argparse.Namespace, prog: str, more: Callable[[], Any] = lambda: None
) -> Tuple[Optional[List[Target]], int, Any]:
    """Arguments (and `more()`'s, which may raise SettingsError), then every target:
    (targets, 0, more's value), or (None, exit status, None) after the error lines."""
    try:
        pids = _parse_pids(args.pids)
        if args.timeout <= 0:
            raise settings.SettingsError(f"--timeout {args.timeout:g}: expected a positive number")
        extra = more()
    except settings.SettingsError as e:
        run_session.error(prog, str(e))
        return None, EXIT_USAGE, None
    except AttachError as e:
        run_session.error(prog, str(e))
        return None, EXIT_FAILED, None
    targets = attach.inspect_all(pids, prog)
    return targets, (EXIT_OK if targets is not None else EXIT_FAILED), extra


def run(args: argparse.Namespace) -> int:
    def check() -> Tuple[Dict[str, Any], Optional[Path]]:
        request = _activation_request(args)
        if args.join is not None:
            return _joined_request(args, request), None
        return request, _output_dir(args)

    targets, status, plan = checked_targets(args, PROG, check)
    if targets is None:
        return status
    request, output = plan
    if output is None:
        return attach.activate_in_place(targets, request, args.timeout, PROG)
    how = attach.Recorded(args.duration, args.timeout, summary=not args.no_summary,
                          trace_format=args.trace_format)
    return attach.record(targets, request, output, how, PROG)


def _joined_request(args: argparse.Namespace, request: Dict[str, Any]) -> Dict[str, Any]:
    """--join TRACE_PID: the run's keeper, and its processes' settings where the
    options give none (SettingsError when there is no such run)."""
    from ..recording.run import keeper

    if args.output is not None or args.duration is not None:
        raise settings.SettingsError("--join records into the run's own session: not with -o "
                                     "or --duration")
    found = keeper.find_run(args.join)
    if found is None:
        raise settings.SettingsError(
            f"--join {args.join}: no flight-recorder run of this user has its trace process "
            "there (pinsight-python trace --flight-recorder ...; its pid is trace's)")
    env = found["env"]
    inherited = settings.from_environment(env)
    joined = dict(request)
    for name in SETTINGS:
        if joined.get(name) is None:
            joined[name] = getattr(inherited, name)
    joined["payload"] = settings.Payload.BATCHED
    stall = settings.SETTING["flight_recorder"].read(env) or 0.0
    joined["join"] = {"socket": found["socket"], "stall": stall}
    return joined
