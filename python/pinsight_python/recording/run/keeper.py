"""One ``pinsight-python trace`` run: which processes it records, and its keeper.
Both ends of the keeper's protocol are here: :func:`join_run` (a process of the
run) and :class:`Keeper` (in ``trace``), with the watchdog (:data:`_WATCHDOG`,
:func:`abandoned`) and the list of processes that could not be recorded.

Isolation. One lttng-sessiond serves every session of a user, and a session that
enables our provider records every registered process of that user: two runs side
by side would record each other's programs. So a run's session starts tracking no
process at all, and each process of the run, as it activates tracing (and each
child after ``fork``), asks the run's keeper to track its pid, then waits (bounded)
until its events are enabled. Only processes started under the run carry the
keeper's socket in their environment: fork, spawn, forkserver, ``mpirun`` (on this
node) and ``--relayd`` streaming all keep to it, and another user's or run's
processes never reach the session.

No leftovers. The keeper's watchdog is a small process of its own (its own
session, so a signal to trace's process group does not reach it). When ``trace``
dies without cleaning up (SIGKILL, the OOM killer), the watchdog sees it
re-parented within a fraction of a second, ends the run's processes (SIGTERM, then
SIGKILL) and destroys the session: nothing of the run keeps recording or running.
``trace`` also sweeps, as it starts, sessions of runs whose ``trace`` and watchdog
are both gone (a whole cgroup killed at once).

Registration costs one request to the session daemon per batch of processes
asking together (well under a millisecond, liblttng-ctl), and a round trip on the
keeper's socket.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

# Every traced process imports this module: what only trace's side needs (socket,
# select, shutil, pathlib, threading) is imported there, not here, and typing is for
# the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    import threading
    from pathlib import Path
    from typing import Callable, Dict, List, Optional, Union

# In the command's environment: the keeper's registration socket.
ENV_SOCKET = "PINSIGHT_PYTHON_TRACE_SOCKET"
# In the command's environment: marks the processes of this run, also those
# re-parented away from the command's tree (daemons, orphans).
ENV_RUN = "PINSIGHT_PYTHON_TRACE_RUN"
# In the command's environment: the registration socket of the session daemon the run's
# session lives in (a path; absent when trace could not tell), which a process whose
# LTTng-UST is of another ABI can never reach (recording/lttng_versions.py).
ENV_DAEMON = "PINSIGHT_PYTHON_TRACE_DAEMON"
SOCKET_NAME = "register.sock"
UNRECORDED = "unrecorded"  # "pid argv" of processes whose events could not be enabled
PROBLEMS = "problems"  # why, one line each (trace says each once)
# Bounded waits of a process joining the run (seconds).
REGISTER_TIMEOUT = 10.0
ENABLE_TIMEOUT = 5.0
# Not recorded after this long (events are enabled within milliseconds): whether the
# process's LTTng-UST can reach the run's session daemon at all is looked into.
VERSION_CHECK_AFTER = 0.1
# The keeper's poll interval: how soon it notices that trace died.
KEEPER_POLL = 0.2

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


def join_run(recording: Optional[Callable[[], bool]] = None) -> bool:
    """In a process of a ``trace`` run (ENV_SOCKET set): have its pid tracked by the
    run's session, then wait until our events are enabled. Never raises: a process
    that cannot join runs untraced, says why once and is named in the run's
    UNRECORDED file. True when it said so."""
    path = os.environ.get(ENV_SOCKET)
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
            answer = _read_line(conn)
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


def _version_problem() -> str:
    """Why this process's LTTng-UST cannot register with the run's session daemon (another
    LTTng's), one line naming both; "" when that is not why."""
    from .. import lttng_versions

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


def read_unrecorded(run_dir: Union[str, Path], name: str = UNRECORDED) -> List[str]:
    """``PID ARGV`` of the run's processes that recorded no event (name=PROBLEMS: why,
    each reason once)."""
    try:
        with open(os.path.join(run_dir, name), encoding="utf-8", errors="replace") as f:
            return list(dict.fromkeys(ln for ln in f.read().splitlines() if ln.strip()))
    except OSError:
        return []


# ---------------------------------------------------------------------------- the keeper


def _read_line(conn: _socket.socket) -> bytes:
    """One line of the keeper's protocol (a pid, or the answer), up to the peer's close."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = conn.recv(256)
        if not chunk:
            break
        line += chunk
    return line


def _read_pid(conn: _socket.socket) -> int:
    """The pid line a process of the run sends; OSError or ValueError if it sent none."""
    return int(_read_line(conn).strip())


def abandoned(session: str, run_dir: str, marker: str) -> None:
    """The watchdog's end of a run whose trace died without cleaning up: end the
    run's processes, leave no session."""
    import shutil

    from .. import lttng
    from .supervisor import end_processes

    end_processes(marker.encode())
    try:
        lttng.destroy_session(session)
    except (lttng.LttngError, OSError):
        pass
    shutil.rmtree(run_dir, ignore_errors=True)


# The watchdog: polls its parent, trace, and imports nothing more until trace is
# gone (started with -S, it then adds site-packages as a normal start would), so
# that it costs the run's start almost nothing. trace's terminal and job-control
# signals are not its own.
_WATCHDOG = f"""\
import os, signal, sys, time
for name in ("SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
parent = int(sys.argv[1])
while os.getppid() == parent:
    time.sleep({KEEPER_POLL})
import site
site.main()
from pinsight_python.recording.run.keeper import abandoned
abandoned(*sys.argv[2:])
"""


class Keeper:
    """The run's keeper, in trace: it tracks the run's processes into the session as
    they ask (a thread, started with :meth:`serve` once the command runs: before it,
    their requests wait in the socket's backlog), and a watchdog process that ends
    the run and its session if trace dies without doing so."""

    def __init__(self, session: str, marker: str) -> None:
        import socket
        import subprocess
        import tempfile
        from pathlib import Path

        self.session = session
        self.dir = Path(tempfile.mkdtemp(prefix="pinsight-python-run-"))
        self.socket = self.dir / SOCKET_NAME
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.socket))
        self.server.listen(128)
        self._wake_r, self._wake_w = os.pipe()
        self._thread: Optional[threading.Thread] = None
        self.problems: List[str] = []  # why processes recorded nothing (finish())
        # Untraced, and not a process of the run.
        env = {k: v for k, v in os.environ.items()
               if k not in (ENV_RUN, ENV_SOCKET) and not k.startswith("PINSIGHT_")}
        env.pop("PYTHONSTARTUP", None)
        self.watchdog = subprocess.Popen(
            [sys.executable, "-S", "-c", _WATCHDOG, str(os.getpid()), session, str(self.dir),
             marker],
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # signals to trace's process group are not its
        )

    def serve(self) -> None:
        """Starts answering the run's processes. Call it after the command started:
        trace forks the command with no thread of its own running."""
        import threading

        self._thread = threading.Thread(target=self._serve, name="pinsight-keeper", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import select

        while True:
            readable, _, _ = select.select([self.server, self._wake_r], [], [])
            if self._wake_r in readable:
                return
            self._register_waiting()

    def _register_waiting(self) -> None:
        from .. import lttng

        waiting = self._accept_waiting()
        if not waiting:
            return
        answer = b"ok\n"
        try:
            lttng.track_vpids(self.session, sorted(waiting))
        except (lttng.LttngError, OSError) as e:
            answer = f"tracking the process failed: {e}\n".encode(errors="replace")
        for conn in waiting.values():
            try:
                conn.sendall(answer)
            except OSError:
                pass
            conn.close()

    def _accept_waiting(self) -> Dict[int, socket.socket]:
        """The processes asking to be tracked now, by pid: each connects and sends its
        pid. One request to the session daemon tracks them all."""
        waiting: Dict[int, socket.socket] = {}
        self.server.setblocking(False)
        while True:
            try:
                conn, _ = self.server.accept()
            except (BlockingIOError, InterruptedError):
                return waiting
            conn.setblocking(True)
            conn.settimeout(2.0)
            try:
                waiting[_read_pid(conn)] = conn
            except (OSError, ValueError):
                conn.close()

    def stop(self) -> None:
        """Stops answering (a process asking later runs untraced and is listed), and
        ends the watchdog."""
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join()
            self._thread = None
        self.server.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1
        if self.watchdog.poll() is None:
            # It holds nothing to clean up; a blocking wait, not Popen's polling one.
            self.watchdog.kill()
        self.watchdog.wait()

    def finish(self, output: Optional[Path]) -> List[str]:
        """The processes that recorded no events ("PID ARGV"), also written beside the
        trace for report (under the trace folder's name, which the reader defines);
        removes the run's directory."""
        import shutil

        unrecorded = read_unrecorded(self.dir)
        self.problems = read_unrecorded(self.dir, PROBLEMS)
        shutil.rmtree(self.dir, ignore_errors=True)
        if unrecorded and output is not None and output.is_dir():
            from ...reading.analysis import UNRECORDED_FILE

            (output / UNRECORDED_FILE).write_text("".join(f"{ln}\n" for ln in unrecorded))
        return unrecorded
