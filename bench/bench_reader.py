"""Benchmark of the trace reader: events per second and peak memory.

Records traces of at least ``--events`` events (default 10 million) by
running a recursive workload under the tracer in a real LTTng session
(pinsight_python.recording.lttng.Session), then runs ``babeltrace2 -o dummy`` (the
baseline: babeltrace2 decoding the trace and nothing else), the end-of-run
summary of ``trace``, ``report``, ``flamegraph``, ``export --format chrome``
and ``export --format perfetto`` on each, in fresh processes, and prints wall
time, events/s, CPU time, peak RSS and the speed relative to babeltrace2 of
each, and the bytes per event of both exports. Workloads:

* ``1-process``: one Python process; its events land in one per-CPU stream,
  which one thread must decode (babeltrace2 decodes a stream sequentially);
* ``2-ranks``: the same calls split over two processes labelled as MPI ranks
  and pinned to one CPU each, as an MPI launcher would; the reader decodes
  the two streams on two threads;
* ``nbody``: the n-body integration of bench_core.py, 4,437 steps (about 230,000
  events), recorded by ``pinsight-python trace`` with its defaults (the trace the
  Chrome export's 110 bytes per event were measured on);
* ``asyncio``: bench_core.py's asyncio tasks, 250 rounds of 200 gathered tasks of
  two steps (50,000 tasks: 10,000 with a track of their own in the Perfetto export,
  the rest on their loop's shared one), recorded by ``pinsight-python trace`` with
  its defaults;
* ``networkx`` and ``networkx-batched``: networkx's shortest-path test suite
  under pytest (the bench extra), recorded by ``pinsight-python trace`` with the
  default events, in the full payload (``trace``'s default) and the batched one
  (``trace --batch``): about 31 million events, the size of a real suite.

    .venv/bin/python bench/bench_reader.py [--events N] [--trace DIR] [--keep]
        [--workload 1-process|2-ranks|nbody|asyncio|networkx|networkx-batched|both|all]
        [--exports]   # only the exports (and babeltrace2 -o dummy)

With ``--trace DIR`` existing traces are reused (or recorded there and
kept). A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import List, Optional, Tuple

from pinsight_python.recording import lttng

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import WORKLOADS as WORKLOADS_CORE

# fib(LEAF_DEPTH) with one native call per leaf: 6 * F(LEAF_DEPTH + 1) - 2 events.
LEAF_DEPTH = 25
EVENTS_PER_ROUND = 6 * 121393 - 2

WORKLOAD = """
import os
import sys
import pinsight_python

def fib(n):
    if n < 2:
        return abs(n)  # a native call in every leaf
    return fib(n - 1) + fib(n - 2)

def main(rounds, depth):
    for _ in range(rounds):
        fib(depth)

if len(sys.argv) > 3:  # pinned to one CPU, as MPI launchers bind ranks
    os.sched_setaffinity(0, {int(sys.argv[3]) % os.cpu_count()})
pinsight_python.activate()
main(int(sys.argv[1]), int(sys.argv[2]))
"""


# The CPU time of each reader thread, from the reader itself.
CPU_SPLIT = """
import json, sys
from pinsight_python.reading.analysis import read_trace
raw = read_trace(sys.argv[1], call_trees=False, progress="never").raw
print(json.dumps({"decode_thread_cpu_s": raw.decode_thread_cpu_s,
                  "analysis_cpu_s": raw.analysis_cpu_s}))
"""

# The summary `pinsight-python trace` prints when the command ends.
SUMMARY = """
import sys
from pinsight_python.reading.summary import summarize
print("\\n".join(summarize(sys.argv[1], progress="never")))
"""


WORKLOADS = ("1-process", "2-ranks", "nbody", "asyncio", "networkx", "networkx-batched")
# The workloads `pinsight-python trace` records: the command and trace's options.
NBODY_STEPS = 4437
SUITE = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "pytest.ini", "--pyargs",
         "networkx.algorithms.shortest_paths"]
TRACED = {
    "nbody": ((), None),
    "asyncio": ((), None),
    "networkx": ((), SUITE),
    "networkx-batched": (("--batch",), SUITE),
}


def record_with_trace(trace_dir: Path, workload: str) -> float:
    """The workload run under `pinsight-python trace` (its defaults, the default events)."""
    options, command = TRACED[workload]
    with tempfile.TemporaryDirectory() as tmp:
        if command is None:
            script = Path(tmp) / f"{workload}_workload.py"  # not asyncio.py: the module
            script.write_text(textwrap.dedent(SCRIPTS[workload]))
            command = [str(script), str(ROUNDS[workload])]
        else:
            (Path(tmp) / "pytest.ini").write_text("[pytest]\n")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pinsight_python.cli", "trace", "--no-summary",
                        "-o", str(trace_dir), *options, "--", sys.executable, *command],
                       cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - started


# bench_core.py's n-body and asyncio tasks, their step or round count an argument.
SCRIPTS = {
    name: WORKLOADS_CORE[name].replace(loop, "range(int(sys.argv[1]))") + """
import sys
workload()
""" for name, loop in (("nbody", "range(80000)"), ("asyncio", "range(20)"))}
ROUNDS = {"nbody": NBODY_STEPS, "asyncio": 250}


def record(trace_dir: Path, events: int, workload: str) -> float:
    rounds = -(-events // EVENTS_PER_ROUND)
    ranks = 2 if workload == "2-ranks" else 1
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(textwrap.dedent(WORKLOAD))
        started = time.perf_counter()
        # As root, the session records only this group: other traced programs
        # running on the machine stay out of the benchmark's trace.
        gid = random.randrange(200_000, 2**31 - 1) if os.geteuid() == 0 else None
        with lttng.Session(trace_dir, track_vgid=gid):
            procs = []
            for rank in range(ranks):
                command = [sys.executable, str(script), str(-(-rounds // ranks)), str(LEAF_DEPTH)]
                env = dict(os.environ)
                if ranks > 1:
                    command.append(str(rank))
                    env.update(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(ranks))
                procs.append(subprocess.Popen(command, env=env, group=gid))
            for proc in procs:
                if proc.wait() != 0:
                    raise RuntimeError(f"workload exited {proc.returncode}")
        return time.perf_counter() - started


def measure(args: List[str]) -> Tuple[float, float, float, int]:
    """(wall s, user+sys CPU s, peak RSS MiB, exit status) of one command."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def trace_bytes(trace_dir: Path) -> int:
    return sum(p.stat().st_size for p in trace_dir.rglob("*") if p.is_file())


def bench(trace_dir: Path, events_wanted: int, workload: str, exports_only: bool) -> None:
    print(f"\n== workload {workload} ==")
    if not trace_dir.exists():
        if workload in TRACED:
            print(f"recording into {trace_dir} ...", flush=True)
            seconds = record_with_trace(trace_dir, workload)
        else:
            print(f"recording >= {events_wanted:,} events into {trace_dir} ...", flush=True)
            seconds = record(trace_dir, events_wanted, workload)
        print(f"  recorded in {seconds:.1f} s", flush=True)

    cli = [sys.executable, "-m", "pinsight_python.cli"]
    summary = subprocess.run([*cli, "report", str(trace_dir), "--json", "--top", "1"],
                             capture_output=True, text=True, check=True)
    report = json.loads(summary.stdout)
    events = report["events"]
    print(f"trace: {events:,} events, {trace_bytes(trace_dir) / 2**20:,.0f} MiB on disk, "
          f"{report['discarded']['events']:,} discarded by LTTng, "
          f"{len(report['processes'])} process(es), "
          f"{sum(len(p['threads']) for p in report['processes'])} thread(s)")
    print(f"machine: {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    with tempfile.TemporaryDirectory() as out:
        babeltrace2 = shutil.which("babeltrace2") or "babeltrace2"
        commands = {
            "babeltrace2 -o dummy": [babeltrace2, "-o", "dummy", str(trace_dir)],
            "trace's summary": [sys.executable, "-c", SUMMARY, str(trace_dir)],
            "report": [*cli, "report", str(trace_dir), "--progress", "never"],
            "report --json": [*cli, "report", str(trace_dir), "--json", "--progress", "never"],
            "flamegraph --folded": [*cli, "flamegraph", str(trace_dir), "--folded",
                                    "--progress", "never", "-o", f"{out}/folded.txt"],
            "flamegraph (svg)": [*cli, "flamegraph", str(trace_dir), "--progress", "never",
                                 "-o", f"{out}/flame.svg"],
            "export --format chrome": [*cli, "export", str(trace_dir), "--progress", "never",
                                       "-o", f"{out}/trace.json"],
            "export --format perfetto": [*cli, "export", str(trace_dir), "--progress",
                                         "never", "-o", f"{out}/trace.pftrace"],
        }
        if exports_only:
            commands = {name: command for name, command in commands.items()
                        if name.startswith(("babeltrace2", "export"))}
        print(f"{'command':<24} {'wall s':>8} {'events/s':>12} {'CPU s':>8} {'peak RSS':>10} "
              f"{'vs babeltrace2: wall':>21} {'CPU':>6}")
        baseline: Optional[Tuple[float, float]] = None
        for name, command in commands.items():
            wall, cpu, rss, status = measure(command)
            flag = "" if status == 0 else f"  (exit {status})"
            baseline = baseline or (wall, cpu)
            # Speed relative to babeltrace2 decoding alone (> 1: faster; the goal is
            # >= 0.5); the CPU ratio is the steadier one on a busy machine.
            print(f"{name:<24} {wall:8.2f} {events / wall:12,.0f} {cpu:8.2f} "
                  f"{rss:7.0f} MiB {baseline[0] / wall:20.2f}x {baseline[1] / cpu:5.2f}x{flag}",
                  flush=True)
        for label, name in (("chrome JSON", "trace.json"), ("Perfetto", "trace.pftrace")):
            exported = Path(out) / name
            if exported.exists():
                size = exported.stat().st_size
                print(f"{label}: {size / 2**20:,.1f} MiB, {size / events:.2f} bytes per event")
        if exports_only:
            return

    split = json.loads(subprocess.run([sys.executable, "-c", CPU_SPLIT, str(trace_dir)],
                                      capture_output=True, text=True, check=True).stdout)
    per_thread, analysis = split["decode_thread_cpu_s"], split["analysis_cpu_s"]
    # Idle machine: the busiest thread, or all the CPU time spread over the cores.
    idle_wall = max(*per_thread, analysis, (sum(per_thread) + analysis) / (os.cpu_count() or 1))
    print(f"reader threads (report): decoding {' + '.join(f'{c:.2f}' for c in per_thread)} s "
          f"CPU, analysis {analysis:.2f} s CPU; CPU-bound estimate for an idle machine: "
          f"{idle_wall:.2f} s = {events / idle_wall:,.0f} events/s")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000,
                        help="events to record at least (default: %(default)s)")
    parser.add_argument("--trace", type=Path,
                        help="directory of the traces to reuse or record into")
    parser.add_argument("--keep", action="store_true", help="keep the recorded traces")
    parser.add_argument("--workload", choices=(*WORKLOADS, "both", "all"), default="both",
                        help="both: 1-process and 2-ranks (default); all: every workload")
    parser.add_argument("--exports", action="store_true",
                        help="only babeltrace2 -o dummy and the two exports")
    args = parser.parse_args(argv)

    tmp: Optional[str] = None
    if args.trace is None:
        tmp = tempfile.mkdtemp(prefix="pinsight-bench-")
        root = Path(tmp)
    else:
        root = args.trace
    try:
        for workload in WORKLOADS:
            both = args.workload == "both" and workload in ("1-process", "2-ranks")
            if args.workload in (workload, "all") or both:
                bench(root / workload, args.events, workload, args.exports)
        print("\nevents/s = trace events / wall time of the whole command (interpreter "
              "start-up included); CPU s = user + system time of all its threads.")
    finally:
        if tmp is not None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp is not None:
            print(f"traces kept in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
