"""export --format perfetto on a trace of every kind of event, recorded by
`pinsight-python trace` (threads, imports, the GIL, sampled allocations): read back
with Perfetto's own schema (tests/perfetto_trace.py), the same frames as report per
thread, a GIL track per thread tiling its time, imports as slices of their own
category, the sampled heap as a counter of its process, and the activation's mode
change and configuration as instants with their generation; asyncio's tasks, a track
each under their loop's thread with report's steps and outcomes, and the flows of
their creations, awaits and the work they handed to threads. The regions and kernels
of PInsight's domains and their joins: test_coexistence.py and test_cuda.py."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Tuple

import pytest

from pinsight_python.reading.analysis import ReadFilter, read_trace
from tests import perfetto_trace
from tests.tracing import (
    ASYNCIO_PROGRAM,
    asyncio_tasks,
    clean_env,
    cli,
    cli_process,
    report_json,
    write,
)

PROGRAM = textwrap.dedent("""
    import os, threading
    import json, decimal  # imports traced

    def churn(n):
        keep = []
        for i in range(n):
            keep.append(bytearray(4096))
            if len(keep) > 64:
                keep.pop(0)
            sum(range(200))
        return len(keep)

    workers = [threading.Thread(target=churn, args=(4000,)) for _ in range(2)]
    for w in workers:
        w.start()
    churn(4000)
    for w in workers:
        w.join()
    print(os.getpid())
""")


def test_every_kind_of_event(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(PROGRAM)
    out = tmp_path / "trace"
    proc = subprocess.run(
        [sys.executable, "-m", "pinsight_python.cli", "trace", "--no-summary", "-o", str(out),
         "--events", "function,c_call,import,gil", "--alloc", "--", sys.executable, str(script)],
        capture_output=True, text=True, env=clean_env(), cwd=tmp_path, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr
    pid = int(proc.stdout.split()[-1])
    exported = tmp_path / "run.pftrace"
    subprocess.run([sys.executable, "-m", "pinsight_python.cli", "export", "--pid", str(pid),
                    "-o", str(exported), str(out)], capture_output=True, check=True, timeout=120)
    trace = perfetto_trace.read(exported)
    data = read_trace(out, filters=ReadFilter(pids=(pid,)), progress="never")
    assert perfetto_trace.thread_slice_counts(trace) == perfetto_trace.report_segments(data)
    [process] = data.processes
    assert len(process.threads) == 3

    imports = [s for s in trace.slices if s.category == "import"]
    assert {"import json", "import decimal"} <= {s.name for s in imports}
    assert all(s.args["module"] == s.name[len("import "):] for s in imports)

    # A GIL track under each thread: its states tile the thread's time, never overlapping.
    gil = {t.uuid: t for t in trace.tracks.values() if t.name == "GIL"}
    assert {trace.tracks[t.parent].tid for t in gil.values()} == {t.vtid for t in process.threads}
    for uuid in gil:
        states = sorted((s.ts, s.end, s.name) for s in trace.slices if s.track == uuid)
        assert {name for _, _, name in states} <= {"holding", "waiting", "released"}
        assert "waiting" in {name for _, _, name in states}
        assert all(a[1] <= b[0] for a, b in zip(states, states[1:]))

    # The sampled heap: one counter of the process, its last value what report retains.
    [heap] = [t for t in trace.tracks.values() if t.counter]
    assert trace.tracks[heap.parent].pid == pid and heap.name == "sampled heap (live)"
    values = trace.counters[heap.uuid]
    assert len(values) >= sum(a.samples for a in process.allocations)
    assert values[-1][1] == sum(a.retained_bytes for a in process.allocations)

    # The activation: its mode change and configuration, with the configuration's generation.
    instants = {i.name: i for i in trace.instants if i.track == trace.tracks[heap.parent].uuid}
    [change] = process.mode_changes
    shown = instants[f"{change.mode} ({change.reason})"]
    assert shown.args["config_generation"] == change.generation
    [config] = process.configs
    assert any(i.args.get("config_generation") == config.generation and
               i.name.startswith("configuration ") for i in instants.values())


def traced(tmp_path: Path, program: str, *options: str) -> Path:
    """`pinsight-python trace OPTIONS -- python PROGRAM`, as a user runs it: the trace."""
    script = write(tmp_path, "app.py", program)
    out = tmp_path / "trace"
    proc = cli_process("trace", "--no-summary", "-o", str(out), *options, "--", sys.executable,
                       str(script), cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is 3.11's")
@pytest.mark.parametrize("payload", ["full", "batched"])
def test_asyncio_tasks_as_tracks(tmp_path: Path, payload: str) -> None:
    # Python functions only: the spinning steps' calls of time.thread_time would be
    # most of the file to decode, and say nothing of tasks.
    trace_dir = traced(tmp_path, ASYNCIO_PROGRAM, "--events", "function",
                       *(["--batch"] if payload == "batched" else []))
    report = report_json(trace_dir, "--top", "0")
    tasks = asyncio_tasks(report)
    exported = tmp_path / "run.pftrace"
    cli("export", str(trace_dir), "-o", str(exported))
    trace = perfetto_trace.read(exported)
    # The frames stay on their threads' tracks, as report counts them.
    data = read_trace(trace_dir, progress="never")
    assert perfetto_trace.thread_slice_counts(trace) == perfetto_trace.report_segments(data)

    # A track per task that ran a step, under the loop's thread, named as report names
    # it; a slice per step as report counts steps, the last with the task's outcome.
    [loop] = report["processes"][0]["tasks"]["loops"]
    [loop_thread] = [t for t in trace.threads().values() if t.tid == loop["vtid"]]
    steps = perfetto_trace.task_steps(trace)
    tracks = {trace.tracks[uuid].name: uuid for uuid in steps}
    stepped = {name: task for name, task in tasks.items() if task["steps"]}
    assert set(tracks) == {f"task {name} #{task['serial']}" for name, task in stepped.items()}
    serial_of: Dict[int, int] = {}
    for name, task in stepped.items():
        uuid = tracks[f"task {name} #{task['serial']}"]
        serial_of[uuid] = task["serial"]
        assert trace.tracks[uuid].parent == loop_thread.uuid
        drawn = steps[uuid]
        assert len(drawn) == task["steps"], (name, task, drawn)
        assert all(s.name == name and s.args["task"] == task["serial"] for s in drawn)
        assert [s.args.get("outcome") for s in drawn] == [None] * (len(drawn) - 1) + [
            task["outcome"]], (name, drawn)
        # Its steps' time is its running time: exactly, where no throw() went into
        # an awaited coroutine (a step of the cancelled task: one slice over both parts).
        drawn_ns = sum(s.end - s.ts for s in drawn)
        assert drawn_ns >= task["running_ns"], (name, drawn_ns, task)
        if name in ("alpha", "beta", "gamma", "target", "shared", "first", "second"):
            assert drawn_ns == task["running_ns"], (name, drawn_ns, task)
    assert tasks["victim"]["outcome"] == "cancelled"

    # Flows: from the step that made a task to its first, from a task's last step to
    # the next step of each task that awaited it, from a step to the work item it
    # handed to a thread: as many as report's creators, awaiters and offloads.
    by_serial = {task["serial"]: task for task in stepped.values()}
    made: collections.Counter[Tuple[int, int]] = collections.Counter()
    awaited: collections.Counter[Tuple[int, int]] = collections.Counter()
    handed: collections.Counter[int] = collections.Counter()
    for source, target in perfetto_trace.task_flows(trace):
        by = serial_of[source.track]
        if target.track not in serial_of:
            # The work item's frame, on the thread that ran it.
            assert target.name == "_WorkItem.run", target
            assert trace.tracks[target.track].tid not in (None, loop["vtid"]), target
            handed[by] += 1
            continue
        to = serial_of[target.track]
        if target is steps[target.track][0] and by_serial[to]["creator"] == by:
            made[(by, to)] += 1
        else:  # `to` awaited `by`, and goes on once `by` is done
            assert source is steps[source.track][-1], (source, target)
            assert target.ts >= source.end, (source, target)
            awaited[(by, to)] += 1
    assert made == collections.Counter(
        (task["creator"], task["serial"]) for task in stepped.values() if task["creator"])
    assert awaited == collections.Counter(
        (task["serial"], waiter) for task in stepped.values() for waiter in task["awaited_by"])
    assert handed == collections.Counter(
        {task["serial"]: task["offloads"] for task in stepped.values() if task["offloads"]})
    assert handed[tasks["offload"]["serial"]] == 1
    assert perfetto_trace.joins(trace) == collections.Counter()  # no region here


def test_tasks_past_the_first_10000_share_a_track(tmp_path: Path) -> None:
    # Memory and tracks bounded as report's: a track of its own for each of the first
    # 10,000 tasks of a process, one track of the loop's thread for the rest.
    trace_dir = traced(tmp_path, """
        import asyncio

        async def tiny(i):
            await asyncio.sleep(0)
            return i

        async def main():
            for start in range(0, 10500, 500):
                await asyncio.gather(*(asyncio.create_task(tiny(i))
                                       for i in range(start, start + 500)))

        asyncio.run(main())
    """, "--batch", "--events", "function")
    # The program's own frames only (asyncio's left out): a smaller file to decode,
    # the same tasks and steps.
    only = ("--module", "__main__")
    [loop] = report_json(trace_dir, "--top", "0", *only)["processes"][0]["tasks"]["loops"]
    exported = tmp_path / "run.pftrace"
    cli("export", str(trace_dir), "-o", str(exported), *only)
    trace = perfetto_trace.read(exported)
    steps = perfetto_trace.task_steps(trace)
    own = {uuid: s for uuid, s in steps.items() if trace.tracks[uuid].name.startswith("task ")}
    [shared] = [uuid for uuid in steps if uuid not in own]
    assert trace.tracks[shared].name == "tasks after the first 10000"
    assert trace.tracks[trace.tracks[shared].parent].tid == loop["vtid"]
    assert len(own) == 10000
    assert all(s.args["task"] <= 10000 for track in own.values() for s in track)
    assert all(10000 < s.args["task"] <= loop["tasks_total"] for s in steps[shared])
    assert loop["tasks_total"] == 10503  # main, its tasks, asyncio.run's two at its end
    # Every step report counted, kept task or folded into its group: drawn once.
    counted = sum(t["steps"] for t in loop["tasks"]) + sum(g["steps"] for g in loop["groups"])
    assert sum(len(s) for s in steps.values()) == counted
