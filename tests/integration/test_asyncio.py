"""asyncio, seen by task: which task ran each step, how long each ran and waited,
who awaited whom, checked against the program's own clocks.

The program measures itself inside every step of every task (time.thread_time and
time.perf_counter from the moment the step's code runs to the next await) and when
each task is created and done; the report's per-task table, read back with
`report --json`, must agree. Its ground truth is the loop thread's own CPU time,
so scripts/test.sh runs this file alone on the machine. Runs on the interpreter
of the test run: 3.13 (.venv, sys.monitoring), 3.11 (.venv-fallback, setprofile),
3.14 and 3.15, and on every payload.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.tracing import ASYNCIO_PROGRAM, CLI, Tracer, asyncio_tasks, check_balanced, report_json

# Every payload on asyncio's own loop; uvloop's (the C loop most services run) on one.
RUNS = [("full", "asyncio"), ("compact", "asyncio"), ("batched", "asyncio"), ("full", "uvloop")]


@pytest.fixture
def tracer(tmp_path: Path) -> Tracer:
    return Tracer(tmp_path)


def _traced(tracer: Tracer, payload: str,
            loop: str) -> tuple[Dict[str, Any], Dict[str, Any], Path]:
    run = tracer.run(ASYNCIO_PROGRAM, activate=f"pinsight_python.activate(payload={payload!r})",
                     args=[loop])
    truth: Dict[str, Any] = json.loads(run.stdout)
    check_balanced(run.trace)
    trace_dir = tracer.tmp_path / f"trace{tracer.counter}"
    return report_json(trace_dir, "--top", "0"), truth, trace_dir


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is 3.11's")
@pytest.mark.parametrize(("payload", "loop"), RUNS)
def test_tasks_match_the_programs_clocks(tracer: Tracer, payload: str, loop: str) -> None:
    report, truth, trace_dir = _traced(tracer, payload, loop)
    tasks = asyncio_tasks(report)
    measured = {name: t for name, t in truth.items() if isinstance(t, dict)}
    for name, t in measured.items():
        task = tasks[name]
        # Every step the program ran, as a step of its task; no other.
        assert task["steps"] == t["steps"], (name, task, t)
        # Its steps' time is at least the time the program measured in them, and
        # more only by the few calls around each await (asyncio.sleep's, the
        # loop's hand-back): a millisecond per step is plenty, alone on the machine.
        running = task["running_ns"] / 1e9
        assert running >= t["cpu"] * 0.98, (name, running, t)
        assert running - t["wall"] <= 0.05 * t["wall"] + 0.002 * t["steps"], (name, running, t)
        if "created" in t and "done" in t:
            life = t["done"] - t["created"]
            waiting = task["waiting_ns"] / 1e9
            assert abs(waiting - (life - t["wall"])) <= 0.05 * life + 0.002 * t["steps"], (
                name, waiting, life, t)
    # alpha and gamma ran about 0.3 s each, beta a few ms: told apart.
    assert tasks["alpha"]["running_ns"] > 10 * tasks["beta"]["running_ns"]
    assert tasks["gamma"]["running_ns"] > 10 * tasks["beta"]["running_ns"]

    # The program's tasks (the loop's own shutdown tasks may still be pending at exit).
    outcomes = {name: tasks[name]["outcome"] for name in measured}
    assert outcomes["victim"] == "cancelled", outcomes
    assert all(outcome == "returned" for name, outcome in outcomes.items()
               if name != "victim"), outcomes

    serial = {name: task["serial"] for name, task in tasks.items()}
    main = tasks["Task-1"]  # asyncio.run's, made outside any task
    assert main["creator"] is None, main
    # TaskGroup and create_task parents: created by main, at main's call.
    for name in ("alpha", "beta", "gamma", "victim", "target", "waiter", "shared"):
        assert tasks[name]["creator"] == main["serial"], (name, tasks[name], main)
        assert tasks[name]["created_at"]["qualname"] == "main", tasks[name]
    # A task awaiting another; a task two tasks await; a gather's children.
    assert tasks["target"]["awaited_by"] == [serial["waiter"]]
    assert sorted(tasks["shared"]["awaited_by"]) == sorted([serial["first"], serial["second"]])
    gathered = [tasks[name] for name in measured if name.startswith("Task-")]
    assert len(gathered) == 2 and all(t["awaited_by"] == [main["serial"]] for t in gathered)
    # The work handed to a thread is the offloading task's, across threads.
    offload = tasks["offload"]
    assert offload["offloads"] == 1
    assert offload["offloaded_ns"] / 1e9 >= 0.98 * truth["thread_cpu"], (offload, truth)
    assert any(f["qualname"] == "spin" and f["offloaded"] for f in offload["functions"]), (
        offload["functions"])
    # Their top functions: spin (and the clock it reads), in the tasks that spun.
    assert "spin" in [f["qualname"] for f in tasks["alpha"]["functions"][:2]], tasks["alpha"]

    # The text report names them, and the chains.
    out = "\n".join(cli_output("report", str(trace_dir)))
    assert "asyncio tasks of the event loop on main thread" in out
    for name in ("alpha", "beta", "gamma", "victim", "shared"):
        assert f"{name} #{serial[name]}" in out
    assert "2 parents: first" in out, out


@pytest.mark.parametrize("payload", ["compact", "batched"])
def test_many_short_tasks_bounded(tracer: Tracer, payload: str) -> None:
    # Tasks past the first 10,000 of a process are folded by name: the reader's
    # memory stays bounded whatever the program creates; one name told apart by id.
    run = tracer.run("""
        import asyncio

        async def tiny(i):
            return i

        async def main():
            for start in range(0, 12000, 1000):
                await asyncio.gather(*(asyncio.create_task(tiny(i), name="same")
                                       for i in range(start, start + 1000)))

        asyncio.run(main())
    """, activate=f"pinsight_python.activate(payload={payload!r})")
    assert run.returncode == 0
    report = report_json(tracer.tmp_path / f"trace{tracer.counter}", "--top", "0")
    (loop,) = report["processes"][0]["tasks"]["loops"]
    assert len(loop["tasks"]) == 10000
    serials = [t["serial"] for t in loop["tasks"] if t["name"] == "same"]
    assert len(set(serials)) == len(serials)  # one name, told apart
    (group,) = (g for g in loop["groups"] if g["name"] == "same")
    assert len(serials) + group["tasks"] == 12000
    assert group["outcomes"] == {"returned": group["tasks"], "raised": 0, "cancelled": 0}
    # main, asyncio.run's shutdown tasks: every task counted once.
    assert loop["tasks_total"] == 12003


def test_flamegraph_by_task_and_export_tracks(tracer: Tracer, tmp_path: Path) -> None:
    run = tracer.run("""
        import asyncio

        def busy(n):
            return sum(i * i for i in range(n))

        async def worker(n):
            for _ in range(3):
                busy(n)
                await asyncio.sleep(0)

        async def main():
            await asyncio.gather(asyncio.create_task(worker(20000), name="heavy"),
                                 asyncio.create_task(worker(200), name="light"))

        asyncio.run(main())
    """)
    assert run.returncode == 0
    trace_dir = tmp_path / f"trace{tracer.counter}"
    folded = cli_output("flamegraph", str(trace_dir), "--by-task", "--folded")
    heavy = [line for line in folded
             if ";asyncio task heavy;worker (" in line and ";busy (" in line]
    assert heavy, folded
    plain = cli_output("flamegraph", str(trace_dir), "--folded")
    assert not any("asyncio task" in line for line in plain)
    out = tmp_path / "trace.json"
    cli_output("export", str(trace_dir), "-o", str(out))
    events = json.loads(out.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    tracks = {tid: name for tid, name in names.items() if name.startswith("task ")}
    assert any(name.startswith("task heavy #") and "main thread" in name
               for name in tracks.values()), names
    steps: List[Dict[str, Any]] = [e for e in events if e.get("cat") == "asyncio"]
    heavy_track = next(tid for tid, name in tracks.items() if name.startswith("task heavy"))
    assert len([e for e in steps if e["tid"] == heavy_track]) == 4  # 3 sleeps: 4 steps


def cli_output(*args: str) -> List[str]:
    proc = subprocess.run([*CLI, *args],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()
