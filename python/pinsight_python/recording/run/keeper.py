"""One ``pinsight-python trace`` run: which processes it records, and its keeper.
The keeper's end of the protocol is here: :class:`Keeper` (in ``trace``), with the
watchdog (:data:`_WATCHDOG`, :func:`abandoned`) and the list of processes that could
not be recorded. A process's end, :func:`join_run`, runs in every traced process:
it is ``activation/join.py``, whose names (the socket's variable, the list's file,
a line of the protocol) this module uses.


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

from ...activation.join import ENV_SOCKET, PROBLEMS, UNRECORDED, read_line

# The watchdog imports this module as it ends an abandoned run: what only trace's
# side needs (socket, select, shutil, pathlib, threading) is imported there, not
# here, and typing is for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    import threading
    from pathlib import Path
    from typing import Any, Dict, List, Optional, Set, Tuple, Union

    from .flight import Dumps

# In the command's environment: marks the processes of this run, also those
# re-parented away from the command's tree (daemons, orphans).
ENV_RUN = "PINSIGHT_PYTHON_TRACE_RUN"
SOCKET_NAME = "register.sock"
# Beside the socket in a flight-recorder run: what `attach --join` needs to join it.
RUN_FILE = "run.json"
RUN_DIR_PREFIX = "pinsight-python-run-"
# The keeper's poll interval: how soon it notices that trace died.
KEEPER_POLL = 0.2


def find_run(trace_pid: int) -> Optional[Dict[str, Any]]:
    """The flight-recorder run whose trace process is `trace_pid` (its keeper's
    description, Keeper.describe_run), among this user's; None when there is none."""
    import glob
    import json
    import tempfile

    for path in glob.glob(os.path.join(tempfile.gettempdir(), RUN_DIR_PREFIX + "*", RUN_FILE)):
        try:
            if os.stat(path).st_uid != os.geteuid():
                continue
            with open(path, encoding="utf-8") as f:
                run = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(run, dict) and run.get("trace_pid") == trace_pid:
            return run
    return None


def read_unrecorded(run_dir: Union[str, Path], name: str = UNRECORDED) -> List[str]:
    """``PID ARGV`` of the run's processes that recorded no event (name=PROBLEMS: why,
    each reason once)."""
    try:
        with open(os.path.join(run_dir, name), encoding="utf-8", errors="replace") as f:
            return list(dict.fromkeys(ln for ln in f.read().splitlines() if ln.strip()))
    except OSError:
        return []


# ---------------------------------------------------------------------------- the keeper


def _read_hello(conn: _socket.socket) -> Tuple[str, int]:
    """The first line a process of the run sends: ("", PID) to join the run, or a
    flight recorder's connection ("recorder" or "last-words", PID). OSError or
    ValueError if it sent none."""
    words = read_line(conn).split()
    if len(words) == 1:
        return "", int(words[0])
    if len(words) == 2 and words[0] in (b"recorder", b"last-words"):
        return words[0].decode(), int(words[1])
    raise ValueError("not a line of the keeper's protocol")


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
    the run and its session if trace dies without doing so. In a flight-recorder
    run it also keeps each process's recorder connection and takes the dumps on
    that thread (`flight`: recording/run/flight.py)."""

    def __init__(self, session: str, marker: str, flight: Optional[Dumps] = None) -> None:
        import socket
        import subprocess
        import tempfile
        from pathlib import Path

        self.session = session
        self.dir = Path(tempfile.mkdtemp(prefix=RUN_DIR_PREFIX))
        self.socket = self.dir / SOCKET_NAME
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.socket))
        self.server.listen(128)
        self._wake_r, self._wake_w = os.pipe()
        self._thread: Optional[threading.Thread] = None
        self.problems: List[str] = []  # why processes recorded nothing (finish())
        self._stopping = False
        self.flight = flight
        if flight is not None:
            flight.wake = self._wake
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

    def describe_run(self, trace_pid: int, env: Dict[str, str]) -> None:
        """For `attach --join TRACE_PID` (find_run): the run's keeper and the
        variables its processes trace by."""
        import json

        variables = {k: v for k, v in env.items() if k.startswith("PINSIGHT_")}
        text = json.dumps({"trace_pid": trace_pid, "session": self.session,
                           "socket": str(self.socket), "env": variables})
        (self.dir / RUN_FILE).write_text(text)

    def serve(self) -> None:
        """Starts answering the run's processes. Call it after the command started:
        trace forks the command with no thread of its own running."""
        import threading

        self._thread = threading.Thread(target=self._serve, name="pinsight-keeper", daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def _serve(self) -> None:
        import select

        poller = select.poll()
        watched: Set[int] = set()
        while True:
            wanted = {self.server.fileno(), self._wake_r,
                      *(self.flight.descriptors() if self.flight else ())}
            for fd in wanted - watched:
                poller.register(fd, select.POLLIN)
            for fd in watched - wanted:
                poller.unregister(fd)
            watched = wanted
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_r in ready:
                os.read(self._wake_r, 512)
                if self._stopping:
                    return
            if self.server.fileno() in ready:
                self._register_waiting()
            if self.flight is not None:
                for fd in ready - {self.server.fileno(), self._wake_r}:
                    self.flight.readable(fd)
                self.flight.run_pending()

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
                kind, pid = _read_hello(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            if not kind:
                waiting[pid] = conn
            elif self.flight is not None:
                self.flight.adopt(conn, kind, pid)
            else:
                conn.close()  # no flight recorder in this run: its process runs without

    def stop(self) -> None:
        """Stops answering (a process asking later runs untraced and is listed), and
        ends the watchdog."""
        if self._thread is not None:
            self._stopping = True
            self._wake()
            self._thread.join()
            self._thread = None
        if self.flight is not None:
            self.flight.close()
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
