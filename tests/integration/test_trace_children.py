"""``pinsight-python trace`` of a program whose children start every way Python
starts them, on a loaded machine: every child's calls are in the trace, each time.

The program counts its own work (docs/activation.md, "Child processes"): 20 tasks on
each of three pools of 2 workers (fork, spawn, forkserver; the pools end with
terminate(): SIGTERM to their workers), a bare os.fork() and a subprocess. CPU hogs
started by the test compete with it, as a build beside it would: the losses this
guards against (a worker ended by SIGTERM half-way through an event took every
later event of the run with it) came and went with load.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from tests.tracing import CLI, clean_env, report_json, session_exists, trace_report, write

RUNS = 3
HOGS = 2

PROGRAM = """
import json, multiprocessing as mp, os, subprocess, sys

def task(x):
    return os.getpid(), x * x

def forked(n):
    return n + 1

def main():
    out = {"parent": os.getpid(), "pools": {}}
    for method in ("fork", "spawn", "forkserver"):
        with mp.get_context(method).Pool(2) as pool:
            results = pool.map(task, range(20), chunksize=1)
        assert [r[1] for r in results] == [x * x for x in range(20)]
        out["pools"][method] = [pid for pid, _ in results]
    pid = os.fork()
    if pid == 0:
        for i in range(3):
            forked(i)
        os._exit(0)
    os.waitpid(pid, 0)
    out["fork"] = pid
    child = subprocess.run(
        [sys.executable, "-c", "import os\\ndef sub(n): return n\\nfor i in range(4): sub(i)\\n"
         "print(os.getpid())"], capture_output=True, text=True, check=True)
    out["subprocess"] = int(child.stdout)
    print(json.dumps(out))

if __name__ == "__main__":
    main()
"""


@pytest.fixture
def cpu_hogs() -> Iterator[List[subprocess.Popen[bytes]]]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], env=clean_env())
            for _ in range(HOGS)]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def calls(report: Dict[str, Any], qualname: str, filename: str = "") -> Dict[int, int]:
    """Per process (vpid): the completed calls of `qualname` (of `filename`, when
    given), as report counts them."""
    out = {}
    for process in report["processes"]:
        n = sum(f["calls"] for f in process["functions"] if f["qualname"] == qualname
                and f["filename"] == (filename or f["filename"]))
        if n:
            out[process["vpid"]] = n
    return out


def test_every_child_is_recorded_exactly_under_load(
    tmp_path: Path, cpu_hogs: List[subprocess.Popen[bytes]]
) -> None:
    script = write(tmp_path, "prog.py", PROGRAM)
    for run in range(RUNS):
        out_dir = tmp_path / f"t{run}"
        proc = subprocess.run(
            [*CLI, "trace", "-o", str(out_dir), "--no-summary", "--", sys.executable,
             str(script)],
            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=240,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        _, session = trace_report(proc.stderr)
        assert not session_exists(session)
        assert "recorded no events" not in proc.stderr, proc.stderr
        out = json.loads(proc.stdout)
        parent, fork, sub = out["parent"], out["fork"], out["subprocess"]
        # The product's reader (fast: the trace has some 200,000 events).
        report = report_json(out_dir, "--top", "0")
        where = f"run {run + 1} of {RUNS}, trace {out_dir}"
        assert report["discarded"]["events"] == 0, where
        tasks = calls(report, "task")
        for method, pids in out["pools"].items():
            expected = dict(collections.Counter(pids))
            assert {pid: tasks.get(pid, 0) for pid in expected} == expected, f"{method}: {where}"
        assert sum(tasks.values()) == 60, where  # no task counted twice, or elsewhere
        assert calls(report, "forked") == {fork: 3}, where
        assert calls(report, "sub") == {sub: 4}, where
        # The parent's own trace is complete: it closes every frame it opened.
        (main,) = [p for p in report["processes"] if p["vpid"] == parent]
        assert main["unbalanced"]["open_at_end"] == 0, where
        assert calls(report, "main", str(script)) == {parent: 1}, where
