"""One ``pinsight-python trace`` run: which processes it records, and its keeper.
Both ends of the keeper's protocol are here: :func:`join_run` (a process of the
run), :class:`_Keeper` and :func:`main` (the keeper process), :class:`Keeper`
(``trace``'s handle on it), and the list of processes that could not be recorded.

Isolation. One lttng-sessiond serves every session of a user, and a session that
enables our provider records every registered process of that user: two runs side
by side would record each other's programs. So a run's session starts tracking no
process at all (``lttng untrack --vpid --all``), and each process of the run, as it
activates tracing (and each child after ``fork``), asks the run's keeper to track its
pid, then waits (bounded) until its events are enabled. Only processes started under
the run carry the keeper's socket in their environment: fork, spawn, forkserver,
``mpirun`` (on this node) and ``--relayd`` streaming all keep to it, and another
user's or run's processes never reach the session.

No leftovers. The keeper is a small process of its own (its own session, so a
signal to trace's process group does not reach it). When ``trace`` dies without
cleaning up (SIGKILL, the OOM killer), the keeper sees it re-parented within a
fraction of a second, ends the run's processes (SIGTERM, then SIGKILL) and destroys
the session: nothing of the run keeps recording or running. ``trace`` also sweeps, as
it starts, sessions of runs whose ``trace`` and keeper are both gone (a whole cgroup
killed at once).

Registration costs one ``lttng track`` per batch of processes starting together
(about 10-30 ms): a process that forks thousands of short-lived children pays it in
each child.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

# In the command's environment: the keeper's registration socket.
ENV_SOCKET = "PINSIGHT_PYTHON_TRACE_SOCKET"
# In the command's environment: marks the processes of this run, also those
# re-parented away from the command's tree (daemons, orphans).
ENV_RUN = "PINSIGHT_PYTHON_TRACE_RUN"
SOCKET_NAME = "register.sock"
REGISTERED = "registered"  # pids the keeper tracked, one a line
UNRECORDED = "unrecorded"  # "pid argv" of processes whose events could not be enabled
# Bounded waits of a process joining the run (seconds).
REGISTER_TIMEOUT = 10.0
ENABLE_TIMEOUT = 5.0
# The keeper's poll interval: how soon it notices that trace died.
KEEPER_POLL = 0.2

_told = False


def _say_once(message: str) -> None:
    global _told
    if not _told:
        _told = True
        print(f"pinsight-python: {message}", file=sys.stderr, flush=True)


def join_run(recording: Optional[Callable[[], bool]] = None) -> None:
    """In a process of a ``trace`` run (ENV_SOCKET set): have its pid tracked by the
    run's session, then wait until our events are enabled. Never raises: a process
    that cannot join runs untraced and is named in the run's UNRECORDED file."""
    path = os.environ.get(ENV_SOCKET)
    if not path:
        return
    pid = os.getpid()
    problem = ""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(REGISTER_TIMEOUT)
            conn.connect(path)
            conn.sendall(f"{pid}\n".encode())
            answer = _read_line(conn)
        if answer.strip() != b"ok":
            problem = answer.decode(errors="replace").strip() or "the run's keeper did not answer"
    except OSError as e:
        problem = f"cannot reach the run's keeper at {path}: {e.strerror or e}"
    if not problem and recording is not None:
        deadline = time.monotonic() + ENABLE_TIMEOUT
        while not recording():
            if time.monotonic() > deadline:
                problem = (
                    f"LTTng did not enable our events within {ENABLE_TIMEOUT:.0f} s "
                    "(registration with the session daemon timed out?)"
                )
                break
            time.sleep(0.002)
    if problem:
        _note_unrecorded(Path(path).parent, pid, problem)


def _note_unrecorded(run_dir: Path, pid: int, problem: str) -> None:
    argv = " ".join(sys.argv)
    _say_once(f"process {pid} ({argv}) records no events: {problem}")
    try:
        fd = os.open(run_dir / UNRECORDED, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{pid} {argv}\n".encode(errors="replace"))
        finally:
            os.close(fd)
    except OSError:
        pass


def read_unrecorded(run_dir: Path) -> List[str]:
    """``PID ARGV`` of the run's processes that recorded no event."""
    try:
        return [ln for ln in (run_dir / UNRECORDED).read_text().splitlines() if ln.strip()]
    except OSError:
        return []


def read_registered(run_dir: Path) -> List[int]:
    try:
        return [int(ln) for ln in (run_dir / REGISTERED).read_text().split()]
    except (OSError, ValueError):
        return []


# ---------------------------------------------------------------------------- the keeper


def _read_line(conn: socket.socket) -> bytes:
    """One line of the keeper's protocol (a pid, or the answer), up to the peer's close."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = conn.recv(256)
        if not chunk:
            break
        line += chunk
    return line


def _read_pid(conn: socket.socket) -> int:
    """The pid line a process of the run sends; OSError or ValueError if it sent none."""
    return int(_read_line(conn).strip())


class _Keeper:
    def __init__(self, session: str, run_dir: Path, parent: int, marker: bytes) -> None:
        from .. import lttng

        self.lttng = lttng
        self.session = session
        self.run_dir = run_dir
        self.parent = parent
        self.marker = marker
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(run_dir / SOCKET_NAME))
        self.server.listen(128)
        self.server.setblocking(False)

    def serve(self) -> int:
        # Ready: trace waits for this line before it starts the command.
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while True:
            if os.getppid() != self.parent:
                self.abandoned()
                return 0
            readable, _, _ = select.select([self.server], [], [], KEEPER_POLL)
            if readable:
                self.register_waiting()

    def register_waiting(self) -> None:
        waiting = self._accept_waiting()
        if not waiting:
            return
        answer = b"ok\n"
        try:
            self.lttng.track_vpids(self.session, sorted(waiting))
        except (self.lttng.LttngError, OSError) as e:
            answer = f"lttng track failed: {e}\n".encode(errors="replace")
        else:
            with open(self.run_dir / REGISTERED, "a") as f:
                f.write("".join(f"{pid}\n" for pid in waiting))
        for conn in waiting.values():
            try:
                conn.sendall(answer)
            except OSError:
                pass
            conn.close()

    def _accept_waiting(self) -> Dict[int, socket.socket]:
        """The processes asking to be tracked, by pid: each connects and sends its pid."""
        waiting: Dict[int, socket.socket] = {}
        deadline = time.monotonic() + 0.01  # gather the processes starting together
        while True:
            try:
                conn, _ = self.server.accept()
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return waiting
                time.sleep(0.001)
                continue
            conn.setblocking(True)
            conn.settimeout(2.0)
            try:
                waiting[_read_pid(conn)] = conn
            except (OSError, ValueError):
                conn.close()

    def abandoned(self) -> None:
        """trace is gone without cleaning up: end the run, leave no session."""
        from .supervisor import end_processes

        end_processes(self.marker)
        try:
            self.lttng.destroy_session(self.session)
        except (self.lttng.LttngError, OSError):
            pass
        shutil.rmtree(self.run_dir, ignore_errors=True)


def main(argv: List[str]) -> int:
    """The keeper: ``main([SESSION, RUN_DIR, PARENT_PID, MARKER])`` (Keeper starts it)."""
    session, run_dir, parent, marker = argv
    # trace's terminal and job-control signals are not ours.
    for signo in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signo, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # trace ended the run itself
    keeper = _Keeper(session, Path(run_dir), int(parent), marker.encode())
    return keeper.serve()


# ---------------------------------------------------------------------------- trace's side

_KEEPER_MAIN = ("import sys; from pinsight_python.recording.run.keeper import main; "
                "sys.exit(main(sys.argv[1:]))")


class Keeper:
    """trace's side: the run's keeper process (main, above), which tracks the run's
    processes into the session, and ends the run and its session if trace dies
    without doing so."""

    def __init__(self, session: str, marker: str, timeout: float = 10.0) -> None:
        import subprocess  # here: the run's processes import this module
        import tempfile

        from .. import lttng

        self.dir = Path(tempfile.mkdtemp(prefix="pinsight-python-run-"))
        self.socket = self.dir / SOCKET_NAME
        # Untraced, and not a process of the run.
        env = {k: v for k, v in os.environ.items()
               if k not in (ENV_RUN, ENV_SOCKET) and not k.startswith("PINSIGHT_")}
        env.pop("PYTHONSTARTUP", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _KEEPER_MAIN, session, str(self.dir), str(os.getpid()),
             marker],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # signals to trace's process group are not its
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready or self.proc.stdout.readline() != b"ready\n":
            self.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise lttng.LttngError(f"the run's keeper did not start within {timeout:.0f} s")

    def stop(self) -> None:
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def finish(self, output: Optional[Path]) -> List[str]:
        """The processes that recorded no events ("PID ARGV"), also written beside the
        trace for report (under the trace folder's name, which the reader defines);
        removes the run's directory."""
        from ...reading.analysis import UNRECORDED_FILE

        unrecorded = read_unrecorded(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        if unrecorded and output is not None and output.is_dir():
            (output / UNRECORDED_FILE).write_text("".join(f"{ln}\n" for ln in unrecorded))
        return unrecorded
