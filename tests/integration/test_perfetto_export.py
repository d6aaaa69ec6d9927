"""export --format perfetto on a trace of every kind of event, recorded by
`pinsight-python trace` (threads, imports, the GIL, sampled allocations): read back
with Perfetto's own schema (tests/perfetto_trace.py), the same frames as report per
thread, a GIL track per thread tiling its time, imports as slices of their own
category, the sampled heap as a counter of its process, and the activation's mode
change and configuration as instants with their generation. The regions and kernels
of PInsight's domains and their joins: test_coexistence.py and test_cuda.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from pinsight_python.reading.analysis import ReadFilter, read_trace
from tests import perfetto_trace
from tests.tracing import clean_env

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
