"""What pinsight-python's start-up shim costs an interpreter that does not trace,
and (--trace) what ``pinsight-python trace`` adds to a program that does nothing.

    python bench/bench_startup.py [--runs N] [--check]
    python bench/bench_startup.py --trace [--runs N] [--check]

Builds throwaway virtual environments from the same base interpreter: one
empty, one holding the installed pinsight_python package and its
pinsight_python.pth (symbolic links to the installed files), and two references
without the package: an empty .pth file, and a .pth whose one line is the
cheapest possible hook (what CPython charges any package that starts this way). Then times
``python -c pass`` in each, interleaved so that drift in the machine's load hits
both alike, and prints the means and their difference with a 95% confidence
interval. For reference, it also times a start-up that asks for tracing
(PINSIGHT_TRACE_PYTHON=TRACING: the package is imported and activates; no LTTng
session is needed, events then go nowhere).

The budget (issue #4): the shim must keep a start-up that asks for nothing within
2 ms of one without the package. --check exits 1 when the shim's cost (with the
package, with and without pinsight_python.pth) has its upper 95% confidence
bound beyond that. With a regular install, the package costs nothing else; an
editable install adds its build backend's own finder hook, reported apart.

--trace (issue 36: trace's fixed cost) times, interleaved, a program that does
nothing run alone and under ``pinsight-python trace --no-summary -o DIR --`` (the
entry point beside this interpreter): ``true``, which is all trace's own cost (its
start, the LTTng session's set-up and tear-down, the keeper), and ``python -c
pass`` with this interpreter, which adds what tracing a Python process costs: its
activation, LTTng-UST's registration (the per-user buffers are allocated when the
first process registers, zeroed page by page: about 100 ms for trace's default 128
MiB on 2 CPUs), and the metadata's push when it ends. The budget: trace adds at
most TRACE_BUDGET_MS (100 ms) to ``true``; --check exits 1 beyond it (median).

--trace --beside-machine-lttng (issue 59: LTTng-tools 2.14 removed the consumer daemon's
200 ms metadata poll as a traced process ends) times ``python -c pass`` under two LTTngs
in the same run, interleaved: the one this environment names and the machine's. Run it
under scripts/with-lttng.sh with an interpreter whose glibc is sid's, so that the first
is Debian sid's LTTng 2.16 (a session daemon of its own) and the second Debian 12's 2.13
(root's daemon), the same interpreter for both (``true`` is left out: a program of the
machine's glibc cannot load trace's preloaded descriptor guard against sid's LTTng-UST):

    bash scripts/with-lttng.sh -- .venv-3.14/bin/python bench/bench_startup.py --trace \
        --beside-machine-lttng

It also times the shim's one line itself, run in this process (compiled once, as
site.py runs it): about 1 µs; --check exits 1 beyond LINE_BUDGET_US (20 µs). This
was an assertion of tests/core/test_activation.py, which a loaded machine could
break; no test asserts a timing.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import timeit
import venv
from pathlib import Path
from typing import Dict, List, Optional, Sequence

BUDGET_MS = 2.0
# The cheapest possible .pth hook: the floor for any package starting this way.
TRIVIAL_LINE = 'import os; os.environ.get("PINSIGHT_PYTHON")'
LINE_BUDGET_US = 20.0  # the .pth line alone, in process
TRACE_BUDGET_MS = 100.0  # what trace adds to `true` (issue 36)


def activation_variables() -> List[str]:
    """Every variable that steers tracing: settings.py's ENV_* names, and PYTHONSTARTUP."""
    from pinsight_python.activation import settings

    names = [v for k, v in vars(settings).items() if k.startswith("ENV_") and isinstance(v, str)]
    return [*names, "PYTHONSTARTUP"]


def line_cost_us(pth: Path, quiet: Dict[str, str]) -> float:
    """Microseconds per run of the .pth's line, in this process, nothing asked (best
    of 5 repeats of 2000)."""
    code = compile(pth.read_text(), str(pth), "exec")
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(quiet)
    try:
        return min(timeit.repeat(lambda: exec(code, {}), number=2000, repeat=5)) / 2000 * 1e6
    finally:
        os.environ.clear()
        os.environ.update(saved)


def installed_files() -> Dict[str, Path]:
    """What the installation put at the root of site-packages: the package (or, for
    an editable install, its compiled part and the editable finder) and the shim."""
    roots = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    site = next((Path(r) for r in roots if (Path(r) / "pinsight_python.pth").is_file()), None)
    if site is None:
        sys.exit(f"bench_startup: pinsight_python.pth is in none of {roots}: install the package")
    return {
        p.name: p
        for p in site.iterdir()
        if p.name.startswith(("pinsight_python", "_editable_skbc_pinsight_python"))
        and not p.name.endswith(".dist-info")
    }


def ask(python: Path, code: str, env: Dict[str, str]) -> str:
    proc = subprocess.run(
        [str(python), "-c", code], env=env or None, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def make_env(root: Path, name: str, links: Dict[str, Path], pth_line: Optional[str] = None) -> Path:
    """A venv without pip; `links` are symlinked into its site-packages; with
    pth_line, a reference.pth holding that line."""
    where = root / name
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    python = where / "bin" / "python"
    site = Path(ask(python, "import sysconfig; print(sysconfig.get_path('purelib'))", {}))
    for entry, target in links.items():
        (site / entry).symlink_to(target)
    if pth_line is not None:
        (site / "reference.pth").write_text(pth_line + "\n")
    return python


def one_start(python: Path, env: Dict[str, str]) -> float:
    """Seconds from spawn to exit of `python -c pass` (no shell, no pipes)."""
    start = time.perf_counter()
    pid = os.posix_spawn(str(python), [str(python), "-c", "pass"], env)
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        sys.exit(f"bench_startup: {python} -c pass failed (wait status {status})")
    return elapsed


def describe(label: str, samples: Sequence[float]) -> str:
    ms = [s * 1e3 for s in samples]
    return (
        f"  {label:<38} {statistics.fmean(ms):7.2f} ms mean"
        f"  (median {statistics.median(ms):.2f}, sd {statistics.stdev(ms):.2f}, n={len(ms)})"
    )


def difference(a: Sequence[float], b: Sequence[float]) -> List[float]:
    """Mean of b minus mean of a, and its 95% confidence bounds (ms; Welch)."""
    ma, mb = statistics.fmean(a) * 1e3, statistics.fmean(b) * 1e3
    se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) * 1e3
    d = mb - ma
    return [d, d - 1.96 * se, d + 1.96 * se]


def one_run(argv: Sequence[str], env: Dict[str, str]) -> float:
    """Seconds from spawn to exit of argv, its output discarded."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench_startup: {' '.join(argv)} failed (exit {proc.returncode}):\n"
                 f"{proc.stderr.decode(errors='replace')}")
    return elapsed


def lttng_environments(quiet: Dict[str, str], beside_machine: bool) -> Dict[str, Dict[str, str]]:
    """The environments trace runs in, by the LTTng each gives it: this one, and with
    beside_machine the machine's (this one without the LTTng prefix scripts/with-lttng.sh
    put in it)."""
    if not beside_machine:
        return {"": quiet}
    if not (os.environ.get("PINSIGHT_LTTNG_PREFIX") and os.environ.get("LTTNG_RUNDIR")):
        sys.exit("bench_startup: --beside-machine-lttng runs under scripts/with-lttng.sh "
                 "(bash scripts/with-lttng.sh -- .venv-3.14/bin/python bench/bench_startup.py "
                 "--trace --beside-machine-lttng)")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.tracing import system_lttng_env

    environments = {}
    for env in (quiet, system_lttng_env(quiet)):
        version = subprocess.run(["lttng-sessiond", "--version"], env=env, capture_output=True,
                                 text=True, check=True).stdout.strip()
        environments[f", LTTng {version}"] = env
    return environments


def trace_samples(entry: Path, programs: Dict[str, List[str]],
                  environments: Dict[str, Dict[str, str]], runs: int,
                  quiet: Dict[str, str]) -> Dict[str, List[float]]:
    """Seconds of each program alone (by its name) and under trace in each environment
    ("trace -- NAME" and the environment's label), interleaved."""
    samples: Dict[str, List[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        def traced(program: Sequence[str], n: int) -> List[str]:
            return [str(entry), "trace", "--no-summary", "-o", f"{tmp}/t{n}", "--", *program]

        n = 0
        for i in range(runs + 3):  # the first 3: page cache, pyc files, the session daemon
            for name, program in programs.items():
                alone = one_run(program, quiet)
                if i >= 3:
                    samples.setdefault(name, []).append(alone)
                for lttng, env in environments.items():
                    n += 1
                    under = one_run(traced(program, n), env)
                    shutil.rmtree(f"{tmp}/t{n}", ignore_errors=True)
                    if i >= 3:
                        samples.setdefault(f"trace -- {name}{lttng}", []).append(under)
    return samples


def trace_cost(runs: int, beside_machine: bool = False) -> float:
    """Prints what trace adds to a program that does nothing (with beside_machine, to
    `python -c pass` under this environment's LTTng and the machine's); returns the
    median added to `true` (ms; 0 beside the machine's LTTng)."""
    entry = Path(sys.executable).parent / "pinsight-python"
    if not entry.is_file():
        sys.exit(f"bench_startup: {entry} not found: install the package into this environment")
    quiet = {k: v for k, v in os.environ.items() if k not in activation_variables()}
    if quiet.get("PYTHONDONTWRITEBYTECODE"):
        print("  note: PYTHONDONTWRITEBYTECODE is set: an edited module is compiled at "
              "every start (unset it for figures users see)")
    environments = lttng_environments(quiet, beside_machine)
    programs = {"python -c pass": [sys.executable, "-c", "pass"]}
    if not beside_machine:
        # Not beside another LTTng: a program of the machine's glibc (true) cannot load
        # trace's preloaded descriptor guard against sid's LTTng-UST.
        programs = {"true": [shutil.which("true") or "/bin/true"], **programs}
    samples = trace_samples(entry, programs, environments, runs, quiet)
    print(f"pinsight-python trace --no-summary -o DIR -- PROGRAM, {runs} interleaved runs, "
          f"CPython {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}")
    added: Dict[str, float] = {}
    for name in programs:
        alone = samples[name]
        print(describe(f"{name}:", alone))
        for lttng in environments:
            under = samples[f"trace -- {name}{lttng}"]
            print(describe(f"trace -- {name}{lttng}:", under))
            added[name + lttng] = (statistics.median(under) - statistics.median(alone)) * 1e3
            d, low, high = difference(alone, under)
            print(f"  {'added (median):':<38} {added[name + lttng]:+7.1f} ms  (mean {d:+.1f}, "
                  f"95% CI {low:+.1f} .. {high:+.1f} ms)")
    if beside_machine:
        return 0.0  # no budget on what LTTng itself costs a Python program
    verdict = "within budget" if added["true"] <= TRACE_BUDGET_MS else "OVER BUDGET"
    print(f"  trace's own fixed cost (true): {added['true']:+.1f} ms: {verdict} "
          f"({TRACE_BUDGET_MS:.0f} ms)")
    return added["true"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=None,
                        help="starts per case (default 300; with --trace, 20)")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 beyond {BUDGET_MS} ms (--trace: {TRACE_BUDGET_MS} ms)")
    parser.add_argument("--trace", action="store_true",
                        help="what pinsight-python trace adds to a program that does nothing")
    parser.add_argument("--beside-machine-lttng", action="store_true",
                        help="with --trace, under scripts/with-lttng.sh: under that LTTng "
                        "(Debian sid's 2.16) and the machine's (2.13), in one run")
    args = parser.parse_args(argv)
    if args.trace:
        added = trace_cost(args.runs or 20, args.beside_machine_lttng)
        return 1 if args.check and added > TRACE_BUDGET_MS else 0
    args.runs = args.runs or 300

    variables = activation_variables()
    quiet = {k: v for k, v in os.environ.items() if k not in variables}
    asking = dict(quiet, PINSIGHT_TRACE_PYTHON="TRACING")
    installed = installed_files()
    editable = any(name.startswith("_editable") for name in installed)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        root = Path(tmp)
        with_pkg = make_env(root, "with", installed)
        # The shim must be live in "with": asking for tracing there activates.
        if ask(with_pkg, "import sys; print('pinsight_python' in sys.modules)", asking) != "True":
            sys.exit("bench_startup: the shim did not run in the test environment")
        no_shim = {k: v for k, v in installed.items() if k != "pinsight_python.pth"}
        cases = {
            "without": make_env(root, "without", {}),
            "no_shim": make_env(root, "no_shim", no_shim),
            "empty_pth": make_env(root, "empty_pth", {}, pth_line=""),
            "trivial_line": make_env(root, "trivial_line", {}, pth_line=TRIVIAL_LINE),
            "with": with_pkg,
        }
        samples: Dict[str, List[float]] = {name: [] for name in cases}
        for _ in range(10):  # warm the page cache and the pyc files
            for python in cases.values():
                one_start(python, quiet)
        for i in range(args.runs):
            # Rotated, so that no case always runs first.
            order = list(cases.items())
            order = order[i % len(order) :] + order[: i % len(order)]
            for name, python in order:
                samples[name].append(one_start(python, quiet))
        traced = [one_start(with_pkg, asking) for _ in range(max(20, args.runs // 10))]

    def compare(label: str, base: str) -> float:
        d, low, high = difference(samples[base], samples["with"])
        print(f"  {label:<38} {d:+7.2f} ms  (95% CI {low:+.2f} .. {high:+.2f} ms)")
        return high

    print(
        f"python -c pass, {args.runs} interleaved starts per case, "
        f"CPython {sys.version.split()[0]} ({sys.base_prefix})"
        + (", editable install" if editable else "")
    )
    print(describe("without pinsight-python:", samples["without"]))
    print(describe("with pinsight-python, nothing asked:", samples["with"]))
    compare("difference:", "without")
    print(describe("the package without its .pth shim:", samples["no_shim"]))
    high = compare("the shim's own cost:", "no_shim")
    if editable:
        print("  (an editable install's own finder hook, scikit-build-core's .pth, costs the rest)")
    # What CPython charges any .pth hook, for comparison: a .pth file at all (3.13's
    # site decodes them as utf-8-sig, importing a codec; environments with another
    # .pth, e.g. setuptools' or an editable install's, have paid that already), and
    # any "import" line in it (the line is compiled and run).
    print("  references, no package:")
    print(describe("an empty .pth:", samples["empty_pth"]))
    compare("  pinsight-python minus this:", "empty_pth")
    print(describe("the cheapest .pth hook line:", samples["trivial_line"]))
    compare("  pinsight-python minus this:", "trivial_line")
    print(describe("with PINSIGHT_TRACE_PYTHON=TRACING:", traced) + "  (for reference)")
    verdict = "within budget" if high <= BUDGET_MS else "OVER BUDGET"
    print(f"  the shim's cost, upper 95% bound {high:+.2f} ms: {verdict} ({BUDGET_MS:.0f} ms)")
    line_us = line_cost_us(installed["pinsight_python.pth"], quiet)
    line_verdict = "within budget" if line_us <= LINE_BUDGET_US else "OVER BUDGET"
    print(f"  the .pth line alone, in process:      {line_us:7.2f} µs per run: {line_verdict}"
          f" ({LINE_BUDGET_US:.0f} µs)")
    over = high > BUDGET_MS or line_us > LINE_BUDGET_US
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
