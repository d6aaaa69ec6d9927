"""A process's end of a ``pinsight-python trace`` run: :func:`join_run`, which
every process of the run calls as it activates tracing (and each child after
``fork``), asks the run's keeper to track its pid into the run's session, then waits
(bounded) until its events are enabled. Only processes started under the run carry
the keeper's socket in their environment (:data:`ENV_SOCKET`).

The keeper's end (``recording/run/keeper.py``, in ``trace``) imports the protocol's
names from here: the API calls :func:`join_run` in every traced process, which must
not import the recording side. So this module imports nothing at its top but the
standard library's cheapest modules.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

TYPE_CHECKING = False  # typing only for the checker: every traced process imports us
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

# In the command's environment: the keeper's registration socket.
ENV_SOCKET = "PINSIGHT_PYTHON_TRACE_SOCKET"
# In the command's environment: the registration socket of the session daemon the run's
# session lives in (a path; absent when trace could not tell), which a process whose
# LTTng-UST is of another ABI can never reach (activation/lttng_versions.py).
ENV_DAEMON = "PINSIGHT_PYTHON_TRACE_DAEMON"
UNRECORDED = "unrecorded"  # "pid argv" of processes whose events could not be enabled
PROBLEMS = "problems"  # why, one line each (trace says each once)
# Bounded waits of a process joining the run (seconds).
REGISTER_TIMEOUT = 10.0
ENABLE_TIMEOUT = 5.0
# Not recorded after this long (events are enabled within milliseconds): whether the
# process's LTTng-UST can reach the run's session daemon at all is looked into.
VERSION_CHECK_AFTER = 0.1

_told = False


def say(line: str) -> None:
    """One line on stderr in one write: print() writes its end of line apart, and
    unbuffered (PYTHONUNBUFFERED, as job scripts often set) another process's line
    on the same stderr could land between the two. trace's notes use it too."""
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


def _say_once(message: str) -> None:
    global _told
    if not _told:
        _told = True
        say(f"pinsight-python: {message}")


def join_run(recording: Optional[Callable[[], bool]] = None, path: Optional[str] = None) -> bool:
    """In a process of a ``trace`` run (ENV_SOCKET set, or the keeper's socket
    `path`: attach --join): have its pid tracked by the run's session, then wait
    until our events are enabled. Never raises: a process that cannot join runs
    untraced, says why once and is named in the run's UNRECORDED file. True when it
    said so."""
    path = path or os.environ.get(ENV_SOCKET)
    if not path:
        return False
    pid = os.getpid()
    problem = ""
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            conn.settimeout(REGISTER_TIMEOUT)
            conn.connect(path)
            conn.sendall(f"{pid}\n".encode())
            answer = read_line(conn)
        finally:
            conn.close()
        if answer.strip() != b"ok":
            problem = answer.decode(errors="replace").strip() or "the run's keeper did not answer"
    except OSError as e:
        problem = f"cannot reach the run's keeper at {path}: {e.strerror or e}"
    if not problem and recording is not None:
        started = time.monotonic()
        checked = False
        while not recording():
            waited = time.monotonic() - started
            if not checked and waited > VERSION_CHECK_AFTER:
                checked = True
                problem = _version_problem()
                if problem:
                    break
            if waited > ENABLE_TIMEOUT:
                problem = (
                    f"LTTng did not enable our events within {ENABLE_TIMEOUT:.0f} s "
                    "(registration with the session daemon timed out?)"
                )
                break
            time.sleep(0.002)
    if problem:
        _note_unrecorded(os.path.dirname(path), pid, problem)
    return bool(problem)


def start_recorder(core: Any, socket: Optional[str] = None) -> None:
    """Starts this process's side of a flight-recorder run (the run's keeper, or the
    one at `socket`), once tracing is active: the core knows whether the run is one
    (the flight_recorder setting) and its stall watch. Never raises: a process that
    cannot reach the keeper says so once and runs on, its events in the buffers but
    no dump asked by it."""
    path = socket or os.environ.get(ENV_SOCKET)
    if not path:
        return
    problem = core._start_recorder(path)
    if problem:
        _say_once(f"process {os.getpid()}: the flight recorder is off: {problem}")


def _version_problem() -> str:
    """Why this process's LTTng-UST cannot register with the run's session daemon (another
    LTTng's), one line naming both; "" when that is not why."""
    from . import lttng_versions

    daemon = os.environ.get(ENV_DAEMON)
    if daemon:
        return lttng_versions.run_daemon_problem(daemon)
    return lttng_versions.registration_problem()


def _note_unrecorded(run_dir: str, pid: int, problem: str) -> None:
    argv = " ".join(sys.argv)
    _say_once(f"process {pid} ({argv}) records no events: {problem}")
    for name, line in ((UNRECORDED, f"{pid} {argv}"), (PROBLEMS, problem)):
        try:
            fd = os.open(os.path.join(run_dir, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{line}\n".encode(errors="replace"))  # one write: appends never mix
            finally:
                os.close(fd)
        except OSError:
            pass


def read_line(conn: _socket.socket) -> bytes:
    """One line of the keeper's protocol (a pid, or the answer), up to the peer's close."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = conn.recv(256)
        if not chunk:
            break
        line += chunk
    return line
