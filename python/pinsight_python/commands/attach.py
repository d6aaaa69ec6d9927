"""``pinsight-python attach``: trace a Python process that is already running.

Without -o or --duration, tracing is switched on inside the targets and attach
returns (the user's own session records them). With either, attach records them in a
session of its own (recording/run/session.py) until the duration elapses, a stop signal
arrives or every target has exited, then switches tracing off again. How a request
gets into a running interpreter: injection.py.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..activation import settings
from ..exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ..recording import lttng
from ..recording.injection import (
    AttachError,
    Channel,
    Target,
    alive,
    for_each,
    inspect,
    request_action,
)
from ..recording.run import session as run_session
from .recording_options import add_trace_format_argument

HELP = "trace a running Python process (no restart): activate tracing inside it"
PROG = "pinsight-python attach"
DEFAULT_TIMEOUT = 30.0
# How long the target's LTTng-UST may wait for a busy session daemon (see activation/remote.py).
REGISTER_TIMEOUT_MS = 10000
# The settings attach takes: what the target's activate() takes but its module filters.
SETTINGS = ("events", "mode", "backend", "config", "payload")
# Blocking signals a user sends to stop a recording (Ctrl-C, kill, a closed terminal).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

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
    settings.add_arguments(parser, SETTINGS, for_target=True)
    add_trace_format_argument(parser)
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


def _inspect_all(pids: Sequence[int], prog: str) -> Optional[List[Target]]:
    targets, failed = [], False
    for pid in pids:
        try:
            targets.append(inspect(pid))
        except AttachError as e:
            run_session.error(prog, str(e))
            failed = True
    return None if failed else targets


def _describe(result: Dict[str, Any]) -> str:
    status = result.get("status", {})
    return (
        f"CPython {result.get('python', '?')}, backend {status.get('backend') or '-'}, "
        f"mode {status.get('mode', '?')}"
    )


def _activation_request(args: argparse.Namespace) -> Dict[str, Any]:
    errors: List[str] = []
    chosen = settings.from_arguments(args, errors, SETTINGS)
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
    targets = _inspect_all(pids, prog)
    return targets, (EXIT_OK if targets is not None else EXIT_FAILED), extra


def run(args: argparse.Namespace) -> int:
    targets, status, plan = checked_targets(
        args, PROG, lambda: (_activation_request(args), _output_dir(args))
    )
    if targets is None:
        return status
    request, output = plan
    if output is None:
        return _activate_in_place(targets, request, args.timeout, PROG)
    return _record(targets, request, output, args, PROG)


def _activate(
    targets: Sequence[Target], request: Dict[str, Any], timeout: float, prog: str
) -> Tuple[List[Tuple[Target, Channel, Dict[str, Any]]], bool]:
    channels = {t.pid: Channel(t) for t in targets}
    try:
        results = for_each(
            targets, lambda t: request_action(t, channels[t.pid], request, timeout, prog)
        )
    except BaseException:
        # Interrupted: a request not yet claimed is withdrawn with its directory.
        for channel in channels.values():
            channel.close()
        raise
    attached, failed = [], False
    for target in targets:
        outcome = results[target.pid]
        if isinstance(outcome, AttachError):
            run_session.error(prog, str(outcome))
            channels[target.pid].close()
            failed = True
            continue
        already = " (tracing was already active: left as it was)" if outcome["was_active"] else ""
        print(f"{prog}: process {target.pid}: tracing on ({_describe(outcome)}){already}",
              file=sys.stderr)
        attached.append((target, channels[target.pid], outcome))
    return attached, failed


def _deactivate(
    attached: Sequence[Tuple[Target, Channel, Dict[str, Any]]], timeout: float, prog: str
) -> bool:
    """Switch tracing off where we switched it on. Returns False if any failed."""
    todo = [(t, c) for t, c, outcome in attached if not outcome["was_active"] and alive(t.pid)]
    channels = {t.pid: c for t, c in todo}
    results = for_each(
        [t for t, _ in todo],
        lambda t: request_action(t, channels[t.pid], {"action": "deactivate"}, timeout, prog),
    )
    ok = True
    for target, _ in todo:
        if isinstance(results[target.pid], AttachError):
            run_session.error(prog, str(results[target.pid]))
            ok = False
    for _, channel, _ in attached:
        channel.close()
    return ok


def _activate_in_place(
    targets: Sequence[Target], request: Dict[str, Any], timeout: float, prog: str
) -> int:
    attached, failed = _activate(targets, request, timeout, prog)
    for _, channel, _ in attached:
        channel.close()
    return EXIT_FAILED if failed else EXIT_OK


def _wait_recording(targets: Sequence[Target], duration: Optional[float]) -> str:
    """Until the duration elapses, a stop signal arrives, or every target has exited.
    The caller blocks STOP_SIGNALS: one that came earlier is taken here at once."""
    deadline = None if duration is None else time.monotonic() + duration
    while True:
        if not any(alive(t.pid) for t in targets):
            return "every target has exited"
        remaining = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
        if remaining <= 0:
            return f"{duration:g} s elapsed"
        info = signal.sigtimedwait(STOP_SIGNALS, remaining)
        if info is not None:
            return f"{signal.Signals(info.si_signo).name} received"


def _record(
    targets: Sequence[Target],
    request: Dict[str, Any],
    output: Path,
    args: argparse.Namespace,
    prog: str,
) -> int:
    # Only the targets: other traced programs of the user stay out of this trace.
    session = lttng.Session(output, track_vpids=[t.pid for t in targets],
                            trace_format=args.trace_format)
    recorder = run_session.Recording(prog, session)
    try:
        recorder.start()
    except run_session.SETUP_ERRORS as e:
        recorder.abandon(e)
        return EXIT_FAILED
    attached: List[Tuple[Target, Channel, Dict[str, Any]]] = []
    # Ctrl-C (or kill) while targets are being switched on must not leave one traced:
    # the signal waits, blocked, until the recording, which then ends at once.
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        attached, failed = _activate(targets, request, args.timeout, prog)
        if attached:
            until = f"for {args.duration:g} s" if args.duration else "until Ctrl-C"
            print(f"{prog}: recording {until}...", file=sys.stderr)
            why = _wait_recording([t for t, _, _ in attached], args.duration)
            print(f"{prog}: {why}: detaching", file=sys.stderr)
            failed = not _deactivate(attached, args.timeout, prog) or failed
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        recorder.destroy()
    if not attached:
        recorder.discard()
        return EXIT_FAILED
    recorder.tell_written(output)
    if not args.no_summary:
        recorder.print_summary(output)
    return EXIT_FAILED if failed else EXIT_OK
