"""Cost per event on a real test suite: part of CPython's own (fractions, difflib,
textwrap, ipaddress, pprint, argparse, configparser, enum, dataclasses, typing; about
4,500 tests of pure-Python code whose events do not depend on timing, unlike
test_email's or test_json's), against baselines measured in the same run.

    .venv/bin/python bench/bench_suite.py [--repeat N] [--tests test.test_x,...]

Configurations, interleaved (every one once per round, every other round backwards, each
started once LTTng's consumer daemons are idle; the minimum is kept):
untraced, cProfile, VizTracer and trace0 (the bench extra, if installed), and
pinsight-python in TRACING with the full, compact and batched payloads and batched with
function events only (batched-function: trace0's events; batched-function-inline: the
same without the writer thread), inside one LTTng session
with `trace`'s defaults (as bench_core.py). The suite is loaded (its modules imported)
before tracing starts; only running it is timed. ns per event = time added over
untraced / events emitted (batched-function's for trace0). `--configs a,b` times only
those (untraced and what the ratios need are always in). `--cpu-time`: the traced
thread's CPU time; `--total-cpu`: all the CPU a tool costs, as in bench_core.py.
Then, for each target (batched against cProfile, batched-function against trace0), the
median over rounds of the round's own ratio of added times: steadier than the minima's
ratio where the machine's speed drifts between rounds, as a shared VM's does.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (
    FUNCTION_ONLY,
    GID,
    SETUP,
    TARGET_PAIRS,
    consumer_cpu_seconds,
    installed,
    load_average,
    print_paired,
    round_order,
    run_code,
    settle,
)

TESTS = ("test.test_fractions,test.test_difflib,test.test_textwrap,test.test_ipaddress,"
         "test.test_pprint,test.test_argparse,test.test_configparser,test.test_enum,"
         "test.test_dataclasses,test.test_typing")
CONFIGS = ("untraced", "cProfile", "viztracer", "trace0", "full", "compact", "batched",
           "batched-function", "batched-function-inline")
OURS = ("full", "compact", "batched", "batched-function", "batched-function-inline")

RUNNER = """
import io, time, unittest
CLOCK = time.{clock}
suite = unittest.defaultTestLoader.loadTestsFromNames({tests!r})
runner = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0)
start = stop = lambda: None
{setup}
events0 = 0
WHOLE = {whole}  # --total-cpu: start() and stop() are timed too
if WHOLE:
    t0 = CLOCK()
start()
if {is_pinsight}:
    import pinsight_python; events0 = pinsight_python.status()["events_emitted"]
if not WHOLE:
    t0 = CLOCK()
result = runner.run(suite)
if not WHOLE:
    t1 = CLOCK()
events = 0
if {is_pinsight}:
    events = pinsight_python.status()["events_emitted"] - events0
stop()
if WHOLE:
    t1 = CLOCK()
assert result.testsRun > 100, result.testsRun
print("bench-result", t1 - t0, events)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the minimum is kept")
    parser.add_argument("--tests", default=TESTS)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the traced thread's CPU time, not wall time (loaded machines)")
    parser.add_argument("--total-cpu", action="store_true",
                        help="time all the CPU a tool costs: every thread of the process from"
                        " the tool's start to its stop, and LTTng's consumer daemons meanwhile")
    args = parser.parse_args()
    if args.cpu_time and args.total_cpu:
        parser.error("--cpu-time and --total-cpu are exclusive")
    clock = ("thread_time" if args.cpu_time else "process_time" if args.total_cpu
             else "perf_counter")
    wanted = set(args.configs.split(","))
    unknown = wanted - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(sorted(unknown))}; expected some of "
                     f"{', '.join(CONFIGS)}")
    wanted |= {"untraced", "batched", "batched-function"}
    configs = installed([c for c in CONFIGS if c in wanted])
    from pinsight_python.recording import lttng

    tests = args.tests.split(",")
    print(f"load average before: {load_average()}; timing {clock}")
    runs: Dict[str, List[float]] = collections.defaultdict(list)
    events: Dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for round_ in range(args.repeat):
            trace = tmp / f"trace-{round_}"
            with lttng.Session(trace, track_vgid=GID):
                for config in round_order(configs, round_):
                    settle()
                    code = RUNNER.format(clock=clock, tests=tests, setup=SETUP[config],
                                         is_pinsight=config in OURS, whole=args.total_cpu)
                    consumed = consumer_cpu_seconds()
                    seconds, n = run_code(code, tmp)
                    if args.total_cpu:
                        seconds += consumer_cpu_seconds() - consumed
                    runs[config].append(seconds)
                    if config in OURS:
                        events[config] = n
            shutil.rmtree(trace, ignore_errors=True)
    print(f"load average after: {load_average()}")
    best = {c: min(v) for c, v in runs.items()}
    print_table(configs, best, events, args.repeat, clock)
    print_paired(f"time added over untraced, ours / theirs, median of the {args.repeat} rounds'"
                 " ratios (each round's own untraced)", TARGET_PAIRS, runs)
    return 0


def print_table(configs: List[str], best: Dict[str, float], events: Dict[str, int],
                repeat: int, clock: str) -> None:
    n = events["batched"]
    base = best["untraced"]
    print(f"\n{n:,} events (batched's count; batched-function {events['batched-function']:,});"
          f" untraced {base:.2f} s; min of {repeat} interleaved rounds\n")
    shown = configs[1:]

    def count(c: str) -> int:
        return events.get(c, events["batched-function"] if c in FUNCTION_ONLY else n)

    print(f"| | {' | '.join(shown)} |")
    print(f"|---|{'---:|' * len(shown)}")
    print("| time / untraced | " + " | ".join(f"{best[c] / base:.2f}x" for c in shown) + " |")
    per: List[Tuple[str, float]] = [(c, (best[c] - base) / count(c) * 1e9) for c in shown]
    print("| ns per event | " + " | ".join(f"{v:.1f}" for _, v in per) + " |")
    for ours, theirs in (("batched", "cProfile"), ("batched-function", "trace0"),
                         ("batched-function-inline", "trace0")):
        if theirs in best and ours in best:
            ratio = best[ours] / best[theirs]  # the ratios of time / untraced
            print(f"{ours} / {theirs} (time over untraced, {clock}): {ratio:.2f}"
                  " (target <= 1.00)")


if __name__ == "__main__":
    sys.exit(main())
