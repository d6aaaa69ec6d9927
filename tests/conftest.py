"""The test tiers, one folder each (docs/architecture.md, "Tests"):

tests/unit         the package alone: no lttng on the PATH, no session daemon, no compiler.
tests/core         the tracer end to end in real LTTng sessions, read back with babeltrace2;
                   scripts/test.sh also runs it under AddressSanitizer + UBSan.
tests/integration  end to end with everything around the tracer: the CLI's commands on
                   real traces, the relay daemon, MPI, compilers, PInsight's libpinsight.so,
                   attach (setpriv), Trace Compass's schema.

A run checks the dependencies of the tiers and files it selected first, and a missing
one fails the whole run loudly: it never turns into skips. A unit-only run checks nothing;
a run of a few integration files (scripts/gpu-check.sh on a GPU machine) needs only what
those files use.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sysconfig
from pathlib import Path
from typing import Dict, List, Sequence, Set

import pytest

from pinsight_python.recording import lttng

from .tracing import NATIVE, PINSIGHT_LIB, SYSTEM_PYTHON, Tracer, foreign_sessions

HERE = Path(__file__).resolve().parent
SETUP = "run the README's setup command (scripts/setup.sh)"
# The commands each tier runs.
_E2E_TOOLS = ("lttng", "lttng-sessiond", "babeltrace2")
TIER_TOOLS: Dict[str, Sequence[str]] = {
    "unit": (),
    "core": (*_E2E_TOOLS, "g++"),
    "integration": (*_E2E_TOOLS, "gcc", "g++"),
}
# Tools that only some files of a tier run.
FILE_TOOLS: Dict[str, Sequence[str]] = {
    "test_relayd.py": ("lttng-relayd",),
    "test_coexistence.py": ("clang",),
    "test_mpi.py": ("mpirun",),
    "test_attach.py": ("setpriv",),
    "test_attach_safety.py": ("setpriv",),
}


def tier_of(path: Path) -> str:
    """The tier of a test file: the folder under tests/ it lives in."""
    relative = path.resolve().relative_to(HERE)
    tier = relative.parts[0] if len(relative.parts) > 1 else ""
    if tier not in TIER_TOOLS:
        raise pytest.UsageError(
            f"{path}: a test lives in one of tests/{{{','.join(TIER_TOOLS)}}}/ (tests/conftest.py)"
        )
    return tier


def missing_dependencies(tiers: Set[str], files: Set[str]) -> List[str]:
    tools = {tool for tier in tiers for tool in TIER_TOOLS[tier]}
    tools.update(tool for name in files for tool in FILE_TOOLS.get(name, ()))
    missing = [tool for tool in sorted(tools) if shutil.which(tool) is None]
    if tiers - {"unit"}:
        if not Path(SYSTEM_PYTHON).exists():
            missing.append(f"{SYSTEM_PYTHON} (with python3-bt2)")
    if "integration" in tiers and not PINSIGHT_LIB.is_file():
        missing.append(
            f"{PINSIGHT_LIB} (scripts/setup.sh builds PInsight's libpinsight.so from "
            "../shared/pinsight; PINSIGHT_LIB names another)"
        )
    return missing


# A suite started in the background without job control (`cmd &` in a script)
# inherits SIGINT and SIGQUIT ignored, and so would every program it runs, an
# ignored disposition surviving exec: the tests that press Ctrl-C need them as a
# terminal gives them.
for _name in ("SIGINT", "SIGQUIT"):
    _number = getattr(signal, _name)
    if signal.getsignal(_number) == signal.SIG_IGN:
        signal.signal(_number, signal.default_int_handler if _name == "SIGINT" else signal.SIG_DFL)


# Last: after -k and -m have deselected what will not run.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: List[pytest.Item]
) -> None:
    tiers = {tier_of(Path(str(item.path))) for item in items}
    missing = missing_dependencies(tiers, {Path(str(item.path)).name for item in items})
    if missing:
        end_to_end = ", ".join(f"tests/{tier}" for tier in sorted(tiers - {"unit"}))
        raise pytest.UsageError(
            f"{end_to_end} need{'s' if ',' not in end_to_end else ''} "
            f"{', '.join(missing)}, missing here: {SETUP}; "
            "tests/unit alone needs none of them"
        )
    if tiers - {"unit"}:
        lttng.ensure_sessiond()
        foreign = foreign_sessions()
        if foreign:
            # Not a failure (the session may track others), but the first thing to
            # look at when descriptor or event-count tests fail.
            config.get_terminal_writer().line(
                f"WARNING: LTTng session(s) {', '.join(foreign)} of this user exist besides "
                "the tests': one that records python_pinsight_lttng_ust events without a "
                "process tracker also records every test's traced program (tests that count "
                "descriptors may fail; its trace grows with the suite's events): "
                "lttng destroy them first",
                yellow=True,
            )


@pytest.fixture
def tracer(tmp_path: Path) -> Tracer:
    return Tracer(tmp_path)


@pytest.fixture(scope="session")
def omp_kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Builds omp_kernel for the interpreter running the tests (sys.executable)."""
    gcc = shutil.which("gcc")
    assert gcc is not None, "gcc not found: run scripts/setup.sh"
    include = sysconfig.get_paths()["include"]
    assert (Path(include) / "Python.h").exists(), f"no Python.h in {include}"
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = tmp_path_factory.mktemp("omp_kernel")
    cmd = [
        gcc, "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", "-fopenmp",
        f"-I{include}", f"-I{NATIVE}", str(NATIVE / "omp_kernel.c"),
        "-o", str(out / f"omp_kernel{suffix}"), "-llttng-ust", "-ldl",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"building omp_kernel failed:\n{' '.join(cmd)}\n{proc.stderr}"
    return out
