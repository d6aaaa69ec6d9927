"""This build's per-event cost against another build's (e.g. the branch point), in the
same interleaved rounds: did a change move the full or compact payload's cost?

    .venv/bin/python bench/bench_versus.py OTHER_PYTHON [--repeat N] [--workloads fib,native]
        [--payloads full,compact,batched,batched-function] [--cpu-time]

Workloads: bench_core.py's, and bench_suite.py's suites: `suite` (or `cpython`: part of
CPython's test suite, loaded before tracing starts, only its run timed), `networkx` and
`sympy` (under pytest; the bench extra).

OTHER_PYTHON: the interpreter of a virtual environment with the other build of
pinsight-python (git archive BASE | tar -x -C DIR; build it there as the README says).
Time added over untraced by each build, per workload and payload; min of N rounds, and
the median over rounds of each round's own ratio (steadier where the machine's speed drifts).
--cpu: the traced process's CPU time (time.process_time) instead of wall time, steadier
on a machine other work loads (the LTTng consumer's share is then left out, as in both).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (
    GID,
    RUNNER,
    SETUP,
    WORKLOADS,
    in_group,
    load_average,
    names_among,
    paired_ratio,
)
from bench_suite import SUITES, suite_code

PAYLOADS = ("full", "compact")
# bench_suite.py's suites by workload name ("suite": the CPython one, as before).
SUITE_NAMES = {"suite": "cpython", **{name: name for name in SUITES}}


def run(python: str, workload: str, config: str, clock: str, workdir: Path) -> float:
    if workload in SUITE_NAMES:
        code = suite_code(SUITE_NAMES[workload], None, config, clock, workdir)
    else:
        code = RUNNER.format(provider="", workload=WORKLOADS[workload], clock=clock,
                             setup=SETUP[config], is_pinsight=config != "untraced", whole=False)
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True,
                          preexec_fn=in_group)
    # RUNNER prints "bench-result SECONDS EVENTS" (after anything the setup printed).
    result = [line for line in proc.stdout.splitlines() if line.startswith("bench-result ")]
    return float(result[-1].split()[1])


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", help="the other build's interpreter")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workloads", default="fib,native")
    parser.add_argument("--payloads", default=",".join(PAYLOADS),
                        help="any of full, compact, batched, batched-function")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the traced thread's CPU time, not wall time (loaded machines)")
    args = parser.parse_args()
    names_among(parser, args.payloads, ("full", "compact", "batched", "batched-function"),
                "payload")
    names_among(parser, args.workloads, [*WORKLOADS, *SUITE_NAMES], "workload")
    return args


def main() -> int:
    args = parse_arguments()
    payloads = args.payloads.split(",")
    workloads = args.workloads.split(",")
    clock = "thread_time" if args.cpu_time else "perf_counter"
    from pinsight_python.recording import lttng

    builds = {"this": sys.executable, "other": args.other}
    runs: Dict[Tuple[str, str, str], List[float]] = collections.defaultdict(list)
    print(f"load average before: {load_average()}; timing {clock}")
    with tempfile.TemporaryDirectory() as tmpdir:
        workdir = Path(tmpdir) / "suite"
        workdir.mkdir()
        for workload in [w for w in workloads if w in SUITE_NAMES]:
            for python in builds.values():  # warm-up, untimed: the pytest suites' caches
                run(python, workload, "untraced", clock, workdir)
        for round_ in range(args.repeat):
            trace = Path(tmpdir) / f"trace-{round_}"
            with lttng.Session(trace, track_vgid=GID):
                for workload in workloads:
                    for config in ("untraced", *payloads):
                        for name, python in builds.items():
                            runs[(workload, config, name)].append(
                                run(python, workload, config, clock, workdir))
            shutil.rmtree(trace, ignore_errors=True)
    print(f"load average after: {load_average()}\n")
    print_table(runs, workloads, payloads, "CPU ms added" if args.cpu_time else "ms added")
    return 0


def print_table(runs: Dict[Tuple[str, str, str], List[float]], workloads: List[str],
                payloads: List[str], what: str) -> None:
    print(f"| workload | payload | this ({what}) | other ({what}) | this / other "
          "| median of rounds |")
    print("|---|---|---:|---:|---:|---:|")
    for workload in workloads:
        for config in payloads:
            added = {name: min(runs[(workload, config, name)])
                     - min(runs[(workload, "untraced", name)]) for name in ("this", "other")}
            paired = paired_ratio(
                runs[(workload, config, "this")], runs[(workload, config, "other")],
                runs[(workload, "untraced", "this")], runs[(workload, "untraced", "other")])
            median = f"{paired[0]:.3f}" if paired else "-"
            print(f"| {workload} | {config} | {added['this'] * 1e3:.1f} | "
                  f"{added['other'] * 1e3:.1f} | {added['this'] / added['other']:.3f} "
                  f"| {median} |")


if __name__ == "__main__":
    sys.exit(main())
