"""Cost per event on a real test suite against baselines measured in the same run.

    .venv/bin/python bench/bench_suite.py [--suite cpython|networkx|sympy] [--repeat N]

Suites (`--tests` replaces a suite's default tests):
- cpython (the default): part of CPython's own (fractions, difflib, textwrap, ipaddress,
  pprint, argparse, configparser, enum, dataclasses, typing; about 4,500 tests of
  pure-Python code whose events do not depend on timing, unlike test_email's or
  test_json's), run by unittest; its modules are loaded before tracing starts and only
  running it is timed.
- networkx: networkx's shortest-path tests (networkx.algorithms.shortest_paths), and
- sympy: sympy's core tests test_basic, test_symbol and test_relational: the issue's graph
  and symbolic-math suites, run by pytest (`pytest.main` in the timed process, from a
  folder of its own with an empty configuration); collection is timed too, as a whole
  run under a tracer pays it, with the rewritten test modules cached by an untimed
  first run (as a suite's repeated runs cache them, PYTHONDONTWRITEBYTECODE aside).
  They need the bench extra (networkx, sympy, hypothesis, pytest).

Configurations, interleaved (every one once per round, every other round backwards, each
started once LTTng's consumer daemons are idle; the minimum is kept):
untraced, cProfile, VizTracer and trace0 (the bench extra, if installed), and
pinsight-python in TRACING with the full, compact and batched payloads, batched with each
function's first 100 executions per thread only (batched-capped: `max_num_traces = 100`;
its ns per event are over its own events), and batched with
function events only (batched-function: trace0's events; batched-function-inline: the
same without the writer thread), inside one LTTng session
with `trace`'s defaults (as bench_core.py). ns per event = time added over
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
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (
    FUNCTION_ONLY,
    GID,
    SETUP,
    TARGET_PAIRS,
    consumer_cpu_seconds,
    installed,
    load_average,
    names_among,
    print_paired,
    round_order,
    run_code,
    settle,
)

CPYTHON_TESTS = ("test.test_fractions,test.test_difflib,test.test_textwrap,test.test_ipaddress,"
                 "test.test_pprint,test.test_argparse,test.test_configparser,test.test_enum,"
                 "test.test_dataclasses,test.test_typing")
CONFIGS = ("untraced", "cProfile", "viztracer", "trace0", "full", "compact", "batched",
           "batched-capped", "batched-function", "batched-function-inline")
OURS = ("full", "compact", "batched", "batched-capped", "batched-function",
        "batched-function-inline")
# The batched payload with every function's first 100 executions per thread traced
# (docs/configuration.md, rate control): a long suite's shape at a fraction of the events.
CAPPED = """
import os, pinsight_python, shutil, tempfile
_dir = tempfile.mkdtemp()
_config = os.path.join(_dir, "capped.txt")
open(_config, "w").write("[Lexgion.default]\\n    max_num_traces = 100\\n")
start = lambda: pinsight_python.activate(payload="batched", config=_config)
def stop():
    pinsight_python.deactivate(); shutil.rmtree(_dir, ignore_errors=True)
"""
SUITE_SETUP = {**SETUP, "batched-capped": CAPPED}

# How each suite is loaded (before tracing starts), run (timed) and checked.
UNITTEST = {
    "load": """
import io, unittest
suite = unittest.defaultTestLoader.loadTestsFromNames({tests!r})
runner = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0)
""",
    "run": "result = runner.run(suite)",
    "check": "assert result.testsRun > 100, result.testsRun",
}
# pytest from a folder of its own with an empty configuration: the caller's
# pytest settings (addopts, plugins' options) and caches stay out.
PYTEST = {
    "load": """
import contextlib, io, os, pytest, sys
# Rewritten test modules cached as a suite's own runs cache them (the warm-up
# run writes them), whatever PYTHONDONTWRITEBYTECODE says.
sys.dont_write_bytecode = False
os.chdir({workdir!r})
open("pytest.ini", "w").write("[pytest]\\n")
_args = ["-q", "-p", "no:cacheprovider", "-c", "pytest.ini", "--pyargs", *{tests!r}]
""",
    "run": """
with contextlib.redirect_stdout(io.StringIO()) as _out:
    _exit = pytest.main(_args)
""",
    "check": "assert _exit == 0, _out.getvalue()[-4000:]",
}
# A suite: how it runs, its default tests, the modules it needs.
SUITES = {
    "cpython": (UNITTEST, CPYTHON_TESTS, ()),
    "networkx": (PYTEST, "networkx.algorithms.shortest_paths", ("pytest", "networkx")),
    "sympy": (PYTEST, "sympy.core.tests.test_basic,sympy.core.tests.test_symbol,"
                      "sympy.core.tests.test_relational", ("pytest", "sympy", "hypothesis")),
}

RUNNER = """
import time
CLOCK = time.{clock}
{load}
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
{run}
if not WHOLE:
    t1 = CLOCK()
events = 0
if {is_pinsight}:
    events = pinsight_python.status()["events_emitted"] - events0
stop()
if WHOLE:
    t1 = CLOCK()
{check}
print("bench-result", t1 - t0, events)
"""


def suite_code(suite: str, tests: Optional[List[str]], config: str, clock: str, workdir: Path,
               whole: bool = False) -> str:
    """The child's code: `suite` (its own tests unless `tests`) run under `config`,
    timed by time.`clock`; `workdir`: the pytest suites' folder. Prints "bench-result
    SECONDS EVENTS"."""
    kind, default_tests, _ = SUITES[suite]
    tests = tests or default_tests.split(",")
    return RUNNER.format(clock=clock, setup=SUITE_SETUP[config], is_pinsight=config in OURS,
                         whole=whole, load=kind["load"].format(tests=tests, workdir=str(workdir)),
                         run=kind["run"], check=kind["check"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the minimum is kept")
    parser.add_argument("--suite", choices=SUITES, default="cpython",
                        help="the test suite run (default: cpython)")
    parser.add_argument("--tests", help="comma-separated test modules: the suite's own by"
                        " default (unittest names for cpython, pytest --pyargs names else)")
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
    wanted = set(names_among(parser, args.configs, CONFIGS, "configuration"))
    wanted |= {"untraced", "batched", "batched-function"}
    configs = installed([c for c in CONFIGS if c in wanted])
    from pinsight_python.recording import lttng

    tests = args.tests.split(",") if args.tests else None
    missing = [m for m in SUITES[args.suite][2] if importlib.util.find_spec(m) is None]
    if missing:
        parser.error(f"--suite {args.suite} needs {', '.join(missing)}: pip install -e "
                     '".[bench]"')
    print(f"load average before: {load_average()}; suite {args.suite}; timing {clock}")
    runs: Dict[str, List[float]] = collections.defaultdict(list)
    events: Dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        workdir = tmp / "suite"
        workdir.mkdir()

        def runner(config: str) -> str:
            return suite_code(args.suite, tests, config, clock, workdir, args.total_cpu)

        run_code(runner("untraced"), tmp)  # warm-up, untimed: caches filled, failures early
        for round_ in range(args.repeat):
            trace = tmp / f"trace-{round_}"
            with lttng.Session(trace, track_vgid=GID):
                for config in round_order(configs, round_):
                    settle()
                    consumed = consumer_cpu_seconds()
                    seconds, n = run_code(runner(config), tmp)
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
