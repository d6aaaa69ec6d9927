"""``pinsight-python attach`` and ``detach`` from their checked targets to their exit
status (commands/attach.py and commands/detach.py parse the arguments): each target
checked (``target.py``, ``injection.checked``), a request queued in each at once
(``injection.py``) and its result awaited, and, for attach with -o or --duration, an
LTTng session of our own (``run/session.py``) that records only the targets until
the duration elapses, a stop signal arrives or every target has exited, after which
tracing is switched off again.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..exit_status import EXIT_FAILED, EXIT_OK
from . import lttng
from .injection import Channel, checked, for_each, request_action
from .run import session as run_session
from .target import AttachError, Target, alive

# Blocking signals a user sends to stop a recording (Ctrl-C, kill, a closed terminal).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Recorded(NamedTuple):
    """How attach records its targets: for `duration` seconds (None: until Ctrl-C or
    every target has exited), waiting `timeout` seconds for each request, with the
    closing summary or not, in `trace_format` (--trace-format)."""

    duration: Optional[float]
    timeout: float
    summary: bool
    trace_format: str = lttng.DEFAULT_TRACE_FORMAT


def inspect_all(pids: Sequence[int], prog: str) -> Optional[List[Target]]:
    """Every target checked (injection.checked); None after an error line for each
    that is not fit."""
    targets, failed = [], False
    for pid in pids:
        try:
            targets.append(checked(pid))
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


def activate_in_place(
    targets: Sequence[Target], request: Dict[str, Any], timeout: float, prog: str
) -> int:
    """Tracing switched on in the targets, for the user's own session; the exit status."""
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


def record(
    targets: Sequence[Target],
    request: Dict[str, Any],
    output: Path,
    how: Recorded,
    prog: str,
) -> int:
    """The targets recorded in a session of our own, writing to `output`, until
    `how.duration` elapses, a stop signal arrives or every target has exited, then
    switched off again; the exit status."""
    # Only the targets: other traced programs of the user stay out of this trace.
    session = lttng.Session(output, track_vpids=[t.pid for t in targets],
                            trace_format=how.trace_format)
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
        attached, failed = _activate(targets, request, how.timeout, prog)
        if attached:
            until = f"for {how.duration:g} s" if how.duration else "until Ctrl-C"
            print(f"{prog}: recording {until}...", file=sys.stderr)
            why = _wait_recording([t for t, _, _ in attached], how.duration)
            print(f"{prog}: {why}: detaching", file=sys.stderr)
            failed = not _deactivate(attached, how.timeout, prog) or failed
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        recorder.destroy()
    if not attached:
        recorder.discard()
        return EXIT_FAILED
    recorder.tell_written(output)
    if how.summary:
        recorder.print_summary(output)
    return EXIT_FAILED if failed else EXIT_OK


def deactivate_in(targets: Sequence[Target], timeout: float, prog: str) -> int:
    """Tracing switched off in the targets (detach); the exit status."""
    channels = {t.pid: Channel(t) for t in targets}
    request = {"action": "deactivate"}
    results = for_each(
        targets, lambda t: request_action(t, channels[t.pid], request, timeout, prog)
    )
    failed = False
    for target in targets:
        channels[target.pid].close()
        outcome = results[target.pid]
        if isinstance(outcome, AttachError):
            run_session.error(prog, str(outcome))
            failed = True
        else:
            what = "tracing off" if outcome["was_active"] else "tracing was not active"
            print(f"{prog}: process {target.pid}: {what}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK
