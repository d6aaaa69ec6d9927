"""``pinsight-python trace --flight-recorder``: the last events of every process in
memory, written only when a dump is asked for or a process ends badly.

Each test runs the real thing: ``trace`` in the background as a job script starts
it, real programs (two threads deadlocked on locks after a minute of work, an MPI
job of 4 ranks, a C extension that faults, an uncaught exception, children that
exit badly), dumps read back with ``report`` and babeltrace2. The programs say
what they did (their own clocks, files): the checks compare the dumps with that.
Every test ends its run and checks that no LTTng session is left.

What the suite pays: the deadlock test works a minute first (its point: the
outer frames' begins are long overwritten when the stall comes), the MPI test
about 20 s on 2 cores, the others a few seconds each.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pytest

from pinsight_python.recording import lttng
from pinsight_python.recording.relayd import RelayDaemon
from tests.tracing import (
    CALLSTACK_ID,
    CALLSTACK_XML,
    CLI,
    CROSSDOMAIN_ID,
    CROSSDOMAIN_XML,
    MPI_ENV,
    NATIVE,
    PINSIGHT_LIB,
    clean_env,
    read_trace,
    replay,
    report_json,
    session_exists,
    wait_for,
)

PY = sys.executable
MPIRUN = ["mpirun", "-np", "4", "--oversubscribe"]  # as tests/integration/test_mpi.py runs it
SIZE = "16M"  # small rings: they wrap within the tests' seconds of work
# Smaller still where a test reads a whole dump back through babeltrace2's bindings and
# replays it in Trace Compass's analyses (a 16M ring held 1.2 M events: 70 s of Python)
READ_BACK_SIZE = "2M"


class FlightRun:
    """`pinsight-python trace --flight-recorder ... -- COMMAND` in the background, in
    `folder`, its dumps in folder/out."""

    def __init__(self, folder: Path, command: Sequence[str], *options: str,
                 env: Optional[Dict[str, str]] = None, size: str = SIZE) -> None:
        self.folder = folder
        self.out = folder / "out"
        self.stderr_path = folder / "trace.stderr"
        args = [*CLI, "trace", f"--flight-recorder={size}", "-o", str(self.out), *options,
                "--", *command]
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(args, cwd=folder, env=env or clean_env(),
                                         stdout=subprocess.PIPE, stderr=stderr, text=True)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def dumps(self) -> List[Path]:
        if not self.out.is_dir():
            return []
        found = [d for d in self.out.iterdir() if (d / "dump.json").is_file()]
        return sorted(found, key=lambda d: int(d.name.split("-")[1]))

    def wait_dumps(self, count: int, timeout: float = 120) -> List[Path]:
        wait_for(lambda: len(self.dumps()) >= count or self.proc.poll() is not None, timeout,
                 f"{count} dump(s) (trace's stderr so far:\n{self.stderr})", poll=0.1)
        assert len(self.dumps()) >= count, self.stderr
        return self.dumps()

    def finish(self, timeout: float = 120) -> int:
        """Its exit status, once it ended (by itself, or the test's signal); no
        session is left behind."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()
        self.proc.stdout.close()
        return self.proc.returncode

    def stop(self) -> int:
        """SIGTERM, as a job scheduler ends a job: relayed to the command."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.finish()


@pytest.fixture
def runs() -> Iterator[List[FlightRun]]:
    """The runs a test made: ended whatever happened, their sessions checked gone."""
    made: List[FlightRun] = []
    yield made
    for run in made:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
    for name in lttng.list_sessions():
        owner = lttng.session_name_owner(name, "pinsight-python")
        assert owner not in {run.proc.pid for run in made}, f"session {name} left behind"


def script(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def dump_of(folder: Path) -> Dict[str, Any]:
    """The dump's report (JSON): its `dump` section and the rest."""
    return report_json(folder, "--top", "0")


def thread_stacks(report: Dict[str, Any], vpid: Optional[int] = None) -> List[Dict[str, Any]]:
    procs = [p for p in report["dump"]["processes"] if vpid is None or p["vpid"] == vpid]
    return [t for p in procs for t in p["threads"]]


def frames(thread: Dict[str, Any]) -> List[str]:
    return [f["name"] for f in thread["stack"]]


def thread_names(pid: int) -> List[str]:
    names = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:
            pass
    return names


def wait_file(path: Path, timeout: float = 90) -> None:
    wait_for(path.exists, timeout, f"{path}", poll=0.05)


# ---------------------------------------------------------------------------- on request

ASKING = """
import os, threading, time
import pinsight_python

def waiter(stop):
    stop.wait()

def leaf(i):
    return i + 1

def busy(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n = leaf(n)
    return n

def main():
    stop = threading.Event()
    t = threading.Thread(target=waiter, args=(stop,), name="waiter")
    t.start()
    busy(1.0)
    where = pinsight_python.dump("checkpoint")
    with open("asked.tmp", "w") as f:
        f.write(str(where))
    os.rename("asked.tmp", "asked.txt")  # whole when it appears
    while not os.path.exists("stop"):
        busy(0.05)
    stop.set()
    t.join()

main()
"""


def test_dump_on_request_from_the_program_and_by_sigusr2(tmp_path: Path,
                                                         runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "prog.py", ASKING)
    run = FlightRun(tmp_path, [PY, str(prog)], size=READ_BACK_SIZE)
    runs.append(run)
    wait_file(tmp_path / "asked.txt")
    first = run.wait_dumps(1)[0]
    # pinsight_python.dump() returned once its dump was whole: its folder.
    assert (tmp_path / "asked.txt").read_text() == str(first)
    assert first.name == "dump-1-checkpoint"
    described = json.loads((first / "dump.json").read_text())
    assert described["reason"] == "checkpoint"
    assert described["requested_by"]["pid"] > 0
    # Nothing but the dump was written: the ring stays in memory.
    assert sorted(p.name for p in run.out.iterdir()) == ["dump-1-checkpoint"]

    run.proc.send_signal(signal.SIGUSR2)  # by hand, as a user or a job script
    second = run.wait_dumps(2)[1]
    assert second.name == "dump-2-usr2"
    assert json.loads((second / "dump.json").read_text())["requested_by"]["trace"].startswith(
        "SIGUSR2 from process")
    (tmp_path / "stop").touch()
    assert run.finish() == 0, run.stderr
    assert "flight recorder: 2 dump(s)" in run.stderr

    report = dump_of(second)
    section = report["dump"]
    assert section["reason"] == "usr2"
    assert section["processes"][0]["status"] == [], section["processes"][0]["status"]
    waiter = next(t for t in thread_stacks(report) if "waiter" in frames(t))
    # The waiting thread, blocked outside Python when the dump came: its whole stack,
    # read from the tracer's own stacks, the native call in progress on top.
    assert frames(waiter)[frames(waiter).index("waiter") + 1] == "Event.wait"
    assert waiter["stack"][-1]["kind"] == "native"
    main = next(t for t in thread_stacks(report) if t["python_thread_id"] == 0)
    assert frames(main)[:2] == ["<module>", "main"]
    # Begin times are known for frames that began under tracing: open for about as
    # long as the program had run.
    assert all(f["open_ns"] is not None and f["open_ns"] > 0 for f in main["stack"])
    assert main["recent"], "the thread's last events"

    # A dump is a whole trace: the other views read it, and Trace Compass's analyses
    # take it (through unbatch, as any batched trace). What they meet that a whole
    # run's trace lacks: ends of frames whose begins the ring lost, which pop an empty
    # stack, as at the start of any trace that began mid-run (Trace Compass passes
    # over them). Each CPU's ring loses its own span (a thread that moved between
    # CPUs can lose begins in one and keep ends in the other), so there can be more of
    # them than the thread's deepest stack: no more than our reader finds in the same
    # events (its ends without a begin, per thread).
    unbatched = tmp_path / "unbatched"
    for command in (["flamegraph", "--folded", str(second)], ["export", str(second), "-o", "-"],
                    ["unbatch", str(second), "-o", str(unbatched)]):
        done = subprocess.run([*CLI, *command], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, (command, done.stderr)
    events = read_trace(unbatched).events
    assert [e for e in events if e.short == "open_frame"]
    ours = {f"Processes/{p['vpid']}/Threads/{t['vtid']}":
            t["unbalanced"]["ends_without_begin"]
            for p in report_json(unbatched)["processes"] for t in p["threads"]}
    for path, callstack_id in ((CALLSTACK_XML, CALLSTACK_ID), (CROSSDOMAIN_XML, CROSSDOMAIN_ID)):
        result = replay(path, callstack_id, events)[1]
        assert not result.diagnostics.missing_fields, result.diagnostics.missing_fields
        assert not result.diagnostics.dropped_changes, result.diagnostics.dropped_changes
        popped = collections.Counter(where for _, where in result.ss.empty_pops)
        # (the call-stack analysis's CallStack, the cross-domain one's PythonStack)
        assert all(n <= ours.get(where.rsplit("/", 1)[0], 0)
                   for where, n in popped.items()), (popped, ours)


# ---------------------------------------------------------------------------- a stall

DEADLOCK = """
import json, threading, time

a = threading.Lock()
b = threading.Lock()
both_hold = threading.Barrier(2)

def leaf(i):
    return i % 7

def work(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += leaf(n)
    return n

def first():
    a.acquire()
    both_hold.wait()
    b.acquire()

def second():
    b.acquire()
    both_hold.wait()
    a.acquire()

def main():
    started = time.monotonic()
    work(WORK_SECONDS)
    with open("worked.json", "w") as f:
        json.dump({"worked_s": time.monotonic() - started}, f)
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

main()
"""
WORK_SECONDS = 60  # "a minute of work" before the deadlock
STALL = 3


def test_deadlock_after_a_minute_of_work_dumps_once_on_stall(tmp_path: Path,
                                                             runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "deadlock.py", DEADLOCK.replace("WORK_SECONDS", str(WORK_SECONDS)))
    run = FlightRun(tmp_path, [PY, str(prog)], "--stall", str(STALL))
    runs.append(run)
    dump = run.wait_dumps(1, timeout=WORK_SECONDS + 120)[0]
    assert dump.name == "dump-1-stall"
    # One dump per stall: the stall goes on, no other dump comes.
    time.sleep(3 * STALL)
    assert run.dumps() == [dump]
    assert run.stop() == 128 + signal.SIGTERM, run.stderr
    worked = json.loads((tmp_path / "worked.json").read_text())["worked_s"]
    assert worked >= WORK_SECONDS

    report = dump_of(dump)
    assert report["dump"]["reason"] == "stall"
    assert report["dump"]["detail"].startswith("no function event for")
    stacks = {frames(t)[-2]: t for t in thread_stacks(report) if len(t["stack"]) >= 2}
    for holder in ("first", "second"):
        thread = stacks[holder]
        top = thread["stack"][-1]
        # Blocked in acquire, called by the function that took the other lock.
        assert top["kind"] == "native" and top["name"].endswith("acquire"), thread
        assert top["caller"] == holder
        assert top["open_ns"] >= STALL * 1e9 * 0.9
    main = next(t for t in thread_stacks(report) if t["python_thread_id"] == 0)
    assert frames(main)[:2] == ["<module>", "main"]
    # The ring lost main()'s begin a minute ago: the dump's own stack knows it.
    main_frame = main["stack"][1]
    assert main_frame["open_ns"] >= worked * 1e9
    # And the ring holds only the last part of the minute's events.
    assert report["duration_ns"] < worked * 1e9


# ---------------------------------------------------------------------------- bad ends


def build_crashmod(directory: Path) -> None:
    """tests/native/crashmod, a C extension whose crash() faults."""
    gcc = shutil.which("gcc")
    assert gcc is not None, "gcc not found: run scripts/setup.sh"
    out = directory / f"crashmod{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run([gcc, "-O1", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}",
                    str(NATIVE / "crashmod" / "crashmod.c"), "-o", str(out)], check=True)


CRASH = """
import crashmod

def leaf(i):
    return i

def call_it():
    for i in range(1000):
        leaf(i)
    crashmod.crash()

def main():
    call_it()

main()
"""


def test_segfault_in_a_c_extension(tmp_path: Path, runs: List[FlightRun]) -> None:
    build_crashmod(tmp_path)
    prog = script(tmp_path, "crash.py", CRASH)
    run = FlightRun(tmp_path, [PY, str(prog)])
    runs.append(run)
    # The handler asked for the dump and waited for it; then the signal's own action.
    assert run.finish() == 128 + signal.SIGSEGV, run.stderr
    assert [d.name for d in run.dumps()] == ["dump-1-signal-SIGSEGV"], run.stderr
    report = dump_of(run.dumps()[0])
    (main,) = thread_stacks(report)
    assert frames(main) == ["<module>", "main", "call_it", "crashmod.crash"]
    top = main["stack"][-1]
    assert top["kind"] == "native" and top["caller"] == "call_it" and top["line"] == 10
    assert report["dump"]["processes"][0]["status"] == []  # whole: the thread held the GIL
    # The faulting thread's last records went out first: its last calls are there.
    assert [e["name"] for e in main["recent"]][-1] == "crashmod.crash"


EXCEPTION = """
def divide(a, b):
    return a / b

def compute():
    return divide(1, 0)

compute()
"""


def test_uncaught_exception(tmp_path: Path, runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "boom.py", EXCEPTION)
    run = FlightRun(tmp_path, [PY, str(prog)])
    runs.append(run)
    assert run.finish() == 1, run.stderr
    assert "ZeroDivisionError: division by zero" in run.stderr  # as Python printed it
    # One dump, the process's (trace's own for the command's exit status 1 joins it).
    assert [d.name for d in run.dumps()] == ["dump-1-exception"], run.stderr
    described = json.loads((run.dumps()[0] / "dump.json").read_text())
    assert described["detail"] == ("ZeroDivisionError: division by zero in divide (boom.py:3) "
                                   "<- compute (boom.py:6) <- <module> (boom.py:8)")
    report = dump_of(run.dumps()[0])
    assert report["dump"]["detail"] == described["detail"]
    kinds = {(e["kind"], e["name"]) for t in thread_stacks(report) for e in t["recent"]}
    assert kinds, report["dump"]


CHILDREN = """
import os, subprocess, sys, time

def child_fails():
    sys.exit(3)

def parent():
    code = subprocess.call([sys.executable, __file__, "child"])
    with open("child.txt", "w") as f:
        f.write(str(code))

if sys.argv[1:] == ["child"]:
    child_fails()
else:
    parent()
"""


def test_a_child_that_exits_badly_while_the_command_goes_on(tmp_path: Path,
                                                           runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "kids.py", CHILDREN)
    run = FlightRun(tmp_path, [PY, str(prog)])
    runs.append(run)
    assert run.finish() == 0, run.stderr
    assert (tmp_path / "child.txt").read_text() == "3"  # the program saw what it would untraced
    (dump,) = run.dumps()
    assert dump.name == "dump-1-exit-3"
    described = json.loads((dump / "dump.json").read_text())
    assert "kids.py child" in described["requested_by"]["argv"]


HOLDS_GIL = """
import ctypes

def leaf(i):
    return i

def stuck():
    for i in range(1000):
        leaf(i)
    ctypes.PyDLL(None).pause()  # native code that keeps the GIL, for ever

stuck()
"""


def test_a_program_stuck_holding_the_gil_is_dumped_and_the_report_says_what_is_missing(
        tmp_path: Path, runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "stuck.py", HOLDS_GIL)
    run = FlightRun(tmp_path, [PY, str(prog)], "--stall", "2")
    runs.append(run)
    dump = run.wait_dumps(1, timeout=120)[0]
    assert run.proc.poll() is None  # the program is left as it was
    run.stop()
    report = dump_of(dump)
    (proc,) = report["dump"]["processes"]
    assert [s["status"] for s in proc["status"]] == ["no_gil"]
    # No open stack could be read, and as the status says, the records the thread
    # was staging (its last calls, up to the C call) are missing; the earlier ones
    # are there.
    (thread,) = proc["threads"]
    assert thread["stack"] == []
    assert {e["name"] for e in thread["recent"]} == {"leaf"}, thread["recent"]
    text = subprocess.run([*CLI, "report", str(dump)], capture_output=True, text=True,
                          check=True).stdout
    assert "(stacks incomplete: the GIL did not come within 1 s" in text


# ---------------------------------------------------------------------------- memory


MANY = """
import os, pinsight_python

def leaf(i):
    return i

def last_call():
    return 0

for i in range(CALLS):
    leaf(i)
last_call()
mapped = 0
with open("/proc/self/maps") as f:
    for line in f:
        if "shm-ust-consumer" in line:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            mapped += end - start
with open("mapped.txt", "w") as f:
    f.write(str(mapped))
pinsight_python.dump("end")
"""
TINY = 256 << 10
CALLS = 3_000_000  # 6 M records: at 3 bytes or more each, over 50 times TINY


def test_memory_stays_within_size(tmp_path: Path, runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "many.py", MANY.replace("CALLS", str(CALLS)))
    out = tmp_path / "out"
    proc = subprocess.run([*CLI, "trace", f"--flight-recorder={TINY >> 10}k", "-o", str(out),
                           "--no-summary", "--", PY, str(prog)], cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    # What LTTng mapped into the process for the run's buffers, and what the dump wrote.
    mapped = int((tmp_path / "mapped.txt").read_text())
    assert 0 < mapped <= TINY
    (dump,) = [d for d in out.iterdir() if d.is_dir()]
    written = sum(f.stat().st_size for f in (dump / "ust").rglob("*") if f.is_file())
    assert written <= TINY
    # Each record takes 3 bytes at least (its head, code id, time): the program's
    # events took 50 times SIZE or more, the dump holds its last ones.
    assert 2 * CALLS * 3 >= 50 * TINY
    trace = read_trace(dump)
    report = dump_of(dump)
    calls = {f["qualname"]: f["calls"] for p in report["processes"] for f in p["functions"]}
    assert calls.get("last_call") == 1
    assert 0 < calls.get("leaf", 0) < CALLS // 10, calls
    assert trace.named("event_block")


# ---------------------------------------------------------------------------- MPI

MPI_APP = """
import time
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()

def lost():
    time.sleep(600)  # never reaches the collective

def step():
    comm.Barrier()

def main():
    comm.Barrier()  # everyone started
    if rank == LOST:
        lost()
    step()

main()
"""
LOST = 2


def test_mpi_rank_that_never_reaches_the_collective(tmp_path: Path,
                                                    runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "job.py", MPI_APP.replace("LOST", str(LOST)))
    # With PInsight's MPI domain: its MPI_Barrier, still open, under mpi4py's.
    env = clean_env(**MPI_ENV, LD_PRELOAD=str(PINSIGHT_LIB.resolve()))
    run = FlightRun(tmp_path, [*MPIRUN, "-x", "LD_PRELOAD", PY, str(prog)], "--stall",
                    str(STALL), env=env)
    runs.append(run)
    dump = run.wait_dumps(1, timeout=180)[0]
    assert dump.name == "dump-1-stall"
    run.stop()
    report = dump_of(dump)
    section = report["dump"]
    ranks = {p["mpi_rank"]: p for p in section["processes"]}
    assert sorted(ranks) == [0, 1, 2, 3], section
    lost = next(t for t in ranks[LOST]["threads"] if t["python_thread_id"] == 0)
    assert frames(lost) == ["<module>", "main", "lost", "time.sleep"]
    for rank in (0, 1, 3):
        waiting = next(t for t in ranks[rank]["threads"] if t["python_thread_id"] == 0)
        assert frames(waiting) == ["<module>", "main", "step", "mpi4py.MPI.Comm.Barrier"]
        (region,) = waiting["regions"]
        assert region["label"] == "[MPI] MPI_Barrier"
        assert region["open_ns"] >= STALL * 1e9 * 0.9
    assert lost["regions"] == []
    # One line per place, the odd rank out first.
    assert section["ranks"][0].startswith(f"rank {LOST}: in lost → sleep for ")
    assert section["ranks"][1].startswith("every other rank: in step → Barrier for ")


# ---------------------------------------------------------------------------- children

FAMILY = """
import multiprocessing, os, sys, time

def forked_wait():
    open("in-forked", "w").close()
    while not os.path.exists("stop"):
        time.sleep(0.05)

def spawned_wait():
    open("in-spawned", "w").close()
    while not os.path.exists("stop"):
        time.sleep(0.05)

def main():
    pid = os.fork()
    if pid == 0:
        forked_wait()
        os._exit(0)
    spawned = multiprocessing.get_context("spawn").Process(target=spawned_wait)
    spawned.start()
    with open(f"ready-{os.getpid()}", "w") as f:
        f.write(f"{pid} {spawned.pid}")
    while not os.path.exists("stop"):
        time.sleep(0.05)
    os.waitpid(pid, 0)
    spawned.join()

if __name__ == "__main__":
    main()
"""


def test_forked_and_spawned_children_are_in_the_dump(tmp_path: Path,
                                                    runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "family.py", FAMILY)
    run = FlightRun(tmp_path, [PY, str(prog)])
    runs.append(run)
    wait_for(lambda: any(tmp_path.glob("ready-*")), 90, "the family", poll=0.05)
    parent = int(next(tmp_path.glob("ready-*")).name.split("-")[1])
    forked, spawned = map(int, next(tmp_path.glob("ready-*")).read_text().split())
    for pid in (parent, forked, spawned):  # each joined the run: its recorder runs
        wait_for(lambda pid=pid: "pinsight-rec" in thread_names(pid), 60,  # type: ignore[misc]
                 f"process {pid}'s recorder")
    wait_file(tmp_path / "in-forked")
    wait_file(tmp_path / "in-spawned")
    run.proc.send_signal(signal.SIGUSR2)
    dump = run.wait_dumps(1)[0]
    (tmp_path / "stop").touch()
    assert run.finish() == 0, run.stderr
    report = dump_of(dump)
    innermost = {p["vpid"]: {frames(t)[-2] for t in p["threads"] if len(t["stack"]) >= 2}
                 for p in report["dump"]["processes"]}
    assert "main" in innermost[parent]
    assert "forked_wait" in innermost[forked]
    assert "spawned_wait" in innermost[spawned]


# ---------------------------------------------------------------------------- configuration

CAPPED = """
import os, time

def capped(i):
    return i

def free(i):
    return i

def main():
    for i in range(100):
        capped(i)
        free(i)
    open("ready", "w").close()
    while not os.path.exists("stop"):
        capped(0)
        free(0)
        time.sleep(0.01)

main()
"""


def test_caps_and_a_reload_in_a_flight_recorder_run(tmp_path: Path,
                                                    runs: List[FlightRun]) -> None:
    config = tmp_path / "caps.txt"
    config.write_text("[Lexgion(Python:capped)]\nmax_num_traces = 10\n")
    prog = script(tmp_path, "capped.py", CAPPED)
    run = FlightRun(tmp_path, [PY, str(prog)], "--config", str(config))
    runs.append(run)
    wait_file(tmp_path / "ready")
    config.write_text("[Lexgion(Python:capped)]\nmax_num_traces = 20\n")
    run.proc.send_signal(signal.SIGUSR1)  # a reload: forwarded, as in any run
    wait_for(lambda: "reload the configuration" in run.stderr, 60, "the reload's note")
    time.sleep(0.5)
    run.proc.send_signal(signal.SIGUSR2)
    dump = run.wait_dumps(1)[0]
    (tmp_path / "stop").touch()
    assert run.finish() == 0, run.stderr
    report = dump_of(dump)
    (proc,) = report["processes"]
    # The dump holds rate control's counts so far, under the reloaded cap (the counts
    # go on from the first one's), and the reload's configuration.
    (rated,) = [r for r in proc["rate_controlled"] if r["qualname"] == "capped"]
    assert rated["rate"]["traced"] == 20 and rated["rate"]["capped"]
    assert rated["rate"]["max_num_traces"] == 20
    assert [c["generation"] for c in proc["configs"]][-1] == 2


# ---------------------------------------------------------------------------- attach

STANDALONE = """
import os, sys, time

def attached_wait():
    while not os.path.exists("stop"):
        time.sleep(0.05)

print("ready", flush=True)
attached_wait()
"""


def test_an_attached_process_joins_a_flight_recorder_run(tmp_path: Path,
                                                         runs: List[FlightRun]) -> None:
    holder = script(tmp_path, "holder.py", ASKING)
    run = FlightRun(tmp_path, [PY, str(holder)])
    runs.append(run)
    wait_file(tmp_path / "asked.txt")  # the run's first dump, before the attach
    prog = script(tmp_path, "standalone.py", STANDALONE)
    # A program started apart, with none of the run's environment.
    target = subprocess.Popen([PY, str(prog)], cwd=tmp_path, env=clean_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None and target.stdout.readline() == "ready\n"
        attach = subprocess.run([*CLI, "attach", str(target.pid), "--join", str(run.proc.pid)],
                                cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                                timeout=120, check=False)
        assert attach.returncode == 0, attach.stderr
        # Its recorder thread runs once it joined the run.
        wait_for(lambda: "pinsight-rec" in thread_names(target.pid), 60, "the recorder")
        run.proc.send_signal(signal.SIGUSR2)
        second = run.wait_dumps(2)[1]
        (tmp_path / "stop").touch()
        assert target.wait(60) == 0
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
        assert target.stdout is not None
        target.stdout.close()
    assert run.finish() == 0, run.stderr
    report = dump_of(second)
    (joined,) = [p for p in report["dump"]["processes"] if p["vpid"] == target.pid]
    (thread,) = joined["threads"]
    assert "attached_wait" in frames(thread)
    nowhere = subprocess.run([*CLI, "attach", str(os.getpid()), "--join", "1"], cwd=tmp_path,
                             env=clean_env(), capture_output=True, text=True, timeout=60,
                             check=False)
    assert nowhere.returncode == 2
    assert "--join 1: no flight-recorder run of this user" in nowhere.stderr


# ---------------------------------------------------------------------------- relayd


def test_relayd_streams_the_dumps(tmp_path: Path, runs: List[FlightRun]) -> None:
    prog = script(tmp_path, "prog.py", ASKING)
    with RelayDaemon(tmp_path / "relayd-output") as relayd:
        env = clean_env()
        args = [*CLI, "trace", "--flight-recorder=16M", "--relayd", relayd.spec, "--", PY,
                str(prog)]
        with open(tmp_path / "trace.stderr", "w") as stderr:
            proc = subprocess.Popen(args, cwd=tmp_path, env=env, stderr=stderr, text=True)
        try:
            wait_file(tmp_path / "asked.txt")
            (tmp_path / "stop").touch()
            assert proc.wait(120) == 0, (tmp_path / "trace.stderr").read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        found = list(relayd.output.rglob("dump-1-checkpoint-*"))
    assert len(found) == 1, list(relayd.output.rglob("*"))
    report = report_json(found[0], "--top", "0")
    assert report["dump"]["reason"] == "checkpoint"
    assert any("waiter" in frames(t) for t in thread_stacks(report))


# ---------------------------------------------------------------------------- failures


def test_a_dump_that_cannot_be_written_is_reported_and_the_program_goes_on(
        tmp_path: Path, runs: List[FlightRun]) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounts a small tmpfs: root only (CI runs as root)")
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    try:
        (full / "filler").write_bytes(b"x" * (60 << 10))
        prog = script(tmp_path, "prog.py", ASKING)
        proc = subprocess.Popen([*CLI, "trace", "--flight-recorder=16M", "-o", str(full / "out"),
                                 "--", PY, str(prog)], cwd=tmp_path, env=clean_env(),
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_file(tmp_path / "asked.txt")
            (tmp_path / "stop").touch()
            _, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        subprocess.run(["umount", str(full)], check=False)
    assert proc.returncode == 0, stderr
    assert (tmp_path / "asked.txt").read_text() == "None"  # dump() said no, and went on
    assert "dump 1 (checkpoint) could not be written" in stderr
    assert "pinsight-python: dump('checkpoint'): no dump:" in stderr


@pytest.mark.parametrize("options, message", [
    (["--flight-recorder=8k"], "--flight-recorder 8k: LTTng needs at least"),
    (["--flight-recorder", "--stall", "0.5"], "--stall '0.5': expected seconds, at least 1"),
    (["--stall", "60"], "--stall watches for stalls in a flight-recorder run"),
    (["--flight-recorder", "--compact"], "the flight recorder records the batched payload"),
    (["--flight-recorder", "-o", "/proc/1/fr"], "cannot be written: choose another -o"),
    (["--flight-recorder=lots"], "--flight-recorder 'lots': expected a size"),
])
def test_bad_input_is_refused_before_the_command_starts(
        tmp_path: Path, options: List[str], message: str) -> None:
    proc = subprocess.run([*CLI, "trace", *options, "--", PY, "-c", "open('ran', 'w')"],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert proc.stderr.count("error:") == 1, proc.stderr
    assert not (tmp_path / "ran").exists()


def test_no_dump_writes_nothing(tmp_path: Path) -> None:
    proc = subprocess.run([*CLI, "trace", "--flight-recorder", "-o", "out", "--", PY, "-c",
                           "def f(): pass\nfor _ in range(1000): f()"], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "flight recorder: no dump was taken, nothing was written" in proc.stderr
    assert not (tmp_path / "out").exists()
    session = re.search(r"LTTng session (pinsight-python-\d+-[0-9a-f]{8})", proc.stderr)
    assert session is not None and not session_exists(session.group(1))


def test_a_run_without_the_flight_recorder_has_none(tmp_path: Path) -> None:
    # Every run has a keeper; only --flight-recorder's processes start a recorder
    # (a thread and a connection each): the others say nothing of one.
    code = ("import os, threading\n"
            "def f(): pass\n"
            "for _ in range(1000): f()\n"
            "names = [open(f'/proc/self/task/{t}/comm').read().strip()\n"
            "         for t in os.listdir('/proc/self/task')]\n"
            "open('threads', 'w').write(' '.join(names))\n")
    proc = subprocess.run([*CLI, "trace", "-o", "t", "--", PY, "-c", code], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "flight recorder" not in proc.stderr, proc.stderr
    assert "pinsight-rec" not in (tmp_path / "threads").read_text()
