"""The supervisor of a ``pinsight-python trace`` run: it starts the command, answers
the signals sent to ``trace`` until the command ends, and knows the run's processes.

Signals (docs/activation.md): SIGUSR1 and SIGUSR2 are forwarded to every process of
the command's tree that handles them (every traced process handles SIGUSR1: it
reloads the configuration); SIGTERM, SIGINT, SIGHUP and SIGQUIT are relayed to the
command, unless the terminal sent them (it signals the whole foreground process
group, the command included). ``trace`` itself never dies of them.

The run's processes, read from /proc: the command's descendants, and every process
carrying the run's marker (keeper.ENV_RUN) in its environment, also those re-parented
away from the tree (daemons, orphans). The keeper ends them the same way when
``trace`` dies (:func:`end_processes`).
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set

from ...exit_status import EXIT_NOT_EXECUTABLE, killed_by
from . import plan as run_plan
from . import session as run_session

SI_KERNEL = 0x80  # siginfo si_code of a signal the kernel (the terminal) sent (Linux)
# Relayed to the command: what job schedulers and users send to end a job.
RELAYED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# Forwarded to each process of the command's tree that handles them.
FORWARDED_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)
GRACE = 2.0  # between the first signal and SIGKILL for what is left of a run


def _error(message: str) -> None:
    run_session.error(run_plan.PROG, message)


def _note(message: str) -> None:
    run_session.note(run_plan.PROG, message)


# ---------------------------------------------------------------------------- the run's processes


def _parent_pids() -> Dict[int, int]:
    """pid -> parent pid, for every process we can see."""
    parents: Dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            parents[int(entry)] = int(fields[1])
    return parents


def carrying(marker: bytes, pids: Optional[Iterable[int]] = None) -> List[int]:
    """The processes (of `pids`, else of every one we can see), ourselves left out,
    that carry the run's marker, ``NAME=VALUE``, in their environment."""
    me = os.getpid()
    if pids is None:
        pids = (int(e) for e in os.listdir("/proc") if e.isdigit())
    found = []
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


def _handles(pid: int, signo: int) -> bool:
    """Whether the process has a handler for the signal (SigCgt), i.e. receiving it
    does what the program asked for rather than kill it."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signo - 1) & 1)
    except (OSError, ValueError):
        pass
    return False


def command_tree(root: int, marker: bytes) -> List[int]:
    """The processes of the run: the command's descendants (the command included) and
    those carrying the run's marker in their environment (re-parented ones)."""
    parents = _parent_pids()
    children: Dict[int, List[int]] = collections.defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    tree: Set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in tree or pid not in parents:
            continue
        tree.add(pid)
        todo.extend(children.get(pid, ()))
    tree.update(carrying(marker, (pid for pid in parents if pid not in tree)))
    return sorted(tree)


def end_processes(marker: bytes, first: int = signal.SIGTERM, grace: float = GRACE) -> None:
    """Signal every process of the run, then SIGKILL what is left after `grace`."""
    for pid in carrying(marker):
        try:
            os.kill(pid, first)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and carrying(marker):
        time.sleep(0.05)
    for pid in carrying(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# ---------------------------------------------------------------------------- the signals


class Supervisor:
    """Runs the command and answers the signals sent to us until it ends."""

    def __init__(
        self,
        plan: run_plan.Plan,
        env: Dict[str, str],
        marker: bytes,
        child_mask: Set[int],
        ignored: Sequence[int],
        started: Callable[[], None] = lambda: None,
        dump: Optional[Callable[[int], None]] = None,
    ) -> None:
        self.plan = plan
        self.started = started  # called once the command runs
        # A flight-recorder run: SIGUSR2 asks for a dump (with the sender's pid)
        # instead of being forwarded.
        self.dump = dump
        self.env = env  # the plan's, with the run's own variables
        self.marker = marker
        self.child_mask = child_mask
        self.ignored = ignored  # what we were started with SIG_IGN for
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.stop_signal: Optional[int] = None  # relayed before the command existed
        self.stopped_by: Optional[int] = None  # a stop signal relayed to the command
        self.returncode: Optional[int] = None  # Popen's (negative: killed by a signal)

    def forward(self, signo: int, sender: int = 0) -> None:
        """SIGUSR1/SIGUSR2: to every process of the run that handles it; in a
        flight-recorder run, SIGUSR2 takes a dump."""
        if signo == signal.SIGUSR2 and self.dump is not None:
            self.dump(sender)
        else:
            self._forward(signo)

    def _forward(self, signo: int) -> None:
        name = signal.Signals(signo).name
        if self.proc is None:
            _note(f"{name} received before the command started: its processes read the "
                  "configuration as they start")
            return
        targets = [pid for pid in command_tree(self.proc.pid, self.marker)
                   if _handles(pid, signo)]
        sent = []
        for pid in targets:
            try:
                os.kill(pid, signo)
                sent.append(pid)
            except OSError:
                pass  # ended meanwhile
        if signo != signal.SIGUSR1:
            what = "handle it"
        elif self.plan.config is None:
            # As the processes will say it: no file to reload (batched ones flush).
            what = "handle it (they run without a configuration file: nothing to reload)"
        else:
            what = "reload the configuration"
        _note(f"{name} forwarded to {len(sent)} process(es) of the command that {what}"
              + (f": {', '.join(map(str, sent))}" if sent else ""))
        if signo == signal.SIGUSR1 and self.plan.config is not None:
            # The processes keep their diagnostics to themselves: said here, once.
            try:
                for line in run_plan.check_configuration(self.plan.config):
                    _note(f"warning: {line}")
            except run_plan.Refused as e:
                for line in e.messages:
                    _note(f"error: {line}")
                _note("the configuration has errors: the one in force stays in force")

    def relay(self, signo: int, from_terminal: bool) -> None:
        """SIGTERM/SIGINT/SIGHUP/SIGQUIT: to the command, unless the terminal sent it to
        the whole foreground group (the command has it already)."""
        if self.proc is None:
            self.stop_signal = self.stop_signal or signo
            return
        if from_terminal:
            return
        # The whole run, not only the command: mpirun's ranks, a shell's children.
        self.stopped_by = self.stopped_by or signo
        for pid in command_tree(self.proc.pid, self.marker):
            try:
                os.kill(pid, signo)
            except ProcessLookupError:
                pass

    def dispatch(self, info: signal.struct_siginfo) -> None:
        signo = info.si_signo
        if signo in FORWARDED_SIGNALS:
            self.forward(signo, info.si_pid)
        elif signo in RELAYED_SIGNALS:
            self.relay(signo, info.si_code == SI_KERNEL)

    def drain(self, answer: bool = True) -> None:
        """Answer (or, once the command has ended, drop) the signals that arrived
        while we were busy."""
        watched = {*RELAYED_SIGNALS, *FORWARDED_SIGNALS}
        while True:
            pending = signal.sigpending() & watched
            if not pending:
                return
            info = signal.sigtimedwait(pending, 0)
            if info is None:
                return
            if answer:
                self.dispatch(info)

    def start(self) -> None:
        self.drain()
        if self.stop_signal is not None:
            return
        mask, ignored = self.child_mask, self.ignored

        def as_we_were_started() -> None:
            # The signal mask and ignored signals we were given, not ours (a job
            # script's background command ignores SIGINT and SIGQUIT).
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for signo in ignored:
                signal.signal(signo, signal.SIG_IGN)

        # We have no threads: the fork-then-exec path preexec_fn takes is safe.
        self.proc = subprocess.Popen(
            self.plan.command, env=self.env, preexec_fn=as_we_were_started  # noqa: PLW1509
        )

    def run(self) -> int:
        """Starts the command, answers signals until it ends; trace's exit status."""
        try:
            self.start()
        except OSError as e:
            _error(f"{self.plan.command[0]}: {e.strerror}")
            return EXIT_NOT_EXECUTABLE
        if self.proc is None:
            assert self.stop_signal is not None
            name = signal.Signals(self.stop_signal).name
            _note(f"{name} received before the command started: it was not started")
            return killed_by(self.stop_signal)
        self.started()
        self.returncode = self.wait()
        status = exit_status(self.returncode)
        if self.stopped_by is not None:
            # What the signal did not end yet (ranks mpirun left behind, re-parented
            # children) goes too.
            end_processes(self.marker, self.stopped_by)
            # A command that caught or ignored the signal and finished normally
            # keeps its status 0; a failure after it is the signal's doing (mpirun
            # exits 1 when its ranks are ended), as a shell reports it.
            if status != 0:
                status = killed_by(self.stopped_by)
        return status

    def wait(self) -> int:
        """The command's wait status as Popen gives it (negative: killed by a signal)."""
        assert self.proc is not None
        watched = {*RELAYED_SIGNALS, *FORWARDED_SIGNALS, signal.SIGCHLD}
        while True:
            status = self.proc.poll()
            if status is not None:
                return status
            # SIGCHLD only wakes us up; the timeout covers a child reaped elsewhere.
            info = signal.sigtimedwait(watched, 0.5)
            if info is not None and info.si_signo != signal.SIGCHLD:
                self.dispatch(info)


def exit_status(returncode: int) -> int:
    """trace's exit status for the command's wait status (Popen's)."""
    if returncode >= 0:
        return returncode
    signo = -returncode
    try:
        name = f" ({signal.Signals(signo).name})"
    except ValueError:
        name = ""
    _note(f"the command was killed by signal {signo}{name}")
    return killed_by(signo)


def how_it_ended(returncode: Optional[int], stopped_by: Optional[int]) -> str:
    """What the command did, when it did not simply succeed, for the line that says
    where the trace is ("" after a success without a relayed signal)."""
    relayed = f"{signal.Signals(stopped_by).name} was relayed to it" if stopped_by else ""
    if returncode is None:
        return ""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"; the command was ended by {name}"
    if relayed:
        return (f"; {relayed} and it exited with status {returncode}" if returncode
                else f"; {relayed}, and it finished normally (status 0)")
    if returncode:
        return f"; the command exited with status {returncode}"
    return ""
