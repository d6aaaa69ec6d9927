"""What a tracer executes and the cache misses it causes, counted rather than timed:
bench_suite.py's suite run under valgrind's cachegrind, untraced, with trace0 and with
pinsight-python, in the same run.

    .venv/bin/python bench/bench_cache.py [--tests test.test_x,...] [--configs a,b]

On a shared machine, timings of two tracers (or two builds) can differ by more than
what separates them; cachegrind's counts do not move between runs (PYTHONHASHSEED is
fixed): instructions, and the misses of a fixed model of the caches (32 KiB L1
instruction and data caches, 8 MiB last level; a callback's code and the interpreter's
evict each other from the L1 instruction cache). Per event = (configuration - untraced)
/ events emitted (batched-function's for trace0). What it cannot say: time; a record's
non-temporal stores (our staging, x86-64) count as ordinary misses; and every thread is
counted together, the writer threads' work (ours and trace0's) with the traced thread's.
Needs valgrind (apt-get install valgrind). About two minutes per configuration.

Where the counts fall (which functions: ours, the interpreter's, trace0's): --keep DIR,
then `cg_annotate --show=Ir,I1mr,D1mr --sort=I1mr DIR/cachegrind.batched-function`.
Our module's functions have names there only in an unstripped build: install with
`--config-settings=cmake.build-type=RelWithDebInfo` and
`"--config-settings=cmake.define.CMAKE_CXX_FLAGS_RELWITHDEBINFO=-O3 -g -DNDEBUG"`
(pybind11 strips Release builds).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import GID, events_of, in_group, installed, names_among
from bench_suite import CPYTHON_TESTS, OURS, suite_code

CONFIGS = ("untraced", "trace0", "cProfile", "batched-function", "batched")
# cachegrind's model: its default L1 data cache, and a last level fixed so that runs on
# different machines count alike.
CACHES = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"]


def counts(config: str, tests: List[str], tmp: Path,
           keep: Optional[Path]) -> Tuple[Dict[str, int], int]:
    """(cachegrind's totals by event name, the events pinsight-python emitted);
    cachegrind's file stays in `keep` if given."""
    # A script rather than -c: cg_annotate cannot read a command line of many lines.
    script = tmp / f"suite_{config.replace('-', '_')}.py"
    script.write_text(suite_code("cpython", tests, config, "perf_counter", tmp))
    out = (keep or tmp) / f"cachegrind.{config}"
    proc = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHES,
         f"--cachegrind-out-file={out}", sys.executable, str(script)],
        capture_output=True, text=True, check=False, preexec_fn=in_group,
        env=dict(os.environ, PYTHONHASHSEED="0"),
    )
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("bench-result ")]
    if proc.returncode != 0 or not result:
        raise RuntimeError(f"{config} under cachegrind failed:\n{proc.stderr[-3000:]}")
    names: List[str] = []
    totals: List[int] = []
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("summary:"):
            totals = [int(v) for v in line.split()[1:]]
    if not names or len(names) != len(totals):
        raise RuntimeError(f"{out}: no events or summary line")
    return dict(zip(names, totals)), int(result[-1].split()[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", default=CPYTHON_TESTS)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep cachegrind's files there (cachegrind.CONFIG), for cg_annotate")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        parser.error("valgrind is not installed (apt-get install valgrind)")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    wanted = set(names_among(parser, args.configs, CONFIGS, "configuration"))
    # untraced is every figure's base; the event counts come from ours.
    wanted |= {"untraced", "batched-function"} | {events_of(c) for c in wanted}
    configs = installed([c for c in CONFIGS if c in wanted])
    from pinsight_python.recording import lttng

    measured: Dict[str, Dict[str, int]] = {}
    events: Dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        with lttng.Session(tmp / "trace", track_vgid=GID):
            for config in configs:
                measured[config], n = counts(config, args.tests.split(","), tmp, args.keep)
                if config in OURS:
                    events[config] = n
                print(f"{config}: {measured[config]['Ir']:,} instructions", flush=True)
    print_table(configs, measured, events)
    return 0


def print_table(configs: List[str], measured: Dict[str, Dict[str, int]],
                events: Dict[str, int]) -> None:
    base = measured["untraced"]
    shown = configs[1:]

    def per_event(c: str, *names: str) -> float:
        return sum(measured[c][k] - base[k] for k in names) / events[events_of(c)]

    print(f"\n{events['batched-function']:,} function events"
          + (f", {events['batched']:,} default events" if "batched" in events else "")
          + f"; untraced: {base['Ir']:,} instructions\n")
    print(f"| per event, over untraced | {' | '.join(shown)} |")
    print(f"|---|{'---:|' * len(shown)}")
    rows = (("instructions", ("Ir",)), ("L1 instruction misses", ("I1mr",)),
            ("L1 data misses", ("D1mr", "D1mw")),
            ("last-level data misses", ("DLmr", "DLmw")))
    for label, names in rows:
        print(f"| {label} | " + " | ".join(f"{per_event(c, *names):.2f}" for c in shown) + " |")
    if "trace0" in measured:
        for label, names in rows:
            ratio = per_event("batched-function", *names) / per_event("trace0", *names)
            print(f"batched-function / trace0, {label}: {ratio:.2f}")
    if "cProfile" in measured and "batched" in measured:
        ratio = per_event("batched", "Ir") / per_event("cProfile", "Ir")
        print(f"batched / cProfile, instructions: {ratio:.2f}")


if __name__ == "__main__":
    sys.exit(main())
