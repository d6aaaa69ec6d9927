"""Reading cost of native regions: a trace with PInsight's OpenMP domain against the
same run recorded without it, read back by ``report``, per event.

One program, recorded twice with ``pinsight-python trace`` and libpinsight.so
preloaded: with ``--domains openmp`` (Python events and OpenMP regions) and with
``--domains none`` (Python events only, the baseline). Each Python step runs a
recursive function, then an OpenMP kernel through ctypes. Then ``report --json``
reads each trace, in interleaved rounds (the minimum CPU time is kept), and the
CPU nanoseconds per event of both are printed with their ratio (the goal: at
most 1.3).

    .venv/bin/python bench/bench_native_read.py [--steps N] [--depth D] [--rounds R]

Needs build/pinsight/libpinsight.so (scripts/setup.sh) and clang with libomp. A
benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
LIBPINSIGHT = Path(os.environ.get("PINSIGHT_LIB") or ROOT / "build/pinsight/libpinsight.so")

KERNEL = """
double openmp_region(int n) {
  double s = 0;
#pragma omp parallel for reduction(+ : s)
  for (int i = 0; i < n; i++) s += i * 0.5;
  return s;
}
"""

PROGRAM = """
import ctypes, os, sys
kernel = ctypes.CDLL(os.environ["KERNEL"])
kernel.openmp_region.restype = ctypes.c_double

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def step(depth):
    fib(depth)
    return kernel.openmp_region(100)

for _ in range(int(sys.argv[1])):
    step(int(sys.argv[2]))
"""


def _cpu_seconds(command: List[str]) -> float:
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed")
    return usage.ru_utime + usage.ru_stime


def _events(trace: Path) -> Dict[str, int]:
    out = subprocess.run([sys.executable, "-m", "pinsight_python.cli", "report", "--json",
                          "--top", "1", str(trace)], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    counts = report["event_counts"]
    native = counts.get("native_begin", 0) + counts.get("native_end", 0)
    return {"python": report["events"], "native": native}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--depth", type=int, default=8, help="fib depth per step")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not LIBPINSIGHT.is_file():
        print(f"{LIBPINSIGHT} is missing: run scripts/setup.sh", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "kernel.c").write_text(KERNEL)
        kernel = work / "libkernel.so"
        subprocess.run(["clang", "-O2", "-fPIC", "-shared", "-fopenmp", str(work / "kernel.c"),
                        "-o", str(kernel), "-Wl,-rpath,/usr/lib/llvm-14/lib"], check=True)
        (work / "program.py").write_text(textwrap.dedent(PROGRAM))
        env = {**os.environ, "KERNEL": str(kernel), "OMP_NUM_THREADS": "2",
               "LD_PRELOAD": str(LIBPINSIGHT)}
        traces = {}
        for name, domains in (("python only", "none"), ("with OpenMP", "openmp")):
            traces[name] = work / name.replace(" ", "-")
            subprocess.run([sys.executable, "-m", "pinsight_python.cli", "trace", "--no-summary",
                            "--domains", domains, "-o", str(traces[name]), "--",
                            sys.executable, str(work / "program.py"), str(args.steps),
                            str(args.depth)], env=env, check=True, stderr=subprocess.DEVNULL)
        cpu: Dict[str, float] = {name: float("inf") for name in traces}
        for _ in range(args.rounds):
            for name, trace in traces.items():
                cpu[name] = min(cpu[name], _cpu_seconds(
                    [sys.executable, "-m", "pinsight_python.cli", "report", "--json",
                     "--progress", "never", str(trace)]))
        per_event = {}
        for name, trace in traces.items():
            events = _events(trace)
            total = events["python"] + events["native"]
            per_event[name] = cpu[name] / total * 1e9
            print(f"{name:<12} {events['python']:>10,} Python + {events['native']:>9,} native "
                  f"events: report {cpu[name]:.2f} s CPU = {per_event[name]:.0f} ns/event")
        ratio = per_event["with OpenMP"] / per_event["python only"]
        print(f"per event, with OpenMP regions / Python only: {ratio:.2f}x (goal: <= 1.3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
