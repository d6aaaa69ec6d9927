"""Benchmark of `pinsight-python unbatch`: output events per second.

Records a batched trace of at least ``--events`` events (default 1.5 million) with
``pinsight-python trace --batch`` over a call-heavy workload (recursive calls with a
native call in every leaf, on three threads), then converts it in fresh processes:

* ``unbatch``: the command (src/reader/unbatch.cpp), ``--rounds`` times (min kept);
* ``old Python unbatch``: the conversion it replaced (tests/unbatch_bt2.py, run by
  the interpreter of babeltrace2's Python bindings), once, unless ``--no-old``;
* ``babeltrace2 -o dummy``: babeltrace2 decoding the unbatched output, the same
  events, and nothing else.

Prints wall and CPU time, output events per second, and the speed relative to each
baseline, all measured in this run.

    .venv/bin/python bench/bench_unbatch.py [--events N] [--rounds R] [--no-old]
                                            [--trace DIR]

A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
OLD = ROOT / "tests" / "unbatch_bt2.py"
SYSTEM_PYTHON = os.environ.get("PINSIGHT_BT2_PYTHON", "/usr/bin/python3")  # python3-bt2's

# fib(DEPTH) with a native call per leaf on THREADS threads: about
# THREADS * 6 * F(DEPTH + 1) events per round.
DEPTH = 20
THREADS = 3
EVENTS_PER_ROUND = THREADS * 6 * 10946

WORKLOAD = """
import sys, threading

def fib(n):
    if n < 2:
        return abs(n)  # a native call in every leaf
    return fib(n - 1) + fib(n - 2)

def work(rounds):
    for _ in range(rounds):
        fib(int(sys.argv[2]))

threads = [threading.Thread(target=work, args=(int(sys.argv[1]),)) for _ in range(int(sys.argv[3]))]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def record(trace_dir: Path, events: int) -> float:
    rounds = -(-events // EVENTS_PER_ROUND)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(textwrap.dedent(WORKLOAD))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pinsight_python.cli", "trace", "--batch",
                        "--no-summary", "-o", str(trace_dir), "--", sys.executable, str(script),
                        str(rounds), str(DEPTH), str(THREADS)], check=True)
        return time.perf_counter() - started


def measure(args: List[str]) -> Tuple[float, float, str]:
    """(wall s, user+sys CPU s, standard error) of one command, which must succeed."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({status}):\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, err


def bench(trace_dir: Path, rounds: int, old: bool) -> None:
    (metadata,) = trace_dir.rglob("metadata")
    size = sum(p.stat().st_size for p in trace_dir.rglob("*") if p.is_file())
    print(f"batched trace: {size / 2**20:.1f} MiB; machine: {os.cpu_count()} CPUs, load "
          f"average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    cli = [sys.executable, "-m", "pinsight_python.cli"]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        events = 0
        best: Optional[Tuple[float, float]] = None
        for i in range(rounds):
            out = Path(tmp) / f"new-{i}"
            wall, cpu, err = measure([*cli, "unbatch", "--progress", "never", "-o", str(out),
                                      str(trace_dir)])
            found = re.search(r"\(([\d,]+) events in", err)
            events = int(found.group(1).replace(",", "")) if found else 0
            best = (wall, cpu) if best is None else (min(best[0], wall), min(best[1], cpu))
            if i:
                shutil.rmtree(out)
        assert best is not None
        results["unbatch"] = best
        print(f"unbatched: {events:,} events")
        babeltrace2 = shutil.which("babeltrace2") or "babeltrace2"
        wall, cpu, _ = measure([babeltrace2, "-o", "dummy", str(Path(tmp) / "new-0")])
        results["babeltrace2 -o dummy"] = (wall, cpu)
        if old:
            print("the old Python conversion (about 23,000 events/s) ...", flush=True)
            wall, cpu, _ = measure([SYSTEM_PYTHON, str(OLD), str(metadata.parent),
                                    str(Path(tmp) / "old")])
            results["old Python unbatch"] = (wall, cpu)

    new_wall, new_cpu = results["unbatch"]
    print(f"{'command':<22} {'wall s':>8} {'events/s':>12} {'CPU s':>8} {'events/CPU s':>14} "
          f"{'unbatch is: x faster (wall)':>28} {'(CPU)':>7}")
    for name, (wall, cpu) in results.items():
        print(f"{name:<22} {wall:8.2f} {events / wall:12,.0f} {cpu:8.2f} {events / cpu:14,.0f} "
              f"{wall / new_wall:27.1f}x {cpu / new_cpu:6.1f}x")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_500_000,
                        help="events to record at least (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of the new unbatch, the fastest kept (default: %(default)s)")
    parser.add_argument("--no-old", dest="old", action="store_false",
                        help="skip the old Python conversion (a minute per million events)")
    parser.add_argument("--trace", type=Path,
                        help="a batched trace to reuse, or to record into and keep")
    args = parser.parse_args(argv)
    tmp: Optional[str] = None
    if args.trace is None:
        tmp = tempfile.mkdtemp(prefix="pinsight-bench-")
        trace_dir = Path(tmp) / "trace"
    else:
        trace_dir = args.trace
    try:
        if not trace_dir.exists():
            print(f"recording >= {args.events:,} events into {trace_dir} ...", flush=True)
            print(f"  recorded in {record(trace_dir, args.events):.1f} s", flush=True)
        bench(trace_dir, max(1, args.rounds), args.old)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
