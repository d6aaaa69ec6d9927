"""The flight recorder's core: a traced process in a flight-recorder run and the
run's keeper (recording/run/keeper.py, flight.py), around a real LTTng snapshot
session, the dumps read back with babeltrace2.

What the process writes at a dump (src/activation/flight_recorder.h): every thread's
open frames (open_frame, outermost first, each with the time it began), its
process_info again, and a dump_marker saying what it could not write. Checked
here: the frames against what the program knows it runs; the bound on the GIL (a
thread that holds it for ever in native code, through ctypes.PyDLL, must not hold
up the dump: the marker says what is missing, and the program runs on); one
dump per stall; the dump at a non-zero exit, named after an uncaught exception.
The end-to-end runs through `pinsight-python trace` are in
tests/integration/test_flight_recorder.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from pinsight_python.activation.join import ENV_SOCKET
from pinsight_python.activation.settings import ENV_FLIGHT_RECORDER
from pinsight_python.recording import lttng
from pinsight_python.recording.run.flight import Dumps
from pinsight_python.recording.run.keeper import Keeper
from tests.tracing import Event, Trace, clean_env, read_trace, wait_for

PY = sys.executable


class Run:
    """A flight-recorder run without trace's command line: the snapshot session, the
    keeper and its dumps; programs started in it join as trace's would."""

    def __init__(self, tmp: Path, stall: float = 0) -> None:
        self.out = tmp / "out"
        self.notes: List[str] = []
        self.session = lttng.Session(self.out, snapshot=True, track_nobody=True,
                                     subbuf_size="256k", num_subbuf=8)
        self.session.create()
        self.session.start()
        self.dumps = Dumps(self.session, self.out, 4 << 20, self.notes.append)
        self.keeper = Keeper(self.session.name, f"PINSIGHT_TEST_RUN={self.session.name}",
                             self.dumps)
        self.keeper.serve()
        self.stall = stall
        self.procs: List[subprocess.Popen[str]] = []

    def start(self, code: str, cwd: Path) -> subprocess.Popen[str]:
        env = clean_env(PINSIGHT_PYTHON="1", PINSIGHT_PYTHON_PAYLOAD="batched",
                        **{ENV_SOCKET: str(self.keeper.socket),
                           ENV_FLIGHT_RECORDER: f"{self.stall:g}"})
        proc = subprocess.Popen([PY, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        self.keeper.stop()
        self.session.destroy()
        assert self.session.name not in lttng.list_sessions()


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    made = Run(tmp_path)
    try:
        yield made
    finally:
        made.close()


def markers(trace: Trace, pid: int) -> List[Event]:
    return [e for e in trace.named("dump_marker") if e.ctx["vpid"] == pid]


def stacks(trace: Trace, pid: int) -> List[Tuple[int, List[str]]]:
    """(tid, frame names outermost first) of each thread in the process's last dump."""
    marker = markers(trace, pid)[-1]
    frames = [e for e in trace.named("open_frame")
              if e.ctx["vpid"] == pid and e.fields["dump_id"] == marker.fields["dump_id"]]
    by_thread: Dict[int, List[Event]] = {}
    for e in frames:
        by_thread.setdefault(int(e.fields["tid"]), []).append(e)
    return [(tid, [f.fields["qualname"] if f.fields["callee"] == "-" else f.fields["callee"]
                   for f in sorted(fs, key=lambda f: int(f.fields["depth"]))])
            for tid, fs in sorted(by_thread.items())]


ASKS = """
import os, threading, time
import pinsight_python

def waiter(stop):
    stop.wait()

def leaf(i):
    return i

def main():
    stop = threading.Event()
    t = threading.Thread(target=waiter, args=(stop,))
    t.start()
    for i in range(20000):
        leaf(i)
    begun = time.monotonic_ns()
    print(pinsight_python.dump("here now"), begun, flush=True)
    stop.set()
    t.join()

main()
"""


def test_a_dump_holds_every_threads_open_frames(run: Run, tmp_path: Path) -> None:
    proc = run.start(ASKS, tmp_path)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    where, asked_ns = stdout.split()
    # The reason as one word of a folder's name; dump() returned once it was written.
    assert where == str(run.out / "dump-1-here-now")
    described = json.loads((Path(where) / "dump.json").read_text())
    assert described["reason"] == "here-now"
    assert described["requested_by"]["pid"] == proc.pid
    trace = read_trace(Path(where))
    (marker,) = markers(trace, proc.pid)
    assert marker.fields["reason"] == "here-now"
    assert marker.fields["status"] == 0
    assert marker.fields["threads"] == 2
    threads = dict(stacks(trace, proc.pid))
    main = threads[proc.pid]
    assert main[:2] == ["<module>", "main"]  # dump() itself is ours: not traced
    (other,) = [names for tid, names in threads.items() if tid != proc.pid]
    assert other[-3:-1] == ["waiter", "Event.wait"] or "waiter" in other
    assert other[-1].endswith("acquire")  # blocked in native code: its stack all the same
    # A Python function's frame has callee "-", never an empty string: Babeltrace
    # 2.0.4 reads one as the field's previous value (here, the native call's name).
    callees = [e.fields["callee"] for e in trace.named("open_frame")]
    assert sorted(set(callees)) == ["-", other[-1]], callees
    # Every frame began under tracing, before the program asked for the dump (its
    # own CLOCK_MONOTONIC, LTTng-UST's clock), and says when.
    begins = [int(e.fields["begin_ns"]) for e in trace.named("open_frame")]
    assert all(int(asked_ns) - 120e9 < b <= int(asked_ns) for b in begins), begins
    # The process is named again (the ring may have lost its first process_info).
    assert [e for e in trace.named("process_info") if e.ctx["vpid"] == proc.pid]


HOLDS_GIL = """
import ctypes, os, threading, time

def leaf(i):
    return i

def hold_for_ever():
    for i in range(1000):
        leaf(i)
    open("holding", "w").close()
    ctypes.PyDLL(None).pause()  # a C call that keeps the GIL

hold_for_ever()
"""


def test_a_thread_holding_the_gil_for_ever_does_not_hold_up_the_dump(
        run: Run, tmp_path: Path) -> None:
    proc = run.start(HOLDS_GIL, tmp_path)
    wait_for((tmp_path / "holding").exists, 60, "the program to hold the GIL")
    time.sleep(0.5)
    started = time.monotonic()
    request = run.dumps.request("usr2", "", "the test")
    assert request.done.wait(60), run.notes
    took = time.monotonic() - started
    assert request.where is not None, request.error
    trace = read_trace(Path(request.where))
    (marker,) = markers(trace, proc.pid)
    # What it could not write, said: the GIL did not come (no open frames).
    assert marker.fields["status"] & 1
    assert not [e for e in trace.named("open_frame") if e.ctx["vpid"] == proc.pid]
    # Its earlier records are there: the encoded ones need no GIL.
    assert trace.named("event_block")
    described = json.loads((Path(request.where) / "dump.json").read_text())
    assert described["processes"] == [{"pid": proc.pid, "flush": "1"}]
    assert took < 60
    assert proc.poll() is None  # untouched: still in its C call


STALLS = """
import time

def leaf(i):
    return i

def blocked():
    time.sleep(60)

for i in range(1000):
    leaf(i)
blocked()
"""


def test_one_dump_per_stall(tmp_path: Path) -> None:
    run = Run(tmp_path, stall=1)
    try:
        proc = run.start(STALLS, tmp_path)
        wait_for(lambda: len(run.dumps.taken) >= 1, 60, "the stall's dump", poll=0.05)
        time.sleep(3)  # three times the stall: still one stall
        assert [d["reason"] for d in run.dumps.taken] == ["stall"]
        dump = run.dumps.taken[0]
        assert dump["requested_by"]["pid"] == proc.pid
        assert dump["detail"].startswith("no function event for ")
        trace = read_trace(Path(dump["where"]))
        assert dict(stacks(trace, proc.pid))[proc.pid] == ["<module>", "blocked", "time.sleep"]
    finally:
        run.close()


ENDS = """
import sys

def divide(a, b):
    return a / b

if sys.argv[1:] == ["exit"]:
    sys.exit(3)
divide(1, 0)
"""


@pytest.mark.parametrize("how, reason, status", [
    ("exit", "exit-3", 3),
    ("exception", "exception", 1),
])
def test_a_bad_exit_is_dumped(run: Run, tmp_path: Path, how: str, reason: str,
                              status: int) -> None:
    script = tmp_path / "ends.py"
    script.write_text(textwrap.dedent(ENDS))
    proc = run.start(f"import runpy, sys; sys.argv = ['ends.py', {how!r}]; "
                     f"runpy.run_path({str(script)!r}, run_name='__main__')", tmp_path)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == status, stderr
    wait_for(lambda: len(run.dumps.taken) >= 1, 30, "the exit's dump", poll=0.05)
    (dump,) = run.dumps.taken
    assert dump["reason"] == reason
    if how == "exception":
        assert dump["detail"].startswith(
            "ZeroDivisionError: division by zero in divide (ends.py:5)")
    trace = read_trace(Path(dump["where"]))
    (marker,) = markers(trace, proc.pid)
    assert marker.fields["reason"] == reason
    assert trace.named("event_block")  # its last records went out first
