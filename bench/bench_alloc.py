"""What allocation sampling costs, against runs measured in the same session.

    .venv/bin/python bench/bench_alloc.py [--repeat N] [--interval BYTES]

An allocation-heavy workload (small objects, strings, dicts, lists, byte
buffers of mixed sizes, json round trips: many allocations per function call)
runs untraced, with `events = function` alone, and with `events = function,
alloc` at the default interval, without and with the malloc interposer that
`pinsight-python trace --alloc` preloads. Target (issue 14): function+alloc
within 5% of function alone at the default interval (512 KiB).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

WORKLOAD = """
import json

def record(i):
    return {"id": i, "name": "item-%d" % i, "tags": ["a", "b", str(i)], "value": i * 0.5}

def batch(n):
    rows = [record(i) for i in range(n)]
    text = json.dumps(rows)
    back = json.loads(text)
    buffers = [bytearray(64 + (i * 37) % 4000) for i in range(n)]
    return len(back) + sum(len(b) for b in buffers)

def workload():
    total = 0
    for _ in range(60):
        total += batch(2000)
    return total
"""

RUNNER = """
import time
{workload}
{activate}
workload()  # warm up
t0 = time.perf_counter()
workload()
print(time.perf_counter() - t0)
"""

CONFIGS = {
    "untraced": None,
    "function": "[Python]\n    events = function\n",
    "function+alloc": "[Python]\n    events = function, alloc\n",
    "function+alloc+native": "[Python]\n    events = function, alloc\n",
}


def run(config: Optional[Path], preload: Optional[Path]) -> float:
    activate = (
        f"import pinsight_python; pinsight_python.activate(config={str(config)!r})"
        if config else ""
    )
    env = dict(os.environ)
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER.format(workload=WORKLOAD, activate=activate)],
        capture_output=True, text=True, env=env, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr}")
    return float(proc.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per configuration (min kept)")
    parser.add_argument("--interval", default=None,
                        help="alloc_sample_interval for the alloc runs (default: 512KiB)")
    args = parser.parse_args()
    from pinsight_python.recording import lttng
    from pinsight_python.recording.run.plan import alloc_preload_library

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        paths: Dict[str, Optional[Path]] = {}
        for name, text in CONFIGS.items():
            if text is None:
                paths[name] = None
                continue
            extra = f"    alloc_sample_interval = {args.interval}\n" if (
                args.interval and "alloc" in name) else ""
            paths[name] = tmp / f"{name}.txt"
            paths[name].write_text(text + extra)
        times: Dict[str, List[float]] = {name: [] for name in CONFIGS}
        with lttng.Session(tmp / "trace"):
            # Interleaved, so that machine noise spreads over every configuration.
            for _ in range(args.repeat):
                for name in CONFIGS:
                    preload = alloc_preload_library() if name.endswith("native") else None
                    times[name].append(run(paths[name], preload))
    best = {name: min(values) for name, values in times.items()}
    print(f"\nallocation-heavy workload, min of {args.repeat} runs "
          f"(interval {args.interval or '512KiB (default)'})")
    for name, seconds in best.items():
        print(f"  {name:24} {seconds * 1e3:8.1f} ms   {seconds / best['untraced']:6.3f}x untraced"
              f"   {seconds / best['function']:6.3f}x function")
    return 0


if __name__ == "__main__":
    sys.exit(main())
