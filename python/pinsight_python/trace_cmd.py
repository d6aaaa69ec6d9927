"""``pinsight-python trace`` and ``pinsight-python startup-file``.

``trace`` makes sure an LTTng session daemon runs, creates a uniquely named session
(the provider's events, vpid/vtid/procname contexts, a channel large enough for
call-heavy programs), runs the command with tracing switched on through the
environment (so Python children trace too), stops and destroys the session, keeps
the trace, prints where it is and a short summary on stderr, and exits with the
command's exit status. With ``--relayd HOST[:CTRL[:DATA]]`` the session streams the
trace to an lttng-relayd instead (no summary then: the trace is on the relay host).

For cli.py's table: ``configure_trace``/``run_trace`` and
``configure_startup_file``/``run_startup_file``; or ``add_parser(subparsers)``
and ``run(args)`` for both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from . import _startup, lttng

TRACE_HELP = "run a command with Python tracing in a new LTTng session"
STARTUP_FILE_HELP = "print the path of activate.py, the file to name in PYTHONSTARTUP"

EXIT_FAILED = 1  # LTTng could not be set up; nothing was run
EXIT_USAGE = 2
EXIT_NOT_EXECUTABLE = 126  # the shell's numbers for a command that cannot run
EXIT_NOT_FOUND = 127
SI_KERNEL = 0x80  # siginfo si_code of a signal the terminal sent (Linux)
# Signals passed on to the command when someone sends them to us alone.
RELAYED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_TRACE_EPILOG = """\
The command runs with PINSIGHT_PYTHON=1 (and PINSIGHT_TRACE_PYTHON, PINSIGHT_PYTHON_EVENTS,
PINSIGHT_TRACE_CONFIG_FILE, PINSIGHT_PYTHON_BACKEND as the options say) in its
environment: every Python interpreter it starts, itself included, activates tracing at
start-up. Ctrl-C reaches the command; the trace is stopped and kept either way.
Exit status: the command's (128+N if signal N killed it), 127 command not found,
2 bad arguments, 1 LTTng could not be set up.

With --relayd, the session streams the trace to an LTTng relay daemon (lttng-relayd,
ports 5342/5343 by default) instead of writing it here; the relay daemon writes it under
its output directory as HOSTNAME/SESSION-YYYYmmdd-HHMMSS. Only this host's processes are
recorded: on a cluster, each node needs its own session (docs/cluster.md).

examples:
  pinsight-python trace -o sim-trace -- python sim.py --steps 100
  pinsight-python trace --relayd collector -- python sim.py
  pinsight-python trace --relayd 10.0.0.5:6342:6343 -- python sim.py
"""


def _error(message: str, prog: str = "pinsight-python trace") -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)


# ---------------------------------------------------------------------------- parsers


def configure_trace(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _TRACE_EPILOG
    parser.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="where LTTng writes the trace; must not exist or be empty "
        "(default: ./pinsight-trace-YYYYmmdd-HHMMSS)",
    )
    parser.add_argument(
        "--relayd",
        metavar=lttng.RELAYD_SPEC_HELP,
        help="stream the trace to the LTTng relay daemon on HOST (control and data ports: "
        f"default {lttng.RELAYD_CTRL_PORT} and {lttng.RELAYD_DATA_PORT}; an IPv6 address in "
        "brackets) instead of writing it locally; not with -o",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="PInsight trace configuration file for the command"
    )
    parser.add_argument(
        "--events",
        metavar="LIST",
        help="function, c_call, import, alloc (default: function,c_call)",
    )
    parser.add_argument(
        "--alloc",
        action="store_true",
        help="sample allocations (adds alloc to the events) including malloc from native "
        "code: preloads pinsight-python's malloc interposer (LD_PRELOAD)",
    )
    parser.add_argument(
        "--mode",
        metavar="MODE",
        help="TRACING, MONITORING, STANDBY or OFF (default: PINSIGHT_TRACE_PYTHON if set, "
        "else the configuration's trace_mode, TRACING without one)",
    )
    parser.add_argument(
        "--backend", metavar="NAME", help="auto, sys.monitoring or setprofile (default: auto)"
    )
    parser.add_argument(
        "--no-summary", action="store_true", help="do not read the trace back for a summary"
    )
    parser.add_argument(
        # Not "command": cli.py's subparsers store the subcommand's name there.
        "command_argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS ...]",
        help="the command to run, after '--'",
    )


def configure_startup_file(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "example: PYTHONSTARTUP=$(pinsight-python startup-file) python sim.py"
        " (inside an LTTng session)"
    )


def add_parser(subparsers: Any) -> None:
    """Add ``trace`` and ``startup-file`` to an argparse subparsers object."""
    trace = subparsers.add_parser("trace", help=TRACE_HELP, description=TRACE_HELP)
    configure_trace(trace)
    trace.set_defaults(run=run_trace, pinsight_subcommand="trace")
    startup = subparsers.add_parser(
        "startup-file", help=STARTUP_FILE_HELP, description=STARTUP_FILE_HELP
    )
    configure_startup_file(startup)
    startup.set_defaults(run=run_startup_file, pinsight_subcommand="startup-file")


def run(args: argparse.Namespace) -> int:
    """Run the subcommand add_parser() parsed."""
    if getattr(args, "pinsight_subcommand", "") == "startup-file":
        return run_startup_file(args)
    return run_trace(args)


def run_startup_file(args: argparse.Namespace) -> int:
    path = _startup.startup_file()
    if not os.path.isfile(path):
        _error(f"{path} is missing: reinstall pinsight-python", "pinsight-python startup-file")
        return EXIT_FAILED
    print(path)
    return 0


# ---------------------------------------------------------------------------- trace


class _Plan:
    """The validated request: what to run, where the trace goes, the child's environment.

    With a relay daemon (``relayd_url``), ``output`` is None: the trace goes there.
    """

    def __init__(
        self,
        command: List[str],
        output: Optional[Path],
        env: Dict[str, str],
        relayd_url: Optional[str] = None,
    ) -> None:
        self.command = command
        self.output = output
        self.env = env
        self.relayd_url = relayd_url


def parse_relayd_option(value: str, option: str = "--relayd") -> str:
    """``HOST[:CTRL_PORT[:DATA_PORT]]`` -> the session's URL; SettingsError if malformed."""
    try:
        return lttng.relayd_url(*lttng.parse_relayd(value))
    except ValueError as e:
        raise _startup.SettingsError(
            f"{option} {value!r}: {e}; expected {lttng.RELAYD_SPEC_HELP}, e.g. collector, "
            "10.0.0.5:5342:5343 or [fd00::5]"
        ) from None


def _default_output() -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path.cwd() / f"pinsight-trace-{stamp}"
    candidate, n = base, 1
    while candidate.exists():
        candidate = base.with_name(f"{base.name}-{n}")
        n += 1
    return candidate


def _plan(args: argparse.Namespace) -> _Plan:
    """Raises _startup.SettingsError (exit 2) or _NotRunnable (exit 126/127)."""
    command = list(args.command_argv)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise _startup.SettingsError("no command given (usage: pinsight-python trace -- COMMAND)")
    events = _startup.parse_events(args.events, "--events") if args.events is not None else None
    mode = _startup.parse_mode(args.mode, "--mode") if args.mode is not None else None
    backend = (
        _startup.parse_backend(args.backend, "--backend") if args.backend is not None else None
    )
    config = _startup.check_config(args.config, "--config") if args.config is not None else None
    relayd = getattr(args, "relayd", None)
    url = parse_relayd_option(relayd) if relayd is not None else None
    if url is not None and args.output:
        raise _startup.SettingsError(
            "-o and --relayd exclude each other: with --relayd, the relay daemon writes "
            "the trace under its own output directory"
        )
    _check_runnable(command[0])

    output: Optional[Path]
    if url is not None:
        output = None
    elif args.output:
        output = Path(args.output).absolute()
        if output.exists() and (not output.is_dir() or any(output.iterdir())):
            raise _startup.SettingsError(
                f"-o {args.output}: exists and is not an empty directory (LTTng would mix "
                "this trace with what is there): choose another"
            )
    else:
        output = _default_output()

    env = dict(os.environ)
    if getattr(args, "alloc", False):
        events = list(events or _startup.EVENT_NAMES)
        if "alloc" not in events:
            events.append("alloc")
        preload = alloc_preload_library()
        if not preload.is_file():
            raise _startup.SettingsError(
                f"--alloc: {preload} is missing: reinstall pinsight-python"
            )
        env["LD_PRELOAD"] = " ".join(p for p in (str(preload), env.get("LD_PRELOAD", "")) if p)
    _startup.export_settings(env, events=events, mode=mode, config=config, backend=backend)
    return _Plan(command, output, env, url)


def alloc_preload_library() -> Path:
    """The malloc interposer `trace --alloc` preloads, installed beside the extension."""
    import importlib.util

    spec = importlib.util.find_spec("pinsight_python._pinsight_python")
    folder = Path(spec.origin).resolve().parent if spec and spec.origin else Path(__file__).parent
    return folder / "libpinsight_alloc_preload.so"


class _NotRunnable(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _check_runnable(program: str) -> None:
    # Checked before a session exists, so that a typo costs no LTTng session.
    if "/" in program:
        if not os.path.exists(program):
            raise _NotRunnable(f"{program}: no such file", EXIT_NOT_FOUND)
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise _NotRunnable(f"{program}: not an executable file", EXIT_NOT_EXECUTABLE)
    elif shutil.which(program) is None:
        raise _NotRunnable(f"{program}: command not found", EXIT_NOT_FOUND)


def _wait_relaying_signals(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the command; pass on the signals meant for it.

    A signal the terminal sends (Ctrl-C, Ctrl-\\) reaches the whole foreground
    process group, the command included: we only note it and keep waiting, so
    that the session is stopped after the command is done. A signal sent to us
    alone (kill) is relayed to the command, unless its sender is in our process
    group (the command signalling its own group).
    """
    # SIGCHLD only wakes us up; the timeout covers a child reaped elsewhere.
    watched = {*RELAYED_SIGNALS, signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        while True:
            status = proc.poll()
            if status is not None:
                return status
            info = signal.sigtimedwait(watched, 0.5)
            if info is None or info.si_signo == signal.SIGCHLD or info.si_code == SI_KERNEL:
                continue
            try:
                same_group = os.getpgid(info.si_pid) == os.getpgrp()
            except OSError:
                same_group = False
            if not same_group:
                try:
                    os.kill(proc.pid, info.si_signo)
                except ProcessLookupError:
                    pass
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def run_trace(args: argparse.Namespace) -> int:
    try:
        plan = _plan(args)
    except _startup.SettingsError as e:
        _error(str(e))
        return EXIT_USAGE
    except _NotRunnable as e:
        _error(str(e))
        return e.status

    session = lttng.Session(plan.output, set_url=plan.relayd_url)
    try:
        lttng.lttng_binary()  # the clearest message when LTTng is not installed at all
        started_daemon = lttng.ensure_sessiond()
        session.create()
        session.start()
    except lttng.LttngError as e:
        _error(str(e))
        return EXIT_FAILED
    except OSError as e:  # e.g. a helper the daemon check runs is missing
        _error(f"cannot set up LTTng: {e}")
        return EXIT_FAILED
    if started_daemon:
        print("pinsight-python trace: started an LTTng session daemon", file=sys.stderr)

    status: Optional[int] = None
    try:
        try:
            proc = subprocess.Popen(plan.command, env=plan.env)
        except OSError as e:
            _error(f"{plan.command[0]}: {e.strerror}")
            status = EXIT_NOT_EXECUTABLE
        else:
            returncode = _wait_relaying_signals(proc)
            status = returncode if returncode >= 0 else 128 - returncode
    finally:
        # Stopping waits until LTTng has written every buffered event; after a
        # failure above, the session still must not outlive us.
        try:
            session.destroy()
        except lttng.LttngError as e:
            _error(f"stopping the session {session.name}: {e}")

    if plan.output is None:
        # The trace is on the relay host; where its daemon writes is not known here.
        print(
            f"pinsight-python trace: trace streamed to the relay daemon at {plan.relayd_url} "
            f"(LTTng session {session.name}, now destroyed); on the relay host it is in "
            f"RELAYD_OUTPUT/{socket.gethostname()}/{session.name}-YYYYmmdd-HHMMSS, "
            "RELAYD_OUTPUT being lttng-relayd's --output (default: ~/lttng-traces)",
            file=sys.stderr,
        )
        return status
    print(
        f"pinsight-python trace: trace written to {plan.output} "
        f"(LTTng session {session.name}, now destroyed)",
        file=sys.stderr,
    )
    if not args.no_summary:
        for line in summarize(plan.output):
            print(f"  {line}", file=sys.stderr)
    return status


# ---------------------------------------------------------------------------- summary


def summarize(trace_dir: Path) -> List[str]:
    """The end-of-run summary, computed by the trace reader (summary.py)."""
    from .summary import summarize as read_summary

    return read_summary(trace_dir)


# ---------------------------------------------------------------------------- standalone


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pinsight-python")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_parser(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m pinsight_python.trace_cmd trace|startup-file ...`` (until cli.py has them)."""
    args = build_parser().parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
