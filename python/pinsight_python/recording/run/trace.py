"""A ``pinsight-python trace`` run, from its parsed options to its exit status.

:func:`run` makes the :mod:`plan` (every check before anything starts), sets up the
LTTng :mod:`session` (which records no process until one asks), starts the
:mod:`keeper` (which tracks the run's processes into it, and ends the run if
``trace`` dies), lets the :mod:`supervisor` start the command and answer signals
until it ends, then destroys the session, keeps the trace, says where it is and
prints a short summary. ``trace`` itself never dies of the signals it answers: the
session is always destroyed and the trace kept.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any, Dict, List

from ...activation.join import ENV_DAEMON, ENV_SOCKET
from ...exit_status import EXIT_FAILED
from .. import lttng
from . import flight as run_flight
from . import keeper as run_keeper
from . import plan as run_plan
from . import session as run_session
from .supervisor import FORWARDED_SIGNALS, RELAYED_SIGNALS, Supervisor, how_it_ended

PROG = run_plan.PROG
# How long trace waits for the dump of the command's bad end.
DUMP_AT_END_WAIT = 120.0


def _error(message: str) -> None:
    run_session.error(PROG, message)


def _note(message: str) -> None:
    run_session.note(PROG, message)


def run(args: argparse.Namespace, restore_handlers: bool = True) -> int:
    """The run of ``pinsight-python trace`` with these options; its exit status.

    The signals trace answers are only noted (a handler that records them) until the
    command starts; SIGUSR1 and SIGUSR2 are ignored once it has ended: one that comes
    while trace writes its summary, or as it exits, cannot end it. `restore_handlers`
    puts their handlers back when it returns; the program itself (cli.main with no
    arguments) leaves them ignored, and exits."""
    # Noted, not answered, before the command starts: LTTng's own programs, the
    # session daemon among them, start with the mask we were given.
    noted: List[int] = []
    answered = (*RELAYED_SIGNALS, *FORWARDED_SIGNALS)
    previous: Dict[signal.Signals, Any] = {
        signo: signal.signal(signo, lambda n, _f: noted.append(n)) for signo in answered
    }
    try:
        return _run_trace(args, noted, previous)
    finally:
        if restore_handlers:
            _restore_handlers(previous)


def _restore_handlers(previous: Dict[signal.Signals, Any]) -> None:
    """Puts back the handlers Python can put back. None is a handler installed outside
    Python (libpinsight.so, preloaded into trace too, sets a C handler for SIGUSR1):
    it cannot be reinstalled from here, and trace ends just after."""
    for signo, handler in previous.items():
        if handler is not None:
            signal.signal(signo, handler)


def _run_trace(
    args: argparse.Namespace, noted: List[int], handlers: Dict[signal.Signals, Any]
) -> int:
    try:
        plan = run_plan.make(args)
    except run_plan.Refused as e:
        _error("\n".join(e.messages))
        return e.status
    for line in plan.warnings:
        _note(f"warning: {line}")

    session = _session_of(plan)
    recorder = run_session.Recording(PROG, session)
    marker = f"{run_keeper.ENV_RUN}={session.name}"
    dumps = (None if plan.flight_bytes is None
             else run_flight.Dumps(session, plan.output, plan.flight_bytes, _note))
    try:
        recorder.start(sweep_abandoned=True)
        keeper = run_keeper.Keeper(session.name, marker, dumps)
    except run_session.SETUP_ERRORS as e:
        recorder.abandon(e)
        return EXIT_FAILED
    env = _run_env(plan, session.name, keeper)
    if dumps is not None:
        keeper.describe_run(os.getpid(), env)

    # From here until the session is destroyed, the signals we answer are blocked
    # and taken with sigtimedwait (which tells who sent them): none can end us.
    old_mask = signal.pthread_sigmask(
        signal.SIG_BLOCK, {*RELAYED_SIGNALS, *FORWARDED_SIGNALS, signal.SIGCHLD}
    )
    ignored = [signo for signo, handler in handlers.items() if handler == signal.SIG_IGN]
    # The keeper answers the run's processes from a thread of ours, started once the
    # command runs (the command is forked with no thread running); until then their
    # requests wait in its socket's backlog.
    supervisor = Supervisor(plan, env, marker.encode(), old_mask, ignored, started=keeper.serve,
                            dump=None if dumps is None else dumps.on_usr2)
    for signo in noted:
        supervisor.relay(signo, False) if signo in RELAYED_SIGNALS else supervisor.forward(signo)
    try:
        status = supervisor.run()
        if dumps is not None:
            _dump_bad_end(dumps, supervisor)
    finally:
        # Stopping waits until LTTng has written every buffered event; after a
        # failure above, the session still must not outlive us.
        keeper.stop()
        recorder.destroy()
    unrecorded = keeper.finish(plan.output)
    # What came after the command's end has no one to go to: dropped. From here on
    # the signals that end a run (SIGINT, SIGTERM, ...) act as they did before the
    # run; SIGUSR1 and SIGUSR2, whose default ends a process and which a job script
    # sends to reach the command, are ignored (SIG_IGN, not a Python handler: the
    # interpreter's finalization puts a Python handler's signal back to its default).
    supervisor.drain(answer=False)
    _restore_handlers({signo: h for signo, h in handlers.items() if signo in RELAYED_SIGNALS})
    for signo in FORWARDED_SIGNALS:
        signal.signal(signo, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)

    ended = how_it_ended(supervisor.returncode, supervisor.stopped_by)
    if dumps is not None:
        _tell_dumps(plan, recorder, dumps, ended)
    elif plan.output is None:
        _tell_streamed(plan, session.name, ended)
    else:
        _tell_written(plan, recorder, unrecorded, keeper.problems, ended)
    return status


def _session_of(plan: run_plan.Plan) -> lttng.Session:
    """The run's session. It records no process but those of this run (keeper.py:
    they ask the run's keeper to track them as they start); a flight recorder's is
    a snapshot session."""
    events = [f"{lttng.PROVIDER}:*", *(f"{lttng.NATIVE_DOMAINS[d]}:*" for d in plan.domains)]
    return lttng.Session(plan.output, set_url=plan.relayd_url, track_nobody=True,
                         subbuf_size=plan.subbuf_size, num_subbuf=plan.num_subbuf,
                         events=events, snapshot=plan.flight_bytes is not None,
                         trace_format=plan.trace_format)


def _tell_written(plan: run_plan.Plan, recorder: run_session.Recording, unrecorded: List[str],
                  problems: List[str], ended: str) -> None:
    assert plan.output is not None
    recorder.tell_written(plan.output, ended)
    if unrecorded:
        _tell_unrecorded(plan.output, unrecorded, problems)
    if plan.summary:
        recorder.print_summary(plan.output)


def _dump_bad_end(dumps: run_flight.Dumps, supervisor: Supervisor) -> None:
    """The command ended badly (not by a signal trace relayed): a dump, unless one of
    the run's processes dumped its own end moments ago (the command's failure
    follows it: mpirun after a rank's crash, python after its exception)."""
    code = supervisor.returncode
    if code is None or code == 0 or supervisor.stopped_by is not None:
        return
    if dumps.recent_end_dump():
        return
    if code < 0:
        try:
            reason = f"signal-{signal.Signals(-code).name}"
        except ValueError:
            reason = f"signal-{-code}"
    else:
        reason = f"exit-{code}"
    request = dumps.request(reason, "", f"the command ended ({reason})")
    request.done.wait(DUMP_AT_END_WAIT)


def _tell_dumps(plan: run_plan.Plan, recorder: run_session.Recording, dumps: run_flight.Dumps,
                ended: str) -> None:
    """Where the dumps are; a run without one wrote nothing."""
    names = [d["name"] for d in dumps.taken]
    where = plan.output if plan.output is not None else f"the relay daemon at {plan.relayd_url}"
    session = f"(LTTng session {recorder.session.name}, now destroyed)"
    if not names:
        if plan.output is not None:
            recorder.discard(quiet=True)
        _note(f"flight recorder: no dump was taken, nothing was written {session}{ended}")
        return
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    _note(f"flight recorder: {len(names)} dump(s) in {where} {session}: {shown}{ended}")
    if plan.output is None:
        return
    last = plan.output / names[-1]
    _note(f"read one with: pinsight-python report {last}")
    if plan.summary:
        _print_open_stacks(last)


def _print_open_stacks(dump: os.PathLike[str]) -> None:
    """The last dump's open stacks (the report's first section) on stderr: in a
    job's log, where each process was when it went wrong."""
    import sys

    from ...reading.analysis import TraceNotFoundError, TraceReadError, read_trace
    from ...reading.dumps import dump_lines, dump_section

    try:
        section = dump_section(read_trace(dump, call_trees=False, progress="never"))
    except (TraceNotFoundError, TraceReadError) as e:
        _note(f"the dump could not be read back: {e}")
        return
    except KeyboardInterrupt:
        return
    if section is not None:
        for line in dump_lines(section):
            print(f"  {line}", file=sys.stderr)


def _run_env(plan: run_plan.Plan, session: str, keeper: run_keeper.Keeper) -> Dict[str, str]:
    """The plan's environment, and the run's own: its marker, the keeper's socket, the
    registration socket of the session daemon the session is in (when it can be told)."""
    from ...activation.lttng_versions import daemon_socket

    env = {**plan.env, run_keeper.ENV_RUN: session, ENV_SOCKET: str(keeper.socket)}
    daemon = daemon_socket(lttng.ctl_library()[1])
    if daemon:
        env[ENV_DAEMON] = daemon
    return env


def _tell_unrecorded(output: Path, unrecorded: List[str], problems: List[str]) -> None:
    """The processes that recorded no events, and why (each reason once: a version
    mismatch names both versions)."""
    from ...reading.analysis import UNRECORDED_FILE

    _note(f"{len(unrecorded)} process(es) of the command recorded no events "
          f"(listed in {output / UNRECORDED_FILE}): " + "; ".join(unrecorded[:5]))
    for problem in problems[:3]:
        _note(f"a process recorded nothing: {problem}")


def _tell_streamed(plan: run_plan.Plan, session: str, ended: str) -> None:
    import socket

    # The trace is on the relay host; where its daemon writes is not known here.
    _note(
        f"trace streamed to the relay daemon at {plan.relayd_url} "
        f"(LTTng session {session}, now destroyed); on the relay host it is in "
        f"RELAYD_OUTPUT/{socket.gethostname()}/{session}-YYYYmmdd-HHMMSS, "
        f"RELAYD_OUTPUT being lttng-relayd's --output (default: ~/lttng-traces){ended}"
    )
