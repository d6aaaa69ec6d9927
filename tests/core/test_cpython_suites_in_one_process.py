"""CPython's own test suites of code objects, frames and generators, several in one
process, with every call traced: the core of the tracer's memory safety, run under
AddressSanitizer and UndefinedBehaviorSanitizer by scripts/test.sh (tests/cpython_suites.py
says how the suites run; tests/integration/test_cpython_suites.py runs the others).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.cpython_suites import (
    RUN_TIMEOUT,
    SHIM,
    TWO_TOOL_FAILURES,
    run_suites,
    side_by_side,
    summary,
)
from tests.tracing import DEFAULT_BACKEND, isolated, read_trace

# Several suites in ONE process (no workers): code objects, frames and
# generators of one suite die while the next runs, so per-code state that
# outlived its code object is read at a reused address. Two crashes were found
# this way: generators' records read after their code died (test_generators,
# test_asyncgen), and the free function CPython calls for every co_extra slot
# (test_code). The sanitizer stage of scripts/test.sh runs this test under
# AddressSanitizer and UndefinedBehaviorSanitizer (the traced interpreter
# inherits the preloaded runtimes), which turns any use-after-free into a crash.
ONE_PROCESS_SUITES = (
    "test_generators",
    "test_asyncgen",
    "test_coroutines",
    "test_exceptions",
    "test_contextlib",
    "test_contextlib_async",
    "test_code",
    "test_with",
    "test_scope",
    "test_class",
    "test_raise",
    "test_functools",
    "test_types",
    "test_funcattrs",
    "test_dataclasses",
    "test_frame",
    "test_weakref",
    "test_gc",
    "test_context",
    "test_itertools",
    "test_sys_settrace",
    # tracemalloc and the warnings that use it (issue 31: activation deadlocked under
    # tracemalloc), and test_exceptions' memory errors met inside our callbacks.
    "test_tracemalloc",
    "test_warnings",
)
# Under the sanitizers (scripts/test.sh sets the variable), the suites that crashed
# before: the others ran clean there, and the sanitized interpreter is slow.
SANITIZER_STAGE_SUITES = ONE_PROCESS_SUITES[:7]


# The batched payload's blocks, segments and writer thread under the same churn
# (and, in the sanitizer stage, under the sanitizers): the suites that crashed before.
BATCHED_SUITES = SANITIZER_STAGE_SUITES


@pytest.mark.slow
@pytest.mark.timeout(2 * RUN_TIMEOUT + 120)
@pytest.mark.parametrize("payload", ["full", "batched"])
def test_cpython_suites_in_one_process(tmp_path: Path, payload: str) -> None:
    if importlib.util.find_spec("test.libregrtest") is None:
        pytest.fail(f"{sys.executable} lacks CPython's test package (pyenv's builds ship it)")
    known = TWO_TOOL_FAILURES.get((sys.version_info[:2], DEFAULT_BACKEND), frozenset())
    # test_exceptions' test_memory_error_in_PyErr_PrintEx is not left out (but on
    # 3.15, CPython's crash): a MemoryError met in our callback reaches the program.
    ignore = known
    sanitized = bool(os.environ.get("PINSIGHT_PYTHON_SANITIZER_STAGE"))
    suites = SANITIZER_STAGE_SUITES if sanitized else ONE_PROCESS_SUITES
    if payload == "batched":
        suites = BATCHED_SUITES
    with isolated(tmp_path / "trace", snapshot=True, subbuf_size="1M", num_subbuf=4) as (
        session,
        run_as,
    ):
        untraced, traced = side_by_side(
            lambda: run_suites(tmp_path / "untraced", {}, ignore, suites=suites, jobs=1),
            lambda: run_suites(tmp_path / "traced", {**SHIM, "PINSIGHT_PYTHON_PAYLOAD": payload},
                               ignore, run_as, suites=suites, jobs=1),
        )
        session.record_snapshot()
    # Enough of each suite ran (the batched payload's seven suites: 482 tests on 3.11).
    least = 1000 if not sanitized and payload == "full" else 400 if payload == "batched" else 500
    assert untraced.tests_run > least, summary(untraced)
    report = f"untraced:\n{summary(untraced)}\ntraced:\n{summary(traced)}"
    # A crash of the one process fails every suite after it: compare the verdicts.
    assert traced.returncode == untraced.returncode, report
    assert traced.failed_files == untraced.failed_files, report
    assert sorted(traced.failed_tests) == sorted(untraced.failed_tests), report
    assert traced.tests_run == untraced.tests_run, report
    trace = read_trace(tmp_path / "trace")
    if payload == "batched":
        # The suites' functions are named, and their records came in blocks, most
        # of them written by the writer thread (partial).
        named = trace.named("code_info")
        assert any("/test/" in (e.fields["filename"] or "") for e in named), len(named)
        assert any(e.fields["flags"] & 2 for e in trace.named("event_block"))
        return
    begun = trace.named("function_begin")
    assert any("/test/" in (e.file or "") for e in begun), len(begun)


