"""Support for the tests that run CPython's own test suites traced
(tests/core/test_cpython_suites_in_one_process.py, tests/integration/test_cpython_suites.py):
the suites, what is left out (TWO_TOOL_FAILURES, each set with its reason) and how a run
is made and read. What the tests check is said in tests/integration/test_cpython_suites.py.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, FrozenSet, Optional, Set, Tuple

from tests.tracing import clean_env

SUITES = (
    "test_pdb",
    "test_bdb",
    "test_profile",
    # 3.15 moved cProfile's tests (profiling.tracing) into test_profiling, beside
    # those of its new sampling profiler (profiling.sampling).
    "test_profiling" if sys.version_info >= (3, 15) else "test_cprofile",
    "test_sys_setprofile",
    "test_sys_settrace",
    "test_threading",
    "test_signal",
    "test_gc",
    "test_weakref",
    "test_inspect",
    "test_traceback",
    "test_asyncio.test_tasks",
)
JOBS = 2  # CI's cores
FILE_TIMEOUT = 300  # regrtest's per-file timeout: a hung file fails, with its traceback
RUN_TIMEOUT = 900
SHIM = {"PINSIGHT_TRACE_PYTHON": "TRACING"}

# CPython 3.12+ with two sys.monitoring tools: a profiler installed by
# sys.setprofile receives a c_return for the sys.setprofile call itself when
# another tool monitors CALL there, and profile.py fails with AssertionError "Bad
# return" (the do-nothing probe of tests/two_tools_probe shows it). The tracer
# monitors CALL per code object and leaves code that names setprofile alone, so
# test_profile, test_cprofile and test_sys_setprofile pass traced. (pdb.set_trace()
# stopped one line late too, with any second tool monitoring function events: the
# tracer steps aside while a bdb debugger traces, so test_pdb and test_bdb pass.)
# CPython 3.11, setprofile backend: a thread has one profile function, ours;
# sys.setprofile(profiler) replaces it during the call, and CPython then
# reports that call's c_return to the new profiler ("Bad return" again; which
# of these tests it hits varies from run to run): profile.py's own tests
# (ProfileTest: test_profile, and test_cprofile imports it).
_PROFILE_BAD_RETURN = (
    "test_calling_conventions test_cprofile test_output_file_when_changing_directory "
    "test_run test_run_profile_as_module test_run_with_sort_by_values test_runctx"
).split()
# CPython 3.15 with any second sys.monitoring tool (tests/two_tools_probe too): the
# interpreter dies of SIGSEGV in its instrumentation, on invalid bytecode, and when an
# allocation fails while it builds a callback's arguments. The two memory tests'
# children run with -I, which ignores the probe's PYTHONPATH: a do-nothing PY_UNWIND
# callback registered in the child's own code crashes them the same way
# (support.inject_memory_error(0, 12); class C: pass; C()  ->  SIGSEGV, not exit 1).
_TWO_TOOLS_315 = frozenset(
    [
        "test.test_code.CodeTest.test_invalid_bytecode",
        "test.test_exceptions.ExceptionTests.test_exec_set_nomemory_hang",
        "test.test_exceptions.ExceptionTests.test_memory_error_in_PyErr_PrintEx",
        # Not a crash: the sampling profiler misplaces a generator's frame beside the
        # do-nothing probe too.
        "test.test_profiling.test_sampling_profiler.test_blocking."
        "TestBlockingModeStackAccuracy.test_generator_not_under_consumer_arithmetic",
    ]
)
# CPython 3.15's sampling profiler with all_threads fails every sample ("Failed to
# parse initial frame in chain") on a process with a thread state that has no Python
# frames: one an embedding C thread keeps (ctypes' PyThreadState_New reproduces it
# without us), as our control thread does (src/activation/control_thread.cpp).
_FRAMELESS_STATE_315 = frozenset(
    f"test.test_profiling.test_sampling_profiler.test_modes.{name}"
    for name in (
        "TestCpuModeFiltering.test_cpu_mode_integration_filtering",
        "TestExceptionModeFiltering.test_exception_mode_integration_filtering",
        "TestGilModeFiltering.test_gil_mode_integration_behavior",
    )
)
_TRACEMALLOC_OFFSET = frozenset(
    ["test.test_tracemalloc.TestTracemallocEnabled.test_get_traced_memory"]
)
TWO_TOOL_FAILURES: Dict[Tuple[Tuple[int, int], str], FrozenSet[str]] = {
    # With any tool monitoring CALL, CPython allocates the instruction offset it
    # passes to the callback (an int above 256): tracemalloc's peak after
    # clear_traces() is 32, not 0 (tests/two_tools_probe reproduces it).
    ((3, 13), "sys.monitoring"): _TRACEMALLOC_OFFSET,
    ((3, 14), "sys.monitoring"): _TRACEMALLOC_OFFSET,
    ((3, 15), "sys.monitoring"): _TWO_TOOLS_315 | _FRAMELESS_STATE_315 | _TRACEMALLOC_OFFSET,
    ((3, 11), "setprofile"): frozenset(
        [f"test.test_profile.ProfileTest.{name}" for name in _PROFILE_BAD_RETURN]
        # Fails with any profile function in place (sys.setprofile(lambda *a: None) too):
        # the profile call makes the frame object the test wants the trace call to make.
        + ["test.test_frame.TestIncompleteFrameAreInvisible.test_sneaky_frame_object"]
    ),
}


@dataclass
class SuiteRun:
    returncode: int
    output: str
    failed_tests: Set[str]  # test ids (junit)
    failed_files: Set[str]  # regrtest's per-file verdicts: hangs and crashes too
    tests_run: int


def _failed_files(output: str) -> Set[str]:
    failed: Set[str] = set()
    for line in output.splitlines():
        # "0:00:06 load avg: 1.2 [ 2/13/1] test_profile failed (7 failures)"
        if "] test_" not in line:
            continue
        verdict = line.split("] ", 1)[1].split(" -- ", 1)[0]
        name, _, rest = verdict.partition(" ")
        if not rest.startswith(("passed", "skipped", "ran no tests")):  # all left out
            failed.add(name)
    return failed


def run_suites(
    out: Path,
    environ: Dict[str, str],
    ignore: FrozenSet[str],
    preexec_fn: Optional[Callable[[], None]] = None,
    suites: Tuple[str, ...] = SUITES,
    jobs: int = JOBS,
    match: Tuple[str, ...] = (),
) -> SuiteRun:
    out.mkdir(parents=True)
    junit = out / "junit.xml"
    command = [sys.executable, "-m", "test", f"--timeout={FILE_TIMEOUT}"]
    if jobs > 1:
        command.append(f"-j{jobs}")
    for pattern in match:  # regrtest's -m: only the tests whose names match
        command += ["-m", pattern]
    command += ["--junit-xml", str(junit)]
    if ignore:
        ignore_file = out / "ignore.txt"
        ignore_file.write_text("".join(f"{name}\n" for name in sorted(ignore)))
        command += ["--ignorefile", str(ignore_file)]
    env = clean_env(**environ)
    proc = subprocess.Popen(
        [*command, *suites],
        cwd=out,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # one process group: the workers go with it on a timeout
        preexec_fn=preexec_fn,  # noqa: PLW1509 (joins the session's tracked group)
    )
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        hung = f"python -m test hung for {RUN_TIMEOUT} s:\n{output[-5000:]}"
        raise AssertionError(hung) from None
    failed: Set[str] = set()
    run = 0
    if junit.exists():
        for case in ET.parse(junit).iter("testcase"):
            run += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed.add(case.get("name", "?"))
    return SuiteRun(proc.returncode, output, failed, _failed_files(output), run)


def side_by_side(
    untraced: Callable[[], SuiteRun], traced: Callable[[], SuiteRun]
) -> Tuple[SuiteRun, SuiteRun]:
    """Both runs at once, for one-process runs (each keeps one core busy): the
    untraced one in a thread while the traced one runs here, inside its session."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        baseline = pool.submit(untraced)
        result = traced()
        return baseline.result(), result


def summary(run: SuiteRun) -> str:
    lines = [line for line in run.output.splitlines() if "] test_" in line or "Total" in line]
    lines.append(f"exit status {run.returncode}, {run.tests_run} tests in the JUnit report")
    return "\n".join(lines)
