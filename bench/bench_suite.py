"""Cost per event on a real test suite: part of CPython's own (fractions, difflib,
textwrap, ipaddress, pprint, argparse, configparser, enum, dataclasses, typing; about
4,500 tests of pure-Python code whose events do not depend on timing, unlike
test_email's or test_json's), against baselines measured in the same run.

    .venv/bin/python bench/bench_suite.py [--repeat N] [--tests test.test_x,...]

Configurations, interleaved (every one once per round; the minimum is kept):
untraced, cProfile, VizTracer (if installed), and pinsight-python in TRACING with the
full, compact and batched payloads, inside one LTTng session with `trace`'s defaults
(as bench_core.py). The suite is loaded (its modules imported) before tracing starts;
only running it is timed. ns per event = time added over untraced / events emitted.
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
from bench_core import GID, SETUP, installed, load_average, run_code

TESTS = ("test.test_fractions,test.test_difflib,test.test_textwrap,test.test_ipaddress,"
         "test.test_pprint,test.test_argparse,test.test_configparser,test.test_enum,"
         "test.test_dataclasses,test.test_typing")
CONFIGS = ("untraced", "cProfile", "viztracer", "full", "compact", "batched")
OURS = ("full", "compact", "batched")

RUNNER = """
import io, time, unittest
suite = unittest.defaultTestLoader.loadTestsFromNames({tests!r})
runner = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0)
start = stop = lambda: None
{setup}
events0 = 0
start()
if {is_pinsight}:
    import pinsight_python; events0 = pinsight_python.status()["events_emitted"]
t0 = time.perf_counter()
result = runner.run(suite)
t1 = time.perf_counter()
events = 0
if {is_pinsight}:
    events = pinsight_python.status()["events_emitted"] - events0
stop()
assert result.testsRun > 100, result.testsRun
print(t1 - t0, events)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the minimum is kept")
    parser.add_argument("--tests", default=TESTS)
    args = parser.parse_args()
    configs = installed(CONFIGS)
    from pinsight_python.recording import lttng

    tests = args.tests.split(",")
    print(f"load average before: {load_average()}")
    runs: Dict[str, List[float]] = collections.defaultdict(list)
    events: Dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for round_ in range(args.repeat):
            trace = tmp / f"trace-{round_}"
            with lttng.Session(trace, track_vgid=GID):
                for config in configs:
                    code = RUNNER.format(tests=tests, setup=SETUP[config],
                                         is_pinsight=config in OURS)
                    seconds, n = run_code(code, tmp)
                    runs[config].append(seconds)
                    if config in OURS:
                        events[config] = n
            shutil.rmtree(trace, ignore_errors=True)
    print(f"load average after: {load_average()}")
    best = {c: min(v) for c, v in runs.items()}
    print_table(configs, best, events, args.repeat)
    return 0


def print_table(configs: List[str], best: Dict[str, float], events: Dict[str, int],
                repeat: int) -> None:
    n = events["compact"]
    base = best["untraced"]
    print(f"\n{n:,} events (compact's count; full {events['full']:,}, batched "
          f"{events['batched']:,}); untraced {base:.2f} s; min of {repeat} interleaved rounds\n")
    shown = configs[1:]
    print(f"| | {' | '.join(shown)} |")
    print(f"|---|{'---:|' * len(shown)}")
    print("| time / untraced | " + " | ".join(f"{best[c] / base:.2f}x" for c in shown) + " |")
    per: List[Tuple[str, float]] = [(c, (best[c] - base) / events.get(c, n) * 1e9)
                                    for c in shown]
    print("| ns per event | " + " | ".join(f"{v:.1f}" for _, v in per) + " |")
    ratio = (best["batched"] - base) / (best["cProfile"] - base)
    print(f"\nbatched / cProfile (time added): {ratio:.2f} (target <= 1.00)")


if __name__ == "__main__":
    sys.exit(main())
