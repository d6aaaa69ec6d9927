"""What gil events cost, against `events = function,c_call` in the same session.

    .venv/bin/python bench/bench_gil.py [--repeat N]

Workloads: "threaded" (4 threads running Python functions and small zlib
compressions, which release the GIL: hand-offs and releases both), "threaded-py"
(4 threads of pure Python calls: hand-offs only) and "single" (one thread:
recursive calls and zlib compressions; no hand-off at all). Each runs untraced,
with `function,c_call` and with `function,c_call,gil`, in interleaved rounds;
the minimum of each is kept. Target (issue 25): gil at most 1.05x function,c_call.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

COMMON = """
import threading, zlib

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def squeeze(i):
    return len(zlib.compress(b"pinsight %d " % i * 200, 1))

def part(compress):
    total = 0
    for i in range(1000):
        total += fib(12)
        if compress:
            total += squeeze(i)
    return total

def in_threads(compress):
    threads = [threading.Thread(target=part, args=(compress,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
"""

WORKLOADS = {
    "threaded": "def workload():\n    in_threads(True)\n",
    "threaded-py": "def workload():\n    in_threads(False)\n",
    "single": "def workload():\n    for _ in range(4):\n        part(True)\n",
}

RUNNER = """
import time
{common}
{workload}
{activate}
workload()  # warm up
t0 = time.perf_counter()
workload()
print(time.perf_counter() - t0)
"""

CONFIGS: Dict[str, Optional[List[str]]] = {
    "untraced": None,
    "function,c_call": ["function", "c_call"],
    "function,c_call,gil": ["function", "c_call", "gil"],
}


def run(workload: str, events: Optional[List[str]]) -> float:
    activate = (f"import pinsight_python; pinsight_python.activate(events={events!r})"
                if events else "")
    code = RUNNER.format(common=COMMON, workload=WORKLOADS[workload], activate=activate)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr}")
    return float(proc.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds (min kept)")
    args = parser.parse_args()
    from pinsight_python.recording import lttng

    times: Dict[str, Dict[str, List[float]]] = {
        w: {c: [] for c in CONFIGS} for w in WORKLOADS}
    with tempfile.TemporaryDirectory() as tmpdir:
        with lttng.Session(Path(tmpdir) / "trace"):
            # Interleaved, so that machine noise spreads over every configuration.
            for _ in range(args.repeat):
                for workload in WORKLOADS:
                    for name, events in CONFIGS.items():
                        times[workload][name].append(run(workload, events))
    print(f"min of {args.repeat} interleaved rounds")
    for workload, by_config in times.items():
        best = {name: min(values) for name, values in by_config.items()}
        base = best["function,c_call"]
        print(f"{workload}:")
        for name, seconds in best.items():
            print(f"  {name:22} {seconds * 1e3:8.1f} ms"
                  f"   {seconds / best['untraced']:6.3f}x untraced"
                  f"   {seconds / base:6.3f}x function,c_call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
