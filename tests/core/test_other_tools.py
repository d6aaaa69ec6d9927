"""Other tools keep their state under our tracing: a sys.monitoring tool keeps the
locations it DISABLEd when threads start, and coverage.py (from PyPI) measures
exactly the same lines and branches with and without us."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from tests.tracing import Run, Tracer, check_balanced, clean_env, cli

needs_sys_monitoring = pytest.mark.skipif(
    sys.version_info < (3, 12), reason="sys.monitoring exists from CPython 3.12"
)

OTHER_TOOL = """
import sys
import threading

mon = sys.monitoring
OTHER = mon.PROFILER_ID  # a profiler or debugger of the user's
mon.use_tool_id(OTHER, "test-tool")
hits = []

def on_start(code, offset):
    if code.co_name == "work":
        hits.append(threading.current_thread().name)
        return mon.DISABLE
    return None

mon.register_callback(OTHER, mon.events.PY_START, on_start)
mon.set_events(OTHER, mon.events.PY_START)

def work():
    return 1

def run():
    for _ in range(3):
        work()

def in_thread():
    run()

run()
t = threading.Thread(target=in_thread, name="worker")
t.start()
t.join()
run()
print(hits)
"""


@needs_sys_monitoring
def test_a_thread_start_keeps_another_tools_disabled_locations(
    tracer: Tracer, tmp_path: Path
) -> None:
    # A per-thread cap makes our own tracer DISABLE `work` on the main thread,
    # so the new thread needs our locations back: only ours may come back.
    cfg = tmp_path / "cap.txt"
    cfg.write_text("[Lexgion.default]\n    max_num_traces = 2\n")
    run = tracer.run(OTHER_TOOL, activate=f"pinsight_python.activate(config={str(cfg)!r})")
    untraced = subprocess.run(
        [sys.executable, "-c", OTHER_TOOL], capture_output=True, text=True, check=True
    )
    assert untraced.stdout.strip() == "['MainThread']"
    assert run.stdout == untraced.stdout
    # Our per-thread counters still work: 2 executions of `work` on each thread.
    per_thread: Dict[int, int] = {}
    for e in run.trace.named("function_begin"):
        if e.fields["qualname"] == "work":
            tid = e.fields["python_thread_id"]
            per_thread[tid] = per_thread.get(tid, 0) + 1
    assert sorted(per_thread.values()) == [2, 2], per_thread
    check_balanced(run.trace)


# A threaded program with branches taken and not taken, run under `coverage run`.
THREADED = """
import threading

def classify(n):
    if n % 3 == 0:
        return "three"
    elif n % 2:
        return "odd"
    return "even"

def worker(k, out):
    for i in range(k):
        out.append(classify(i))
    if k > 100:
        out.append("never")

def main():
    out = []
    threads = [threading.Thread(target=worker, args=(k, out)) for k in range(1, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    worker(4, out)
    print(sorted(out))

main()
"""


def coverage_of(script: Path, env: Dict[str, str], tmp_path: Path, tag: str) -> Dict[str, Any]:
    data = tmp_path / f".coverage-{tag}"
    report = tmp_path / f"coverage-{tag}.json"
    subprocess.run(
        [sys.executable, "-m", "coverage", "json", f"--data-file={data}", "-o", str(report)],
        check=True, capture_output=True, env=env, cwd=tmp_path,
    )
    files = json.loads(report.read_text())["files"]
    (measured,) = [v for k, v in files.items() if Path(k).name == script.name]
    return {
        key: measured[key]
        for key in ("executed_lines", "missing_lines", "excluded_lines",
                    "executed_branches", "missing_branches")
    }


CORES = ["default"] + (["sysmon"] if sys.version_info >= (3, 12) else [])


@pytest.mark.parametrize("core", CORES)
def test_coverage_measures_the_same_with_and_without_us(
    tracer: Tracer, tmp_path: Path, core: str
) -> None:
    env = dict(os.environ)
    env.pop("PINSIGHT_TRACE_PYTHON", None)
    if core == "sysmon":
        env["COVERAGE_CORE"] = "sysmon"
    data = tmp_path / ".coverage-traced"
    # The .pth shim activates tracing at start-up, before coverage starts.
    run = tracer.run(
        THREADED,
        activate=None,
        argv_prefix=["-m", "coverage", "run", "--branch", f"--data-file={data}"],
        env={**({"COVERAGE_CORE": "sysmon"} if core == "sysmon" else {}),
             "PINSIGHT_TRACE_PYTHON": "TRACING"},
    )
    script = tmp_path / f"prog{tracer.counter}.py"
    plain = subprocess.run(
        [sys.executable, "-m", "coverage", "run", "--branch",
         f"--data-file={tmp_path / '.coverage-plain'}", str(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=True,
    )
    assert run.stdout == plain.stdout
    assert run.stderr == plain.stderr
    traced = coverage_of(script, env, tmp_path, "traced")
    untraced = coverage_of(script, env, tmp_path, "plain")
    assert traced == untraced
    assert traced["missing_lines"], "the program has a line never run: the test can tell"
    # We really traced it, threads included.
    workers = {e.fields["python_thread_id"] for e in run.trace.named("function_begin")
               if e.fields["qualname"] == "worker"}
    assert workers == set(range(6))
    check_balanced(run.trace, allow_open=True)


# pdb, as a user debugging a traced program meets it: breakpoint(), a step,
# continue; then the program goes on, traced again.
DEBUGGED = """
import io
import sys

sys.stdin = io.StringIO("next\\ncontinue\\n")

def debugged():
    x = 1
    breakpoint()
    y = 2
    return x + y

def after():
    return sum(range(10))

print(debugged())
print(after())
"""


# Since 3.14 breakpoint() runs pdb on sys.monitoring (tool 0), which stops where it
# should beside us; a Pdb on sys.settrace (still Pdb()'s default) does not.
SETTRACE_PDB = (
    "import pdb, sys\n"
    "sys.breakpointhook = lambda: pdb.Pdb(backend='settrace').set_trace(sys._getframe(1))\n"
)


def debugged_as_untraced(tracer: Tracer, tmp_path: Path, program: str) -> Run:
    """`program` traced from the start (the shim), then run again untraced: the
    debugger session it prints and its stderr must be the same."""
    env = clean_env()
    run = tracer.run(program, activate=None, env={"PINSIGHT_TRACE_PYTHON": "TRACING"})
    script = tmp_path / f"prog{tracer.counter}.py"
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, cwd=tmp_path, check=True)
    assert run.stdout == plain.stdout, run.stdout
    assert run.stderr == plain.stderr
    return run


@needs_sys_monitoring
def test_pdb_stops_where_it_would_untraced(tracer: Tracer, tmp_path: Path) -> None:
    """Issue 22, point 9: on 3.12-3.15 a sys.settrace debugger's first stop came one
    line late while we monitored calls (CPython does it with any second tool); the
    tracer steps aside while bdb traces, and traces again once it is done."""
    program = (SETTRACE_PDB if sys.version_info >= (3, 14) else "") + DEBUGGED
    run = debugged_as_untraced(tracer, tmp_path, program)
    assert "-> breakpoint()" in run.stdout  # the first stop: the line itself
    changes = [(e.fields["mode"], e.fields["reason"]) for e in run.trace.named("mode_change")]
    assert ("OFF", "debugger") in changes and ("TRACING", "debugger_done") in changes, changes
    # Traced again after the debugger: after() has its begin and end.
    assert run.trace.functions()["after"] == 1
    assert run.trace.functions("function_end")["after"] == 1
    report = json.loads(cli("report", "--json", str(run.trace.path)))
    [proc] = report["processes"]
    assert proc["unbalanced"]["stepped_aside"] >= 2  # <module> and debugged(), at least
    assert proc["unbalanced"]["implicitly_closed"] == 0


PROFILED = """
import io, pstats, profile, sys

class A:
    f = classmethod(repr)

def installs_a_profiler():
    events = []
    sys.setprofile(lambda frame, event, arg: events.append(event))
    A().f()
    sys.setprofile(None)
    return events

def work():
    return sorted([3, -1, 2], key=abs) + [len("ab")]

def around():
    return [len(x) for x in ("a", "bc")]

print(installs_a_profiler())  # CPython's test_method_with_c_function
profiler = profile.Profile()
print(profiler.runcall(work))  # profile's "Bad return" beside a second tool
stats = io.StringIO()
pstats.Stats(profiler, stream=stats).sort_stats("calls", "name").print_stats()
print(sorted(line.split()[-1] for line in stats.getvalue().splitlines()
             if "(" in line and " at 0x" not in line))
print(around())
"""


@needs_sys_monitoring
def test_a_setprofile_profiler_sees_what_it_sees_untraced(tracer: Tracer, tmp_path: Path) -> None:
    """Issue 34, point 2: a profiler installed with sys.setprofile (profile.py, or by
    hand) gets no c_return for the sys.setprofile call itself, which CPython reports
    to it when another tool monitors CALL there: the tracer watches native calls per
    code object and leaves out code that names setprofile, and traces on."""
    run = debugged_as_untraced(tracer, tmp_path, PROFILED)
    assert run.stdout.splitlines()[0] == "['c_call', 'c_return', 'c_call']"
    callers = {e.fields["caller_qualname"] for e in run.trace.named("c_call_begin")}
    assert "around" in callers and "work" in callers  # native calls traced elsewhere
    assert "installs_a_profiler" not in callers and "Profile.runcall" not in callers
    assert {"installs_a_profiler", "work", "around"} <= set(run.trace.functions())
    assert not run.trace.named("mode_change")[1:]  # no step aside: traced throughout


@pytest.mark.skipif(sys.version_info < (3, 14), reason="pdb has a sys.monitoring backend from 3.14")
def test_pdb_on_sys_monitoring_stops_where_it_would_untraced(
    tracer: Tracer, tmp_path: Path
) -> None:
    """3.14+: breakpoint()'s pdb is a sys.monitoring tool; it stops where it would
    untraced with us beside it, so the tracer does not step aside and traces on."""
    run = debugged_as_untraced(tracer, tmp_path, DEBUGGED)
    assert "-> breakpoint()" in run.stdout
    assert not [e for e in run.trace.named("mode_change") if e.fields["reason"] == "debugger"]
    assert run.trace.functions()["debugged"] == 1
    assert run.trace.functions()["after"] == 1
    assert run.trace.functions("function_end")["after"] == 1
