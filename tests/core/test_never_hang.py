"""The traced program never hangs and meets its own failures (issue 31).

- tracemalloc: its hook on raw allocations takes the GIL; the control thread that
  activation starts allocates its thread state while the activating thread holds
  the GIL, which deadlocked every program started with tracemalloc on, in every
  mode, and every child forked with tracemalloc on.
- An allocation that fails inside our callback is the program's to fail: CPython's
  own test (test_exceptions.test_memory_error_in_PyErr_PrintEx) makes the next
  allocations fail and expects MemoryError; our callback used to take the failure
  and clear it, and the program ran on as if memory had been plentiful.
- What we allocate is not the program's to count: tracemalloc's figures stay its own.

Each program runs with a timeout that turns a hang into a failure, on the backend of
the interpreter running the suite (sys.monitoring on 3.12+, setprofile before).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest

from tests.tracing import DEFAULT_BACKEND, clean_env, read_trace

HANG = 60  # seconds: the programs below take well under one

MODES = ("STANDBY", "MONITORING", "TRACING")


def run(args: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              env=env, timeout=HANG, check=False)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"hung for {HANG} s: {args}") from e


def ours(stderr: str) -> List[str]:
    """stderr without the note that no session records the events (none here)."""
    return [ln for ln in stderr.splitlines() if "but no LTTng session records" not in ln]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["-X tracemalloc", "PYTHONTRACEMALLOC=1"])
def test_tracemalloc_from_the_start(mode: str, how: str) -> None:
    extra = {"PINSIGHT_PYTHON": "1", "PINSIGHT_TRACE_PYTHON": mode}
    args = ["-c", "import tracemalloc; print(tracemalloc.is_tracing())"]
    if how.startswith("-X"):
        args = ["-X", "tracemalloc", *args]
    else:
        extra["PYTHONTRACEMALLOC"] = "1"
    res = run(args, clean_env(**extra))
    assert (res.returncode, res.stdout, ours(res.stderr)) == (0, "True\n", [])


def test_tracemalloc_then_activate_then_fork() -> None:
    program = textwrap.dedent("""
        import os, tracemalloc
        tracemalloc.start()
        import pinsight_python
        pinsight_python.activate()
        def work():
            return sum(i for i in range(100))
        pid = os.fork()
        if pid == 0:  # the child restarts the control thread as activation did
            print("child", work(), pinsight_python.status()["active"], flush=True)
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        print("parent", work(), os.waitstatus_to_exitcode(status) if hasattr(os,
              "waitstatus_to_exitcode") else status >> 8)
    """)
    res = run(["-c", program], clean_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout == "child 4950 True\nparent 4950 3\n", res.stdout


NO_MEMORY = textwrap.dedent("""
    import _testcapi
    class C():
        pass
    _testcapi.set_nomemory(0, {})
    C()
""")


@pytest.mark.parametrize("events", ["function,c_call", "function"])
def test_memory_error_reaches_the_program(events: str) -> None:
    """CPython's test_memory_error_in_PyErr_PrintEx, traced: for each of the first
    allocations made to fail, the program fails with MemoryError as untraced."""
    env = clean_env(PINSIGHT_PYTHON="1", PINSIGHT_TRACE_PYTHON="TRACING",
                      PINSIGHT_PYTHON_EVENTS=events)
    outcomes = []
    for failing in range(1, 20):
        res = run(["-c", NO_MEMORY.format(failing)], env)
        outcomes.append((failing, res.returncode in (1, 120), "MemoryError" in res.stderr))
    assert outcomes == [(failing, True, True) for failing in range(1, 20)]


@pytest.mark.skipif(DEFAULT_BACKEND != "sys.monitoring",
                    reason="3.8-3.11: CPython makes a frame object for every call of any "
                    "profile function (cProfile's too), counted by tracemalloc")
def test_our_allocations_are_not_the_programs() -> None:
    """After clear_traces(), tracemalloc counts what the program allocates, the same
    traced (every function) as untraced: our state lives outside Python's allocators.
    (With c_call events on 3.12+, CPython itself allocates the instruction offset it
    passes to a CALL callback when it exceeds 256: see docs/activation.md.)"""
    program = textwrap.dedent("""
        import sys, tracemalloc
        tracemalloc.start()
        if sys.argv[1] == "traced":
            import pinsight_python
            pinsight_python.activate(events=["function"])
        def square(x):
            return x * x
        def squares(n):
            for i in range(n):
                yield square(i)
        def measure():
            tracemalloc.clear_traces()
            total = 0
            for i in range(10):
                total += square(i)
            # Generators suspended while traced: each is watched by a weak reference
            # of ours, hidden from tracemalloc. (Its peak may count one.)
            kept = [squares(3) for _ in range(5)]
            total += sum(next(g) + next(g) for g in kept)
            del kept
            return tracemalloc.get_traced_memory()[0], total
        for _ in range(3):
            figures = measure()
        print(figures)
    """)
    outputs = []
    for how in ("untraced", "traced"):
        res = run(["-c", program, how], clean_env())
        assert res.returncode == 0, res.stderr
        outputs.append(res.stdout)
    assert outputs[0] == outputs[1] and outputs[0].endswith(", 290)\n"), outputs


CLOSERS = textwrap.dedent("""
    import os, subprocess, sys
    def work(n):
        return sum(i * i for i in range(n))
    statuses = []
    for _ in range(10):
        pid = os.fork()
        if pid == 0:  # a daemonizing child: every descriptor above 2 closed, then work
            os.closerange(3, 4096)
            for _ in range(100):
                work(100)
            os._exit(0)
        statuses.append(os.waitpid(pid, 0)[1])
        statuses.append(subprocess.run(
            ["true"], close_fds=True, preexec_fn=lambda: os.closerange(3, 4096)).returncode)
    r, w = os.pipe()
    lister = subprocess.Popen(["/bin/sh", "-c", "cd /proc/$$/fd && echo *"], stdout=w,
                              close_fds=True, pass_fds=[w])
    os.close(w)
    listed = os.read(r, 1000).split()
    lister.wait()
    print(statuses == [0] * 20, sorted("w" if int(fd) == w else fd.decode() for fd in listed))
""")


def test_children_that_close_every_descriptor(tmp_path: Path) -> None:
    """Forked children that close every descriptor (a daemon, a preexec_fn): LTTng-UST
    used to abort them when it found its descriptors closed; traced, they end as
    untraced. A program exec'd with pass_fds gets exactly what it was passed."""
    script = tmp_path / "closers.py"
    script.write_text(CLOSERS)
    untraced = run([str(script)], clean_env())
    assert untraced.returncode == 0 and untraced.stdout.startswith("True ['0', '1', '2', "), (
        untraced.stdout, untraced.stderr)
    cli = [sys.executable, "-m", "pinsight_python.cli", "trace", "-o", str(tmp_path / "out"),
           "--no-summary", "--", sys.executable, str(script)]
    traced = subprocess.run(cli, capture_output=True, text=True, env=clean_env(),
                            timeout=300, check=False)
    assert (traced.returncode, traced.stdout) == (0, untraced.stdout), traced.stderr
    assert "Assertion" not in traced.stderr, traced.stderr
    trace = read_trace(tmp_path / "out")
    workers = {e.ctx["vpid"] for e in trace.named("function_begin")
               if e.fields.get("qualname") == "work"}
    assert len(workers) == 10, workers  # every forked child traced to its end
