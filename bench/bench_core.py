"""Cost per event of pinsight-python against baselines measured in the same run.

    .venv/bin/python bench/bench_core.py [--repeat N]

Workloads: recursive calls (fib), method-heavy object code, many native calls.
Configurations: untraced; cProfile; VizTracer (if installed: pip install viztracer);
an empty C sys.monitoring callback (the floor of any per-call tool); the reference
tracer (bench/reftracer: a C callback writing the same payload to the same
provider, nothing else); pinsight-python in TRACING. The traced ones run inside
one active LTTng session. Prints ns per event (the time added over untraced,
divided by the events pinsight-python emits for the workload) and ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent

WORKLOADS = {
    "fib": """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def workload():
    return fib(25)
""",
    "objects": """
class Vec:
    __slots__ = ("x", "y")
    def __init__(self, x, y):
        self.x = x; self.y = y
    def add(self, o):
        return Vec(self.x + o.x, self.y + o.y)
    def dot(self, o):
        return self.x * o.x + self.y * o.y
    @property
    def norm2(self):
        return self.dot(self)
def workload():
    acc = Vec(0, 0); s = 0
    for i in range(60000):
        acc = acc.add(Vec(i, 1))
        s += acc.norm2 % 7
    return s
""",
    "native": """
import math
def workload():
    out = []
    for i in range(100000):
        out.append(math.sqrt(i))
        len(out)
    return sum(out)
""",
}

SETUP = {
    "untraced": "",
    "cProfile": "import cProfile; _p = cProfile.Profile(); start = _p.enable; stop = _p.disable",
    "viztracer": (
        "from viztracer import VizTracer; _v = VizTracer(tracer_entries=5000000, verbose=0);"
        " start = _v.start; stop = _v.stop"
    ),
    "empty-callback": """
import sys, _reftracer
M = sys.monitoring; E = M.events
M.use_tool_id(4, "empty")
for ev in (E.PY_START, E.PY_RETURN, E.CALL, E.C_RETURN, E.C_RAISE):
    M.register_callback(4, ev, _reftracer.empty)
start = lambda: M.set_events(4, E.PY_START | E.PY_RETURN | E.CALL | E.C_RETURN | E.C_RAISE)
stop = lambda: M.set_events(4, 0)
""",
    "reference": """
import sys, _reftracer
_reftracer.load_provider(PROVIDER)
M = sys.monitoring; E = M.events
M.use_tool_id(4, "reference")
M.register_callback(4, E.PY_START, _reftracer.on_start)
M.register_callback(4, E.PY_RETURN, _reftracer.on_return)
M.register_callback(4, E.CALL, _reftracer.on_call)
M.register_callback(4, E.C_RETURN, _reftracer.on_c_return)
M.register_callback(4, E.C_RAISE, _reftracer.on_c_return)
start = lambda: M.set_events(4, E.PY_START | E.PY_RETURN | E.CALL | E.C_RETURN | E.C_RAISE)
stop = lambda: M.set_events(4, 0)
""",
    "pinsight-python": """
import pinsight_python
start = pinsight_python.activate
stop = pinsight_python.deactivate
""",
}

RUNNER = """
import time, sys
PROVIDER = {provider!r}
{workload}
start = stop = lambda: None
{setup}
workload()  # warm up (caches, specialization)
events0 = 0
start()
if {is_pinsight}:
    import pinsight_python; events0 = pinsight_python.status()["events_emitted"]
t0 = time.perf_counter()
workload()
t1 = time.perf_counter()
events = 0
if {is_pinsight}:
    events = pinsight_python.status()["events_emitted"] - events0
stop()
print(t1 - t0, events)
"""


def build_reftracer(out: Path) -> Path:
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = out / f"_reftracer{suffix}"
    subprocess.run(
        [
            "gcc",
            "-O2",
            "-shared",
            "-fPIC",
            f"-I{include}",
            f"-I{ROOT / 'tracepoints'}",
            str(ROOT / "bench" / "reftracer" / "reftracer.c"),
            "-o",
            str(target),
            "-ldl",
        ],
        check=True,
    )
    return out


def provider_path() -> str:
    from pinsight_python import _pinsight_python

    return str(Path(_pinsight_python.__file__).parent / "libpython_pinsight_lttng_ust.so")


def run_one(workload: str, config: str, tmp: Path) -> Tuple[float, int]:
    code = RUNNER.format(
        provider=provider_path(),
        workload=WORKLOADS[workload],
        setup=SETUP[config],
        is_pinsight=config == "pinsight-python",
    )
    return run_code(code, tmp)


def run_code(code: str, tmp: Path) -> Tuple[float, int]:
    env = dict(os.environ, PYTHONPATH=f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr}")
    seconds, events = proc.stdout.split()
    return float(seconds), int(events)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per cell; the minimum is kept")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    from pinsight_python import lttng

    configs = list(SETUP)
    try:
        import viztracer  # noqa: F401
    except ImportError:
        configs.remove("viztracer")
        print("viztracer is not installed (pip install viztracer): column skipped")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        build_reftracer(tmp)
        results: Dict[str, Dict[str, float]] = {}
        events: Dict[str, int] = {}
        with lttng.Session(tmp / "trace"):
            for workload in args.workloads.split(","):
                results[workload] = {}
                for config in configs:
                    runs: List[Tuple[float, int]] = [
                        run_one(workload, config, tmp) for _ in range(args.repeat)
                    ]
                    results[workload][config] = min(r[0] for r in runs)
                    if config == "pinsight-python":
                        events[workload] = runs[0][1]
        print(
            f"\nns per event = (time - untraced) / events emitted by pinsight-python;"
            f" min of {args.repeat} runs\n"
        )
        header = f"{'workload':10} {'events':>9} " + " ".join(f"{c:>15}" for c in configs[1:])
        print(header)
        for workload, row in results.items():
            n = events[workload]
            base = row["untraced"]
            cells = [f"{(row[c] - base) / n * 1e9:12.1f} ns" for c in configs[1:]]
            print(f"{workload:10} {n:9d} " + " ".join(f"{c:>15}" for c in cells))
        print()
        for workload, row in results.items():
            base = row["untraced"]
            ref = row["reference"] - base
            ours = row["pinsight-python"] - base
            slow = " ".join(f"{c}={row[c] / base:.2f}x" for c in configs[1:])
            print(f"{workload:10} vs untraced: {slow}")
            print(
                f"{'':10} pinsight-python / reference per event: {ours / ref:.3f} (target <= 1.15)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
