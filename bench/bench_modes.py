"""What each trace mode costs, against baselines measured in the same run.

    .venv/bin/python bench/bench_modes.py [--repeat N]

Same workloads as bench_core.py. Configurations: untraced; an empty C
sys.monitoring callback (the floor of any per-call tool); STANDBY; TRACING with
every function past its cap (max_num_traces = 1, warmed up); MONITORING; TRACING
with max_num_traces = 100 per function; full TRACING; TRACING with the batched
payload. Targets (issue #3):
STANDBY and past-cap within 5% of untraced, MONITORING at most 1.3x the empty
callback's cost per event, the capped run within 10% of untraced on "objects".
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
    "STANDBY": "[Python.default]\n    trace_mode = STANDBY\n",
    "past-cap": "[Lexgion(Python).default]\n    max_num_traces = 1\n",
    "MONITORING": "[Python.default]\n    trace_mode = MONITORING\n",
    "cap-100": "[Lexgion(Python).default]\n    max_num_traces = 100\n",
    "TRACING": "[Python.default]\n    trace_mode = TRACING\n",
    "TRACING-batched": "[Python.default]\n    trace_mode = TRACING\n    payload = batched\n",
}

RUNNER = """
import time
{workload}
import pinsight_python
pinsight_python.activate(config={config!r})
workload()  # warm up: under a cap, every function is past it after this
t0 = time.perf_counter()
workload()
t1 = time.perf_counter()
print(t1 - t0, 0)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from pinsight_python.recording import lttng

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        bench_core.build_reftracer(tmp)
        for name, text in CONFIGS.items():
            (tmp / f"{name}.txt").write_text(text)
            bench_core.SETUP[name] = None  # marker: run through RUNNER
        results: Dict[str, Dict[str, float]] = {}
        with lttng.Session(tmp / "trace"):
            for workload in bench_core.WORKLOADS:
                row: Dict[str, float] = {}
                for config in ("untraced", "empty-callback", "full"):
                    runs = [bench_core.run_one(workload, config, tmp) for _ in range(args.repeat)]
                    row[config] = min(r[0] for r in runs)
                    if config == "full":  # bench_core's full TRACING: the events it emits
                        events = runs[0][1]
                for name in CONFIGS:
                    code = RUNNER.format(
                        workload=bench_core.WORKLOADS[workload], config=str(tmp / f"{name}.txt")
                    )
                    row[name] = min(bench_core.run_code(code, tmp)[0] for _ in range(args.repeat))
                results[workload] = row
                results[workload]["events"] = events
        print(
            f"\ntime relative to untraced (min of {args.repeat} runs);"
            " per-event costs over untraced\n"
        )
        for workload, row in results.items():
            base, n = row["untraced"], row["events"]
            empty = (row["empty-callback"] - base) / n * 1e9
            print(f"{workload}: {int(n)} events with full tracing")
            for name in ("empty-callback", *CONFIGS):
                extra = (row[name] - base) / n * 1e9
                print(
                    f"  {name:16} {row[name] / base:6.3f}x   {extra:8.1f} ns/event"
                    + (f"   {extra / empty:5.2f}x empty" if name == "MONITORING" else "")
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
