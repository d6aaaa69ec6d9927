"""The PyEval_SetProfile backend against cProfile, measured in the same run.

    .venv-fallback/bin/python bench/bench_setprofile.py [--repeat N]

Run it with CPython 3.11 (or older) for the issue's figures; on 3.12+ it
forces backend="setprofile". Same workloads as bench_core.py. Configurations:
untraced; cProfile; pinsight-python in MONITORING (counts executions, emits
nothing); every function past its cap (max_num_traces = 1, warmed up: the
skip path with no DISABLE); full TRACING. The traced ones run inside one LTTng
session. Cost per event = (time - untraced) / events pinsight-python emits in
TRACING for the workload (every call, return and native call: the events any
per-call tool handles). Target (issue #6): MONITORING per event <= cProfile.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Dict

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core

CONFIGS = {
    "MONITORING": "[Python.default]\n    trace_mode = MONITORING\n",
    "past-cap": "[Lexgion(Python).default]\n    max_num_traces = 1\n",
    "TRACING": "[Python.default]\n    trace_mode = TRACING\n",
}

RUNNER = """
import time
{workload}
import pinsight_python
pinsight_python.activate(config={config!r}, backend="setprofile")
workload()  # warm up: under a cap, every function is past it after this
e0 = pinsight_python.status()["events_emitted"]
t0 = time.perf_counter()
workload()
t1 = time.perf_counter()
print(t1 - t0, pinsight_python.status()["events_emitted"] - e0)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from pinsight_python.recording import lttng

    print(f"CPython {sys.version.split()[0]}, backend setprofile, min of {args.repeat} runs")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for name, text in CONFIGS.items():
            (tmp / f"{name}.txt").write_text(text)
        results: Dict[str, Dict[str, float]] = {}
        with lttng.Session(tmp / "trace"):
            for workload in bench_core.WORKLOADS:
                row: Dict[str, float] = {}
                for config in ("untraced", "cProfile"):
                    runs = [bench_core.run_one(workload, config, tmp) for _ in range(args.repeat)]
                    row[config] = min(r[0] for r in runs)
                for name in CONFIGS:
                    code = RUNNER.format(
                        workload=bench_core.WORKLOADS[workload], config=str(tmp / f"{name}.txt")
                    )
                    runs = [bench_core.run_code(code, tmp) for _ in range(args.repeat)]
                    row[name] = min(r[0] for r in runs)
                    if name == "TRACING":
                        row["events"] = runs[0][1]
                results[workload] = row
    print("\nns per event over untraced; events = what full TRACING emits\n")
    print(f"{'workload':10} {'events':>9} {'cProfile':>9} {'MONITOR':>9} {'past-cap':>9}"
          f" {'TRACING':>9}   MONITORING/cProfile  TRACING/cProfile")
    for workload, row in results.items():
        base, n = row["untraced"], row["events"]

        ns = {c: (row[c] - base) / n * 1e9 for c in ("cProfile", *CONFIGS)}
        print(
            f"{workload:10} {int(n):>9} {ns['cProfile']:>9.1f} {ns['MONITORING']:>9.1f}"
            f" {ns['past-cap']:>9.1f} {ns['TRACING']:>9.1f}"
            f"   {ns['MONITORING'] / ns['cProfile']:>19.3f}"
            f" {ns['TRACING'] / ns['cProfile']:>17.3f}"
        )
    print("\ntarget: MONITORING/cProfile <= 1.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
