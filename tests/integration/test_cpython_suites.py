"""CPython's own tests of the tools users run beside us, with every call traced.

Debuggers, profilers, threads, signals, the garbage collector, weak references,
introspection, asyncio tasks: CPython's test suites for them (``python -m test``,
shipped with the interpreter) run with every call traced through the .pth shim
(PINSIGHT_TRACE_PYTHON=TRACING) inside a real LTTng session, and untraced: the one-
process runs side by side, the suites' files that failed traced again alone. The session
is a flight recorder (snapshot mode: a few MiB of ring buffer, nothing written until the
snapshot taken at the end), so millions of events cost neither disk nor a consumer's
CPU. The same tests must fail both ways, and none may hang: regrtest's --timeout fails a
test file that does.

Left out (TWO_TOOL_FAILURES), as docs/activation.md ("Debuggers and
profilers") tells users: on 3.13 to 3.15, tracemalloc's test_get_traced_memory, which
fails with *any* second sys.monitoring tool watching calls, a do-nothing one of a few
lines (tests/two_tools_probe/sitecustomize.py reproduces it without us), and on 3.15
the tests that crash CPython with any such tool; on 3.11, the profile tests that
a profile function already in place makes fail. Each version runs its own Lib/test
(3.14 and 3.15: Debian's libpython3.1x-testsuite, scripts/sid-prefix.sh).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import List

import pytest

from pinsight_python.activation.settings import ENV_EXCLUDE
from tests.cpython_suites import (
    RUN_TIMEOUT,
    SHIM,
    TWO_TOOL_FAILURES,
    run_suites,
    side_by_side,
    summary,
)
from tests.tracing import DEFAULT_BACKEND, isolated, read_trace


@pytest.mark.slow
@pytest.mark.timeout(2 * RUN_TIMEOUT + 120)
def test_cpython_suites_fail_traced_exactly_as_untraced(tmp_path: Path) -> None:
    if importlib.util.find_spec("test.libregrtest") is None:
        pytest.fail(f"{sys.executable} lacks CPython's test package (pyenv's builds ship it)")
    known = TWO_TOOL_FAILURES.get((sys.version_info[:2], DEFAULT_BACKEND), frozenset())
    with isolated(tmp_path / "trace", snapshot=True, subbuf_size="1M", num_subbuf=4) as (
        session,
        run_as,
    ):
        # regrtest's JUnit writer (xml.etree) runs last, in the main process, and its
        # frames alone could fill the ring buffer: left out, so that the snapshot
        # keeps the workers' last minutes too.
        traced = run_suites(tmp_path / "traced", {**SHIM, ENV_EXCLUDE: "xml.etree"}, known,
                            run_as)
        session.record_snapshot()
    assert traced.tests_run > 1000, summary(traced)
    # Untraced, the files that failed traced, and only those (the suites pass here
    # untraced: a full untraced run would cost as much again on every interpreter):
    # each must fail the same tests. A crash or a hang traced fails its whole file,
    # which then passes untraced.
    if traced.failed_files:
        untraced = run_suites(tmp_path / "untraced", {}, known,
                              suites=tuple(sorted(traced.failed_files)))
        report = f"untraced:\n{summary(untraced)}\ntraced:\n{summary(traced)}"
        assert traced.failed_files == untraced.failed_files, report
        assert sorted(traced.failed_tests) == sorted(untraced.failed_tests), report

    # The flight recorder's last minutes: CPython's test package (regrtest and the
    # suites; the JUnit writer's own frames can fill the ring buffer at the very
    # end, so the suites' files need not survive) from many processes (regrtest's
    # workers and the programs the tests start).
    trace = read_trace(tmp_path / "trace")
    begun = trace.named("function_begin")
    assert any("/test/" in (e.file or "") for e in begun), len(trace.events)
    processes: List[int] = sorted({e.ctx["vpid"] for e in trace.events})
    assert len(processes) > 1, processes


@pytest.mark.slow
def test_descriptor_and_gil_state_tests_in_one_process(tmp_path: Path) -> None:
    """Issue 31: subprocess's descriptor tests (close_fds, pass_fds: a traced
    program's children get exactly what they were given) and the C API's GIL-state
    tests (PyGILState_Ensure from a new thread, tracemalloc's deadlock's shape), all
    traced in one process, pass as untraced."""
    suites = ("test_subprocess", "test_capi.test_misc")
    match = ("*fd*", "*gilstate*", "*GILState*")
    # test_pass_fds_redirected's child is a Python program the shim traces too, and
    # lists every descriptor it has up to the limit: those of its own LTTng-UST
    # (opened as it starts tracing, not inherited: all of LTTng-UST's are
    # close-on-exec) are not in the set it expects. The other descriptor tests
    # check that nothing unexpected was inherited, and pass.
    ignore = frozenset({"test.test_subprocess.POSIXProcessTestCase.test_pass_fds_redirected"})
    with isolated(tmp_path / "trace", snapshot=True, subbuf_size="1M", num_subbuf=4) as (
        session,
        run_as,
    ):
        untraced, traced = side_by_side(
            lambda: run_suites(tmp_path / "untraced", {}, ignore, suites=suites, jobs=1,
                               match=match),
            lambda: run_suites(tmp_path / "traced", SHIM, ignore, run_as, suites=suites,
                               jobs=1, match=match),
        )
        session.record_snapshot()
    assert untraced.tests_run > 20, summary(untraced)
    report = f"untraced:\n{summary(untraced)}\ntraced:\n{summary(traced)}"
    assert traced.returncode == untraced.returncode == 0, report
    assert traced.failed_tests == untraced.failed_tests == set(), report
    assert traced.tests_run == untraced.tests_run, report
