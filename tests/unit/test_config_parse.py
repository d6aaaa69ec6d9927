"""The trace configuration parser and the lexgion rate arithmetic, at unit level.

Every configuration here goes through the compiled parser (src/config/); the
_lexgion_simulate* bindings run Config::decide_code, Config::events_for and
lexgion_begin in the order the tracer's hot path does, so "the executions it
returns" are the executions the tracer traces (end-to-end tests check that
against real LTTng traces).

Rate arithmetic, as PInsight computes it: the 0-based executions
max(trace_starts_at, tracing_rate - 1), then every tracing_rate-th after it,
at most max_num_traces of them, per function and per thread.
"""

from __future__ import annotations

import collections
import os
import random
import re
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

try:
    from pinsight_python import _pinsight_python_testing as native
except ImportError as error:  # a wheel, or a build without the option
    raise ImportError(
        "pinsight_python._pinsight_python_testing is missing: install in editable mode "
        "(bash scripts/setup.sh, or pip install -e .), which builds it "
        "(CMake option PINSIGHT_PYTHON_TESTING=ON)"
    ) from error

HERE = Path(__file__).resolve().parent
TEST_CONFIGS = HERE / "configs"
EXAMPLE_CONFIGS = HERE.parents[1] / "config"

PY_EVENTS = ["pysysmon_py_start", "pysysmon_py_return"]
C_EVENTS = ["pysysmon_c_start", "pysysmon_c_return"]
ALL_EVENTS = PY_EVENTS + C_EVENTS


def parse(text: str, name: str = "cfg.txt", **kwargs: Any) -> Dict[str, Any]:
    return native._parse_config_string(textwrap.dedent(text), name, **kwargs)


def errors(text: str) -> List[str]:
    with pytest.raises(ValueError) as caught:
        parse(text)
    return str(caught.value).splitlines()


def warnings(text: str) -> List[str]:
    return parse(text)["warnings"]


def traced(
    text: str,
    qualname: str = "f",
    filename: str = "/src/app/t.py",
    module: str = "t",
    thread: int = 0,
    n: int = 100,
) -> List[int]:
    return native._lexgion_simulate(textwrap.dedent(text), qualname, filename, module, thread, n)


def detail(
    text: str,
    qualname: str = "f",
    filename: str = "/src/app/t.py",
    module: str = "t",
    thread: int = 0,
    n: int = 100,
) -> Dict[str, Any]:
    return native._lexgion_simulate_detail(
        textwrap.dedent(text), qualname, filename, module, thread, n
    )


def expected(n: int, starts_at: int = 0, max_traces: int = -1, rate: int = 1) -> List[int]:
    """PInsight's traced executions in closed form."""
    first = max(starts_at, rate - 1)
    indices = list(range(first, n, rate))
    return indices if max_traces < 0 else indices[:max_traces]


# ---------------------------------------------------------------------------
# Rate arithmetic


def test_builtin_default_traces_everything() -> None:
    config = parse("")
    assert config["mode"] == "TRACING"
    assert config["events"] == ALL_EVENTS
    assert config["threads"] is None
    assert config["module_filter"] == [] and config["module_exclude"] == []
    assert config["lexgions"] == [] and config["thread_sections"] == []
    assert config["warnings"] == []
    assert traced("", n=100) == list(range(100))
    assert detail("")["lexgion"] == "default"


@pytest.mark.parametrize(
    ("starts_at", "max_traces", "rate", "n", "indices"),
    [
        (0, 5, 1, 100, [0, 1, 2, 3, 4]),
        (0, -1, 10, 100, [9, 19, 29, 39, 49, 59, 69, 79, 89, 99]),
        (0, -1, 5, 100, list(range(4, 100, 5))),
        (50, 100, 1, 100, list(range(50, 100))),
        (50, 100, 1, 200, list(range(50, 150))),
        (5, 10, 1, 100, list(range(5, 15))),
        (0, 0, 1, 100, []),
        (3, 4, 2, 100, [3, 5, 7, 9]),
        (0, -1, 1, 0, []),
        (0, 200, 10, 3000, list(range(9, 2000, 10))),
        (1000, -1, 1, 100, []),
    ],
)
def test_rate_triple(
    starts_at: int, max_traces: int, rate: int, n: int, indices: List[int]
) -> None:
    text = f"""
        [Lexgion(Python).default]
            trace_starts_at = {starts_at}
            max_num_traces = {max_traces}
            tracing_rate = {rate}
        """
    assert traced(text, n=n) == indices == expected(n, starts_at, max_traces, rate)


def test_rate_arithmetic_matches_closed_form_and_exhaustion_is_exact() -> None:
    rng = random.Random(1234)
    for _ in range(400):
        starts_at, max_traces, rate = rng.randint(0, 25), rng.randint(-1, 12), rng.randint(1, 9)
        n = rng.randint(0, 120)
        text = (
            f"[Lexgion.default]\ntrace_starts_at={starts_at}\n"
            f"max_num_traces={max_traces}\ntracing_rate={rate}\n"
        )
        result = detail(text, n=n)
        indices = result["traced"]
        assert indices == expected(n, starts_at, max_traces, rate), text
        # Exhausted exactly when the cap is reached: never before a traced
        # execution (the tracer would DISABLE too early), and as soon as it is.
        if max_traces == 0:
            assert result["exhausted_after"] == -1
        elif max_traces > 0 and len(indices) == max_traces:
            assert result["exhausted_after"] == indices[-1]
            assert result["window_end_at"] == indices[-1]
        else:
            assert result["exhausted_after"] is None
            assert result["window_end_at"] is None


def test_counters_are_per_thread() -> None:
    text = """
        [Lexgion(Python).default]
            max_num_traces = 5
        """
    for thread in range(4):
        assert traced(text, thread=thread) == [0, 1, 2, 3, 4]


def test_max_num_traces_zero_is_never_traced() -> None:
    result = detail("[Lexgion(Python:f)]\nmax_num_traces = 0\n")
    assert result["traced"] == [] and result["never_traced"]
    assert result["window_end_at"] is None and result["exhausted_after"] == -1
    assert not detail("[Lexgion(Python:f)]\nmax_num_traces = 1\n")["never_traced"]


# ---------------------------------------------------------------------------
# PInsight's doc/user/python_trace_config.md, every example


def test_doc_domain_mode_and_thread_scope() -> None:
    text = """
        [Python.default]
            trace_mode = TRACING
            Python.thread = (0-3)     # only trace Python threads 0, 1, 2, 3
        """
    config = parse(text)
    assert config["mode"] == "TRACING" and config["threads"] == [(0, 3)]
    assert config["warnings"] == []
    for thread in range(4):
        assert traced(text, thread=thread) == list(range(100))
    assert traced(text, thread=4) == []
    assert detail(text, thread=4)["events"] == []


@pytest.mark.parametrize("mode", ["OFF", "STANDBY", "MONITORING"])
def test_doc_modes_that_emit_nothing(mode: str) -> None:
    text = f"""
        # Disable all Python tracing at runtime (send kill -USR1 <pid> after writing this)
        [Python.default]
            trace_mode = {mode}
        """
    assert parse(text)["mode"] == mode
    assert traced(text) == []


def test_doc_domain_event_selection() -> None:
    text = """
        [Python.default]
            pysysmon_py_start  = on    # Python function entry (default: on)
            pysysmon_py_return = on    # Python function exit  (default: on)
            pysysmon_c_start   = off   # C extension call begin (turn off to reduce volume)
            pysysmon_c_return  = off   # C extension call end
            pysysmon_import    = off   # module import (default: off)
        """
    config = parse(text)
    assert config["events"] == PY_EVENTS and config["warnings"] == []
    assert config["events_possible"] == PY_EVENTS
    result = detail(text)
    assert result["events"] == PY_EVENTS and result["traced"] == list(range(100))


def test_doc_python_functions_only() -> None:
    text = """
        [Python.default]
            pysysmon_c_start  = off
            pysysmon_c_return = off
        """
    assert parse(text)["events"] == PY_EVENTS


def test_doc_c_extension_calls_only() -> None:
    text = """
        [Python.default]
            pysysmon_py_start  = off
            pysysmon_py_return = off
            pysysmon_c_start   = on
            pysysmon_c_return  = on
        """
    result = detail(text)
    # Executions are still rate-controlled: their native calls are traced.
    assert result["events"] == C_EVENTS and result["traced"] == list(range(100))


def test_doc_trace_only_main_and_first_worker() -> None:
    text = """
        # Trace only the main thread (thread 0) and the first worker (thread 1)
        [Python.thread(0-1)]: Python.default
        """
    config = parse(text)
    assert config["thread_sections"] == [{"threads": [(0, 1)], "events": ALL_EVENTS, "line": 3}]
    assert traced(text, thread=0) == traced(text, thread=1) == list(range(100))
    assert traced(text, thread=2) == []


def test_doc_trace_all_threads_except_main() -> None:
    text = """
        # Trace all threads except thread 0 (main thread — often just coordination code)
        [Python.thread(1-255)]: Python.default
        """
    assert traced(text, thread=0) == []
    assert traced(text, thread=1) == traced(text, thread=255) == list(range(100))
    assert traced(text, thread=256) == []


def test_doc_remove_thread_section() -> None:
    text = """
        [Python.thread(0-1)]: Python.default

        # Remove thread-specific config (threads fall back to Python.default)
        [REMOVE Python.thread(0-1)]
        """
    assert parse(text)["thread_sections"] == []
    assert traced(text, thread=5) == list(range(100))
    # Alone, as in the doc, it removes nothing here (it would on a reload).
    assert warnings("[REMOVE Python.thread(0-1)]\n") == [
        "cfg.txt:1: no section with the same threads above: "
        "[REMOVE Python.thread(0-1)] removes nothing"
    ]


def test_doc_default_lexgion_rate_control() -> None:
    text = """
        # Trace at most 200 calls per function, at 1-in-10 rate
        [Lexgion(Python).default]
            trace_starts_at = 0
            max_num_traces  = 200
            tracing_rate    = 10
            pysysmon_py_start  = on
            pysysmon_py_return = on
            pysysmon_c_start   = off
            pysysmon_c_return  = off
        """
    result = detail(text, n=3000)
    assert result["traced"] == list(range(9, 2000, 10))
    assert len(result["traced"]) == 200
    assert result["events"] == PY_EVENTS
    assert traced(text, n=100) == list(range(9, 100, 10))


def test_doc_warm_up_skip() -> None:
    text = """
        # Warm-up skip: ignore first 50 calls per function, then trace 100 at rate 1
        [Lexgion(Python).default]
            trace_starts_at = 50
            max_num_traces  = 100
            tracing_rate    = 1
        """
    assert traced(text, n=500) == list(range(50, 150))


def test_doc_auto_mode_switch() -> None:
    text = """
        [Lexgion(Python).default]
            max_num_traces  = 100
            tracing_rate    = 1
            trace_mode_after = MONITORING
        """
    result = detail(text, n=150)
    assert result["traced"] == list(range(100))
    assert result["window_end_at"] == 99 and result["mode_after"] == "MONITORING"


def test_doc_auto_mode_switch_per_domain() -> None:
    text = """
        [Lexgion(Python).default]
            max_num_traces   = 200
            trace_mode_after = Python:MONITORING, OpenMP:TRACING
        """
    config = parse(text)
    assert config["python_lexgion_default"]["window_end_action"] == {
        "python_mode": "MONITORING",
        "introspect": False,
    }
    assert config["warnings"] == []
    result = detail(text, n=300)
    assert len(result["traced"]) == 200 and result["mode_after"] == "MONITORING"


def test_doc_introspect_is_parsed() -> None:
    text = """
        [Lexgion(Python).default]
            max_num_traces   = 50
            tracing_rate     = 1
            trace_mode_after = INTROSPECT:60:analyze_python_traces.sh:TRACING
        """
    config = parse(text)
    assert config["python_lexgion_default"]["window_end_action"] == {
        "python_mode": "TRACING",
        "introspect": True,
        "introspect_pause": 60.0,
        "introspect_script": "analyze_python_traces.sh",
    }
    assert config["warnings"] == []
    result = detail(text)
    assert result["traced"] == list(range(50)) and result["window_end_at"] == 49


def test_doc_runtime_reconfiguration_file() -> None:
    text = """
        [Python.default]
            trace_mode = STANDBY

        [Lexgion(Python).default]
            max_num_traces = 500
            tracing_rate   = 20
        """
    config = parse(text)
    assert config["mode"] == "STANDBY"
    lexgion = config["python_lexgion_default"]
    assert (lexgion["max_num_traces"], lexgion["tracing_rate"]) == (500, 20)
    assert traced(text) == []


def test_doc_combined_multi_domain() -> None:
    text = """
        [Python.default]
            trace_mode    = TRACING
            Python.thread = (0)         # main thread only

        [OpenMP.default]
            trace_mode       = TRACING
            OpenMP.thread    = (0-15)

        [Python.default]
            pysysmon_py_start  = on
            pysysmon_py_return = on
            pysysmon_c_start   = off    # skip C bridges to reduce volume
            pysysmon_c_return  = off

        [Lexgion(Python).default]: Python.default
            trace_starts_at = 0
            max_num_traces  = 100
            tracing_rate    = 5
            trace_mode_after = Python:MONITORING

        [Lexgion(OpenMP).default]: OpenMP.default
            max_num_traces  = 200
            tracing_rate    = 1
        """
    config = parse(text)
    assert config["warnings"] == []
    assert config["threads"] == [(0, 0)] and config["events"] == PY_EVENTS
    result = detail(text, n=1000)
    assert result["traced"] == list(range(4, 500, 5))
    assert result["events"] == PY_EVENTS and result["mode_after"] == "MONITORING"
    assert traced(text, thread=1) == []


NAMED_SYNTAX = """
    # Single function by qualified name
    [Lexgion(Python:main)]
        max_num_traces = 200
        tracing_rate   = 1

    # Nested function / method
    [Lexgion(Python:MyClass.compute)]
        max_num_traces = 50
        tracing_rate   = 1

    # Inner function (closure)
    [Lexgion(Python:main.<locals>.do_work)]
        max_num_traces = 100
        tracing_rate   = 5

    # Multiple functions sharing the same settings
    [Lexgion(Python:solver.compute, Python:solver.setup)]
        max_num_traces = 200
        tracing_rate   = 1

    # Disambiguate by filename stem (when same qualname appears in multiple files)
    [Lexgion(Python:solver.py:MyClass.compute)]
        max_num_traces = 50
    """


def test_doc_named_lexgion_syntax() -> None:
    config = parse(NAMED_SYNTAX)
    assert config["warnings"] == []
    assert [(n["qualname"], n["file"], n["section"]) for n in config["lexgions"]] == [
        ("main", "", "Lexgion(Python:main)"),
        ("MyClass.compute", "", "Lexgion(Python:MyClass.compute)"),
        ("main.<locals>.do_work", "", "Lexgion(Python:main.<locals>.do_work)"),
        ("solver.compute", "", "Lexgion(Python:solver.compute)"),
        ("solver.setup", "", "Lexgion(Python:solver.setup)"),
        ("MyClass.compute", "solver.py", "Lexgion(Python:solver.py:MyClass.compute)"),
    ]
    assert traced(NAMED_SYNTAX, "main", n=300) == list(range(200))
    assert traced(NAMED_SYNTAX, "MyClass.compute") == list(range(50))
    assert traced(NAMED_SYNTAX, "main.<locals>.do_work") == list(range(4, 100, 5))
    assert traced(NAMED_SYNTAX, "solver.setup", n=300) == list(range(200))
    assert traced(NAMED_SYNTAX, "unnamed") == list(range(100))
    # The file-qualified section is the more specific match in solver.py.
    assert detail(NAMED_SYNTAX, "MyClass.compute", "/x/solver.py")["lexgion"] == (
        "Lexgion(Python:solver.py:MyClass.compute)"
    )
    assert detail(NAMED_SYNTAX, "MyClass.compute", "/x/other.py")["lexgion"] == (
        "Lexgion(Python:MyClass.compute)"
    )


def test_doc_named_lexgion_inheritance_and_suppression() -> None:
    text = """
        # Rate limit the hot solver function
        [Lexgion(Python:solver.compute)]: Python.default
            trace_starts_at  = 0
            max_num_traces   = 50
            tracing_rate     = 1
            trace_mode_after = Python:MONITORING

        # Stop tracing a noisy utility function entirely
        [Lexgion(Python:utils.log_debug)]: Python.default
            max_num_traces = 0
        """
    result = detail(text, "solver.compute")
    assert result["traced"] == list(range(50)) and result["mode_after"] == "MONITORING"
    suppressed = detail(text, "utils.log_debug")
    assert suppressed["traced"] == [] and suppressed["never_traced"]


@pytest.mark.parametrize(
    ("section", "qualname", "filename", "matches"),
    [
        ("Python:compute", "compute", "/a/anything.py", True),
        ("Python:compute", "other.compute", "/a/anything.py", False),
        ("Python:MyClass.compute", "MyClass.compute", "/a/b.py", True),
        ("Python:solver.py:MyClass.compute", "MyClass.compute", "/a/solver.py", True),
        ("Python:solver.py:MyClass.compute", "MyClass.compute", "/a/other.py", False),
        ("Python:solver.py:MyClass.compute", "MyClass.compute", "/a/solver.pyx", False),
        ("Python:solver:MyClass.compute", "MyClass.compute", "/a/solver.py", True),
        ("Python:pkg/solver.py:compute", "compute", "/a/pkg/solver.py", True),
        ("Python:pkg/solver.py:compute", "compute", "/a/xpkg/solver.py", False),
        ("Python:main.<locals>.do_work", "main.<locals>.do_work", "/a/m.py", True),
        ("compute", "compute", "/a/m.py", True),
        ("m.py:compute", "compute", "/a/m.py", True),
        ("m.py:compute", "compute", "/a/n.py", False),
    ],
)
def test_doc_named_matching_semantics(
    section: str, qualname: str, filename: str, matches: bool
) -> None:
    text = (
        f"[Lexgion(Python).default]\nmax_num_traces = 0\n[Lexgion({section})]\nmax_num_traces = 3\n"
    )
    assert traced(text, qualname, filename) == ([0, 1, 2] if matches else [])


def test_doc_named_priority_order() -> None:
    text = """
        [Lexgion.default]
            max_num_traces = 1
        [Lexgion(Python).default]
            max_num_traces = 2
        [Lexgion(Python:named)]
            max_num_traces = 3
        """
    assert traced(text, "named") == [0, 1, 2]
    assert traced(text, "other") == [0, 1]
    assert traced("[Lexgion.default]\nmax_num_traces = 1\n", "other") == [0]
    assert detail("[Lexgion.default]\nmax_num_traces = 1\n")["lexgion"] == "Lexgion.default"


def test_doc_full_named_config() -> None:
    text = """
        # ── Domain event defaults ────────────────────────────────────────────────
        [Python.default]
            pysysmon_py_start  = on
            pysysmon_py_return = on
            pysysmon_c_start   = off   # disable C bridge by default
            pysysmon_c_return  = off

        # ── Lexgion defaults ─────────────────────────────────────────────────────
        [Lexgion(Python).default]: Python.default
            trace_starts_at = 0
            max_num_traces  = 50
            tracing_rate    = 1
            trace_mode_after = Python:MONITORING

        # ── Named function overrides ─────────────────────────────────────────────

        # Hot solver — full C bridge tracing, high rate limit
        [Lexgion(Python:Solver.run)]: Python.default
            pysysmon_c_start  = on
            pysysmon_c_return = on
            max_num_traces    = 200
            tracing_rate      = 1

        # Initialization — trace only once
        [Lexgion(Python:Solver.setup)]: Python.default
            max_num_traces = 1

        # Suppress a noisy helper
        [Lexgion(Python:utils.log_debug)]: Python.default
            max_num_traces = 0

        # Two functions with same settings, disambiguated by filename
        [Lexgion(Python:solver_a.py:compute, Python:solver_b.py:compute)]: Python.default
            max_num_traces = 100
            tracing_rate   = 5
        """
    config = parse(text)
    assert config["warnings"] == []
    assert config["events_possible"] == ALL_EVENTS
    run = detail(text, "Solver.run", n=300)
    assert run["events"] == ALL_EVENTS and run["traced"] == list(range(200))
    assert run["mode_after"] == "TRACING"  # the named section has no window_end_action
    setup = detail(text, "Solver.setup")
    assert setup["events"] == PY_EVENTS and setup["traced"] == [0]
    assert detail(text, "utils.log_debug")["never_traced"]
    for filename in ("/p/solver_a.py", "/p/solver_b.py"):
        assert traced(text, "compute", filename) == list(range(4, 100, 5))
    other = detail(text, "compute", "/p/solver_c.py")
    assert other["lexgion"] == "Lexgion(Python).default"
    assert other["traced"] == list(range(50)) and other["mode_after"] == "MONITORING"


PER_THREAD_WORKERS = """
    # Suppress all Python tracing by default, then selectively enable:
    [Lexgion(Python).default]
        max_num_traces = 0

    # Trace "worker" function only on threads 1 and 2 (max 8 traces each)
    [Lexgion(Python:worker)] : Python.default : Python.thread(1-2)
        max_num_traces = 8

    # Trace "main_work" function only on the main thread (thread 0)
    [Lexgion(Python:main_work)] : Python.default : Python.thread(0)
        max_num_traces = 5
    """


def test_doc_thread_filter_per_named_lexgion() -> None:
    config = parse(PER_THREAD_WORKERS)
    assert config["warnings"] == []
    assert config["lexgions"][0]["threads"] == [(1, 2)]
    per_thread = {t: traced(PER_THREAD_WORKERS, "worker", thread=t, n=30) for t in range(5)}
    assert per_thread == {0: [], 1: list(range(8)), 2: list(range(8)), 3: [], 4: []}
    assert traced(PER_THREAD_WORKERS, "main_work", thread=0, n=30) == list(range(5))
    assert traced(PER_THREAD_WORKERS, "main_work", thread=1, n=30) == []
    assert traced(PER_THREAD_WORKERS, "preprocess", thread=0, n=30) == []


@pytest.mark.parametrize(
    ("threads", "limit", "traced_threads"),
    [("3-4", 6, {3, 4}), ("1-4", 5, {1, 2, 3, 4}), ("1-2", 9, {1, 2})],
)
def test_doc_thread_filter_examples(threads: str, limit: int, traced_threads: set) -> None:
    text = f"""
        [Lexgion(Python).default]
            max_num_traces = 0

        [Lexgion(Python:worker)] : Python.default : Python.thread({threads})
            max_num_traces = {limit}
        """
    for thread in range(6):
        want = list(range(limit)) if thread in traced_threads else []
        assert traced(text, "worker", thread=thread, n=30) == want
    total = sum(len(traced(text, "worker", thread=t, n=30)) for t in range(1, 5))
    assert total == limit * len(traced_threads)


def test_doc_thread_filter_combined_with_window_actions() -> None:
    text = """
        [Lexgion(Python).default]
            max_num_traces = 0      # suppress all functions by default

        # Worker traced only on threads 1-2, max 7 each, auto-drop after
        [Lexgion(Python:worker)] : Python.default : Python.thread(1-2)
            max_num_traces   = 7
            trace_mode_after = Python:MONITORING

        # Main thread work, limit 5 traces, then INTROSPECT
        [Lexgion(Python:main_work)] : Python.default : Python.thread(0)
            max_num_traces   = 5
            trace_mode_after = INTROSPECT:30:analyze.sh:TRACING
        """
    assert warnings(text) == []
    worker = detail(text, "worker", thread=2, n=30)
    assert worker["traced"] == list(range(7)) and worker["mode_after"] == "MONITORING"
    main = detail(text, "main_work", thread=0, n=30)
    assert main["traced"] == list(range(5)) and main["mode_after"] == "TRACING"


def test_per_thread_config_file() -> None:
    path = TEST_CONFIGS / "per_thread.txt"
    config = native._parse_config(str(path))
    assert config["path"] == str(path) and config["warnings"] == []
    assert native._lexgion_simulate(path, "worker", "w.py", "w", 1, 30) == list(range(7))
    assert native._lexgion_simulate(path, "worker", "w.py", "w", 3, 30) == []
    assert native._lexgion_simulate(path, "main_work", "w.py", "w", 0, 30) == list(range(5))


# ---------------------------------------------------------------------------
# PInsight's test/python_simple phase 3-5 configurations (their expected counts)


@pytest.mark.parametrize(
    ("text", "qualname", "filename", "count"),
    [
        ("[Lexgion(Python:hot_loop)]\nmax_num_traces = 10\n", "hot_loop", "r.py", 10),
        ("[Lexgion(Python:sampled_work)]\nmax_num_traces = 0\n", "sampled_work", "r.py", 0),
        (
            "[Lexgion(Python:hot_loop)]\ntrace_starts_at = 5\nmax_num_traces  = 10\n",
            "hot_loop",
            "r.py",
            10,
        ),
        ("[Lexgion(Python:sampled_work)]\ntracing_rate = 5\n", "sampled_work", "r.py", 20),
        ("[Lexgion(Python:sampled_work)]\ntracing_rate = 10\n", "sampled_work", "r.py", 10),
        (
            "[Lexgion(Python:hot_loop)]\ntracing_rate = 1\nmax_num_traces = -1\n",
            "hot_loop",
            "r.py",
            100,
        ),
        (
            "[Python.default]\ntrace_mode = TRACING\n[Lexgion(Python:once_then_stop)]\n"
            "max_num_traces  = 15\nwindow_end_action = Python:STANDBY\n",
            "once_then_stop",
            "r.py",
            15,
        ),
        ("[Lexgion(Python).default]\nmax_num_traces = 5\n", "once_then_stop", "r.py", 5),
        (
            "[Lexgion(Python).default]\nmax_num_traces = 0\n"
            "[Lexgion(Python:test_named_lexgion_helper.py:compute)]\nmax_num_traces = 7\n",
            "compute",
            "/t/test_named_lexgion_helper.py",
            7,
        ),
        (
            "[Lexgion(Python).default]\nmax_num_traces = 0\n"
            "[Lexgion(Python:test_named_lexgion_helper.py:compute)]\nmax_num_traces = 7\n",
            "compute",
            "/tmp/test_4_4_main.py",
            0,
        ),
        (
            "[Lexgion(Python).default]\nmax_num_traces = 0\n"
            "[Lexgion(compute)]\nmax_num_traces = 5\n",
            "compute",
            "n.py",
            5,
        ),
        (
            "[Lexgion(Python).default]\nmax_num_traces = 3\n[Lexgion(Python:Solver.run)]\n"
            "max_num_traces = 6\n",
            "Solver.setup",
            "n.py",
            3,
        ),
    ],
)
def test_pinsight_phase_tests(text: str, qualname: str, filename: str, count: int) -> None:
    assert len(traced(text, qualname, filename, n=100)) == count


def test_window_end_action_switches_mode_after_the_cap() -> None:
    text = """
        [Python.default]
            trace_mode = TRACING
        [Lexgion(Python:once_then_stop)]
            max_num_traces  = 20
            window_end_action = Python:MONITORING
        """
    result = detail(text, "once_then_stop")
    assert result["traced"] == list(range(20))
    assert result["window_end_at"] == 19 and result["mode_after"] == "MONITORING"


# ---------------------------------------------------------------------------
# PInsight's doc/user/trace_config_format.md, the examples that concern Python


def test_format_doc_example_file_parses_silently() -> None:
    config = native._parse_config(str(TEST_CONFIGS / "multi_domain.txt"))
    assert config["warnings"] == []
    assert config["events"] == PY_EVENTS
    lexgion = config["python_lexgion_default"]
    assert lexgion["section"] == "Lexgion.default"
    assert (lexgion["max_num_traces"], lexgion["tracing_rate"]) == (200, 1)
    assert [n["section"] for n in config["lexgions"]] == ["Lexgion(Python:solver.step)"]
    path = TEST_CONFIGS / "multi_domain.txt"
    assert native._lexgion_simulate(path, "solver.step", n_calls=50) == list(range(7))
    assert len(native._lexgion_simulate(path, "other", n_calls=500)) == 200


def test_format_doc_reset_domain() -> None:
    text = """
        [Python.default]
            trace_mode = STANDBY
            pysysmon_c_start = off
            Python.thread = (0-1)
        [RESET Python.default]
        """
    config = parse(text)
    # Mode and events go back to the install defaults; the punit scope stays.
    assert config["mode"] == "TRACING" and config["events"] == ALL_EVENTS
    assert config["threads"] == [(0, 1)]


def test_format_doc_thread_section_events() -> None:
    text = """
        [Python.default]
            pysysmon_c_start = off
            pysysmon_c_return = off
        # Set tracing config for threads 0-3
        [Python.thread(0-3)] : Python.default
            pysysmon_c_start = on
        [Python.thread(2)]
            pysysmon_py_return = off
        """
    config = parse(text)
    assert config["thread_sections"] == [
        {"threads": [(0, 3)], "events": [*PY_EVENTS, "pysysmon_c_start"], "line": 6},
        {"threads": [(2, 2)], "events": ["pysysmon_py_start"], "line": 8},
    ]
    assert detail(text, thread=1)["events"] == [*PY_EVENTS, "pysysmon_c_start"]
    assert detail(text, thread=2)["events"] == ["pysysmon_py_start"]  # the later section
    assert detail(text, thread=4)["events"] == []


def test_format_doc_lexgion_events_override_thread_and_domain() -> None:
    text = """
        [Python.default]
            pysysmon_c_start = off
            pysysmon_c_return = off
        [Python.thread(0-1)]
            pysysmon_py_return = off
        [Lexgion(Python:hot)]
            pysysmon_c_start = on
        [Lexgion(Python:plain)]
            max_num_traces = 3
        """
    # A lexgion's own event keys decide; otherwise the thread's section does.
    assert detail(text, "hot", thread=0)["events"] == [*PY_EVENTS, "pysysmon_c_start"]
    assert detail(text, "plain", thread=0)["events"] == ["pysysmon_py_start"]
    assert detail(text, "hot", thread=2)["events"] == []  # not a listed thread


def test_format_doc_reset_lexgion_defaults() -> None:
    text = """
        [Lexgion.default]
            tracing_rate = 42
            max_num_traces = 999
            trace_starts_at = 50
        [RESET Lexgion.default]
        """
    lexgion = parse(text)["lexgion_default"]
    assert (lexgion["tracing_rate"], lexgion["max_num_traces"], lexgion["trace_starts_at"]) == (
        1,
        -1,
        0,
    )
    text = """
        [Lexgion.default]
            tracing_rate = 7
            max_num_traces = 300
        [Lexgion(Python).default]
            tracing_rate = 99
            max_num_traces = 1
        [RESET Lexgion(Python).default]
        """
    lexgion = parse(text)["python_lexgion_default"]
    assert (lexgion["tracing_rate"], lexgion["max_num_traces"]) == (7, 300)
    assert lexgion["section"] == "Lexgion.default"


def test_format_doc_lexgion_domain_default_starts_from_lexgion_default() -> None:
    text = """
        [Lexgion.default]
            tracing_rate = 7
            max_num_traces = 300
        [Lexgion(Python).default]
            trace_starts_at = 10
        """
    lexgion = parse(text)["python_lexgion_default"]
    assert (lexgion["tracing_rate"], lexgion["max_num_traces"], lexgion["trace_starts_at"]) == (
        7,
        300,
        10,
    )


def test_format_doc_multiple_and_removed_lexgions() -> None:
    text = """
        [Lexgion(Python:a, Python:b, Python:c)]
            max_num_traces = 100
            tracing_rate = 5
        [REMOVE Lexgion(Python:a, Python:b)]
        """
    config = parse(text)
    assert [n["qualname"] for n in config["lexgions"]] == ["c"]
    assert traced(text, "c", n=1000) == list(range(4, 500, 5))
    assert traced(text, "a") == list(range(100))


def test_format_doc_remove_all_thread_sections() -> None:
    text = """
        [Python.thread(0-3)]
        [Python.thread(4-7)]
        [REMOVE Python.thread(*)]
        """
    assert parse(text)["thread_sections"] == []


def test_format_doc_set_merges() -> None:
    text = """
        [Lexgion(Python:f)] : Python.default : Python.thread(1)
            max_num_traces = 4
        [SET Lexgion(Python:f)]
            tracing_rate = 2
        [set Python.default]
            pysysmon_c_start = off
        [SET Python.default]
            pysysmon_c_return = off
        """
    config = parse(text)
    (named,) = config["lexgions"]
    assert (named["max_num_traces"], named["tracing_rate"], named["threads"]) == (4, 2, [(1, 1)])
    assert config["events"] == PY_EVENTS
    assert traced(text, thread=1) == [1, 3, 5, 7]


@pytest.mark.parametrize(
    ("value", "python_mode", "introspect"),
    [
        ("MONITORING", "MONITORING", None),
        ("OpenMP:MONITORING, MPI:OFF", None, None),
        ("Python:OFF, OpenMP:TRACING", "OFF", None),
        ("INTROSPECT:60:analyze_traces.sh:TRACING", "TRACING", (60.0, "analyze_traces.sh")),
        ("INTROSPECT:-1:-", "MONITORING", (-1.0, "")),
        ("INTROSPECT:0:analyze_traces.sh:TRACING", "TRACING", (0.0, "analyze_traces.sh")),
        ("INTROSPECT:60:analyze.sh:STANDBY", "STANDBY", (60.0, "analyze.sh")),
        ("INTROSPECT:5:/tmp/introspect_script.sh:Python:TRACING", "TRACING",
         (5.0, "/tmp/introspect_script.sh")),
        ("INTROSPECT:30:analyze.sh:OpenMP:STANDBY", None, (30.0, "analyze.sh")),
        ("introspect:0.25: a b.sh :MONITORING", "MONITORING", (0.25, "a b.sh")),
        ("HIP:MONITORING", None, None),
        ("HIP:device_activity=off", None, None),
    ],
)
def test_format_doc_window_end_actions(
    value: str, python_mode: str, introspect: Optional[Tuple[float, str]]
) -> None:
    text = f"[Lexgion.default]\n    max_num_traces = 100\n    window_end_action = {value}\n"
    config = parse(text)
    action = config["lexgion_default"]["window_end_action"]
    expected: Dict[str, Any] = {"python_mode": python_mode, "introspect": introspect is not None}
    if introspect is not None:
        expected["introspect_pause"], expected["introspect_script"] = introspect
    assert action == expected
    assert config["warnings"] == []
    result = detail(text, n=150)
    assert result["mode_after"] == (python_mode or "TRACING")


def test_format_doc_window_timeout() -> None:
    text = """
        [HIP.default]
            trace_mode = TRACING
        [Lexgion.default]
            window_timeout = 30
            window_end_action = HIP:MONITORING
        """
    config = parse(text)
    assert config["warnings"] == []
    assert config["window_timeout"] == 30.0
    assert config["window_timeout_action"] == {"python_mode": None, "introspect": False}
    text = """
        [Lexgion.default]
            max_num_traces = 50
            window_end_trigger = all
            window_timeout = 60
            window_end_action = MONITORING
        """
    config = parse(text)
    assert config["window_timeout"] == 60.0
    assert config["window_timeout_action"]["python_mode"] == "MONITORING"
    assert config["lexgion_default"]["window_end_trigger"] == "all"
    assert config["warnings"] == []
    assert parse("[Lexgion.default]\nwindow_timeout = -5\n")["window_timeout"] == 0.0
    assert parse("[Lexgion.default]\nwindow_end_trigger = first\n")["warnings"] == []


def test_window_end_trigger() -> None:
    """PInsight's count policy: `first` (the default) or `all`, case aside, in any
    lexgion section; named sections take [Lexgion.default]'s as their start."""
    config = parse(
        """
        [Lexgion.default]
            window_timeout = 10
            window_end_trigger = ALL
        [Lexgion(Python:f)]
            max_num_traces = 3
        [Lexgion(Python:g)]
            window_end_trigger = first
        """
    )
    assert config["warnings"] == []
    assert config["lexgion_default"]["window_end_trigger"] == "all"
    assert config["python_lexgion_default"]["window_end_trigger"] == "all"
    by_section = {lex["section"]: lex["window_end_trigger"] for lex in config["lexgions"]}
    assert by_section == {"Lexgion(Python:f)": "all", "Lexgion(Python:g)": "first"}
    assert parse("[Lexgion.default]\n")["lexgion_default"]["window_end_trigger"] == "first"
    assert errors("[Lexgion.default]\nwindow_end_trigger = every\n") == [
        "cfg.txt:2: window_end_trigger: expected first or all, got 'every'"
    ]


def test_window_end_trigger_all_without_a_timeout_is_warned_about() -> None:
    """PInsight's never-fires guard: under `all`, a function run once and never
    again keeps the window open; window_timeout is the bound it recommends."""
    text = """
        [Lexgion.default]
            max_num_traces = 50
        [Lexgion(Python:f)]
            window_end_trigger = all
        [Lexgion(Python:g)]
            window_end_trigger = all
        """
    assert warnings(text) == [
        "cfg.txt:5: window_end_trigger = all without a window_timeout in [Lexgion.default]: "
        "the window never ends while a function a thread ran stays below its max_num_traces "
        "(one called rarely, or never again); set window_timeout as a bound"
    ]
    assert warnings(text + "[Lexgion.default]\nwindow_timeout = 5\n") == []


def test_window_timeout_outside_lexgion_default_is_warned_about() -> None:
    assert warnings("[Lexgion(Python:f)]\nwindow_timeout = 10\n") == [
        "cfg.txt:2: window_timeout only takes effect in [Lexgion.default] "
        "(one process-wide timer): ignored in [Lexgion(Python:f)]"
    ]


def test_thread_ids_beyond_the_lookup_table() -> None:
    text = """
        [Python.default]
            Python.thread = (0-2000, 5000)
        [Python.thread(1500-1600, 4000-6000)]
            pysysmon_c_start = off
        """
    assert detail(text, thread=1550)["events"] == [*PY_EVENTS, "pysysmon_c_return"]
    assert detail(text, thread=5000)["events"] == [*PY_EVENTS, "pysysmon_c_return"]
    for thread in (0, 1499, 1601, 2000, 4999, 5001, 10**9):
        assert detail(text, thread=thread)["events"] == [], thread
    assert detail("[Python.thread(3, 7-9)]\n", thread=2**31 - 1)["events"] == []
    assert detail("[Python.default]\nPython.thread = *\n", thread=2**31 - 1)["events"] == ALL_EVENTS


def test_never_traced_accounts_for_every_thread() -> None:
    text = """
        [Python.default]
            Python.thread = (0-3)
        [Lexgion(Python:outside)] : : Python.thread(5-6)
        [Lexgion(Python:inside)] : : Python.thread(3-6)
        [Lexgion(Python:silent)]
            events = none
        [Lexgion(Python:capped)]
            max_num_traces = 0
        """
    assert detail(text, "outside", thread=5)["never_traced"]
    assert not detail(text, "inside", thread=5)["never_traced"]
    assert traced(text, "inside", thread=3) == list(range(100))
    assert detail(text, "silent")["never_traced"] and detail(text, "capped")["never_traced"]
    assert not detail(text, "other")["never_traced"]
    only_listed = "[Python.thread(2)]\nevents = none\n[Python.thread(4)]\n"
    assert not detail(only_listed)["never_traced"]
    assert detail(only_listed, thread=4)["traced"] == list(range(100))


def test_events_possible_is_the_union_over_lexgions_and_threads() -> None:
    base = "[Python.default]\npysysmon_c_start = off\npysysmon_c_return = off\n"
    assert parse(base)["events_possible"] == PY_EVENTS
    with_thread = base + "[Python.thread(1)] : Python.default\npysysmon_c_start = on\n"
    assert parse(with_thread)["events_possible"] == [*PY_EVENTS, "pysysmon_c_start"]
    capped = base + "[Lexgion(Python:f)]\nevents = all\nmax_num_traces = 0\n"
    assert parse(capped)["events_possible"] == PY_EVENTS
    enabled = base + "[Lexgion(Python:f)]\nevents = c_call\n"
    assert parse(enabled)["events_possible"] == ALL_EVENTS
    assert parse("[Lexgion(Python).default]\nmax_num_traces = 0\n")["events_possible"] == []


# ---------------------------------------------------------------------------
# The design's simpler form and module selection


def test_design_form() -> None:
    text = """
        [Python]
            trace_mode = TRACING
            events = function, c_call

        [Python.punit.thread]
            range = 0-0

        [Lexgion.default]
            max_num_traces = 100
            trace_mode_after = STANDBY
        """
    config = parse(text)
    assert config["warnings"] == []
    assert config["events"] == ALL_EVENTS and config["threads"] == [(0, 0)]
    result = detail(text, n=200)
    assert result["traced"] == list(range(100)) and result["mode_after"] == "STANDBY"
    assert traced(text, thread=1) == []


def test_design_form_file() -> None:
    config = native._parse_config(str(TEST_CONFIGS / "design_form.txt"))
    assert config["warnings"] == []
    assert config["module_filter"] == ["myapp", "numpy"]
    assert config["module_exclude"] == ["myapp.vendored"]
    path = TEST_CONFIGS / "design_form.txt"
    assert len(native._lexgion_simulate(path, "f", "a.py", "myapp.core", 0, 200)) == 100
    assert native._lexgion_simulate(path, "f", "a.py", "myapp.vendored.x", 0, 200) == []


@pytest.mark.parametrize(
    ("events", "mask"),
    [
        ("function", PY_EVENTS),
        ("c_call", C_EVENTS),
        ("function, c_call", ALL_EVENTS),
        ("function_begin, c_call_end", ["pysysmon_py_start", "pysysmon_c_return"]),
        ("all", [*ALL_EVENTS, "pysysmon_import"]),
        ("none", []),
        ("pysysmon_py_start", ["pysysmon_py_start"]),
        ("function, import", [*PY_EVENTS, "pysysmon_import"]),
        ("import, alloc", ["pysysmon_import", "alloc"]),
        ("function, c_call, gil", [*ALL_EVENTS, "gil"]),
    ],
)
def test_design_events_list(events: str, mask: List[str]) -> None:
    assert parse(f"[Python]\nevents = {events}\n")["events"] == mask


@pytest.mark.parametrize(
    ("value", "size"),
    [("524288", 524288), ("64KiB", 65536), ("64 KB", 65536), ("1M", 1 << 20),
     ("2 GiB", 2 << 30), ("1b", 1)],
)
def test_alloc_sample_interval_sizes(value: str, size: int) -> None:
    assert parse(f"[Python]\nalloc_sample_interval = {value}\n")["alloc_sample_interval"] == size
    assert parse("[Python]\n")["alloc_sample_interval"] == 512 * 1024


@pytest.mark.parametrize("value", ["0", "-64KiB", "abc", "64 XB", "", "1.5M", "0KiB"])
def test_alloc_sample_interval_errors(value: str) -> None:
    assert errors(f"[Python]\n\nalloc_sample_interval = {value}\n") == [
        "cfg.txt:3: alloc_sample_interval: expected a size in bytes > 0 such as 524288, "
        f"512KiB or 1MiB, got '{value}'"
    ]


@pytest.mark.parametrize(
    ("module", "selected"),
    [
        ("numpy", True),
        ("numpy.linalg", True),
        ("numpy.linalg.lapack_lite", True),
        ("numpyx", False),
        ("num", False),
        ("numpy.testing", False),
        ("numpy.testing.utils", False),
        ("numpy.testingx", True),
        ("app", True),
        ("scipy", False),
        ("", False),
    ],
)
def test_module_filter_and_exclude(module: str, selected: bool) -> None:
    text = """
        [Python.default]
            module_filter = numpy, app
            module_exclude = numpy.testing
        """
    result = detail(text, module=module)
    assert result["module_selected"] is selected
    assert result["traced"] == (list(range(100)) if selected else [])


def test_module_lists_accumulate_over_lines_and_sections() -> None:
    text = """
        [Python]
            module_filter = a, b
        [Python.default]
            module_filter = c.d, a
            module_exclude = b.x
        """
    config = parse(text)
    assert config["module_filter"] == ["a", "b", "c.d"]
    assert config["module_exclude"] == ["b.x"]
    assert detail("[Python]\nmodule_exclude = numpy\n", module="numpy.fft")["traced"] == []
    assert len(traced("[Python]\nmodule_exclude = numpy\n", module="scipy")) == 100


# ---------------------------------------------------------------------------
# Inheritance is a snapshot, as in PInsight


def test_named_lexgion_snapshots_lexgion_default() -> None:
    text = """
        [Lexgion.default]
            tracing_rate = 2
        [Lexgion(Python:early)]
            trace_starts_at = 1
        [Lexgion.default]
            tracing_rate = 3
            max_num_traces = 4
        [Lexgion(Python:late)]
        """
    config = parse(text)
    early, late = config["lexgions"]
    assert (early["tracing_rate"], early["max_num_traces"], early["trace_starts_at"]) == (2, -1, 1)
    assert (late["tracing_rate"], late["max_num_traces"]) == (3, 4)
    # Named sections keep their own settings: [Lexgion(Python).default] does not apply.
    text = """
        [Lexgion(Python).default]
            max_num_traces = 0
        [Lexgion(Python:f)]
            tracing_rate = 2
        """
    assert traced(text, "f", n=10) == [1, 3, 5, 7, 9]
    assert traced(text, "g", n=10) == []


def test_inheriting_python_default_snapshots_its_events() -> None:
    text = """
        [Python.default]
            pysysmon_c_start = off
        [Lexgion(Python:f)] : Python.default
        [Python.default]
            pysysmon_c_start = on
            pysysmon_py_return = off
        [Lexgion(Python:g)]
        """
    config = parse(text)
    f_section, g_section = config["lexgions"]
    assert f_section["events"] == ["pysysmon_py_start", "pysysmon_py_return", "pysysmon_c_return"]
    assert g_section["events"] is None  # follows the domain (and thread sections)
    assert detail(text, "g")["events"] == ["pysysmon_py_start", *C_EVENTS]


# ---------------------------------------------------------------------------
# Other domains' sections are skipped silently


def test_other_domains_are_ignored_without_warnings() -> None:
    text = """
        [OpenMP.default]
            trace_mode = TRACING
            omp_task_create = off
        [OpenMP]
            trace_mode = TRACING
            max_num_traces = 100
        [RESET OpenMP.default]
        [REMOVE MPI.rank(*)]
        [CUDA.device(0)]: CUDA.default
        [HIP.default]
            device_activity = leader_per_node
        [Energy]
            measure = on
        [Manifest]
            interval = 10
        [Knob]
            anything = goes
        [Lexgion(OpenMP).default]
            omp_thread_begin = on
        [Lexgion(MPI).default]
            max_num_traces = 3
        [Lexgion(0x400500, 0x400600, 0x400700)]
            max_num_traces = 100
        [Lexgion(0x500000): OpenMP.default]
            OpenMP.omp_task_schedule = off
        [Lexgion(CUDA:vecadd)]
            max_num_traces = 1
        [0x401234]
            trace_starts_at = 10
        """
    config = parse(text)
    assert config["warnings"] == []
    assert config["mode"] == "TRACING" and config["lexgions"] == []
    assert traced(text) == list(range(100))


def test_pinsight_qualified_event_keys_in_shared_lexgion_sections() -> None:
    text = """
        [Lexgion(Python:f)]: Python.default
            OpenMP.omp_thread_begin = on
            Python.pysysmon_c_start = off
        """
    config = parse(text)
    assert config["warnings"] == []
    assert config["lexgions"][0]["events"] == [*PY_EVENTS, "pysysmon_c_return"]


# ---------------------------------------------------------------------------
# Text handling


def test_comments_indentation_crlf_bom_and_colon_separator() -> None:
    text = (
        "\ufeff; leading comment\r\n"
        "   # indented comment\r\n"
        "  [Lexgion(Python:f)]   # trailing comment\r\n"
        "\tmax_num_traces: 4 ; inline comment\r\n"
        "      tracing_rate = 2#not a comment start, so an error\r\n"
    )
    with pytest.raises(ValueError) as caught:
        native._parse_config_string(text, "cfg.txt")
    assert str(caught.value) == (
        "cfg.txt:5: tracing_rate: expected an integer >= 1, got '2#not a comment start, so an "
        "error'"
    )
    config = native._parse_config_string(text.replace("2#not", "2 #not"), "cfg.txt")
    (named,) = config["lexgions"]
    assert (named["max_num_traces"], named["tracing_rate"], named["line"]) == (4, 2, 3)
    assert native._parse_config_string("[Python.default]\ntrace_mode = OFF", "x")["mode"] == "OFF"


def test_long_lines_keys_and_names() -> None:
    qualname = "Outer." + ".".join(f"level{i}" for i in range(60)) + ".method"
    modules = ", ".join(f"package{i}.module{i}" for i in range(40))
    long_key = "k" * 120
    label = f"Lexgion(Python:{'d/' * 40}file.py:{qualname})"
    text = (
        f"[{label}] : Python.default : Python.thread(0)\n"
        "    max_num_traces = 3\n"
        f"    {long_key} = {'v' * 300}\n"
        "[Python.default]\n"
        f"    module_filter = {modules}\n"
    )
    assert len(qualname) > 300 and len(modules) > 600
    config = native._parse_config_string(text, "cfg.txt")
    (named,) = config["lexgions"]
    assert named["qualname"] == qualname and named["file"] == "d/" * 40 + "file.py"
    assert named["max_num_traces"] == 3
    assert len(config["module_filter"]) == 40
    assert config["warnings"] == [
        f"cfg.txt:3: unknown key '{'k' * 60}...' in [{label[:60]}...]: ignored"
    ]
    filename = "/r/" + "d/" * 40 + "file.py"
    assert native._lexgion_simulate(text, qualname, filename, "package3.module3.x", 0, 10) == [
        0,
        1,
        2,
    ]


def test_unicode_qualnames() -> None:
    text = "[Lexgion(Python:Données.calculer)]\nmax_num_traces = 2\n"
    assert parse(text)["lexgions"][0]["qualname"] == "Données.calculer"
    assert traced(text, "Données.calculer") == [0, 1]


# ---------------------------------------------------------------------------
# Errors: one per problem, with file, line and what was expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[Lexgion.default]\n    max_num_traces = abc\n",
            "cfg.txt:2: max_num_traces: expected an integer >= -1, got 'abc'",
        ),
        (
            "[Lexgion.default]\n    max_num_traces = -2\n",
            "cfg.txt:2: max_num_traces: expected an integer >= -1, got '-2'",
        ),
        (
            "[Lexgion.default]\nmax_num_traces = 99999999999999999999999\n",
            "cfg.txt:2: max_num_traces: expected an integer >= -1, got '99999999999999999999999'",
        ),
        (
            "[Lexgion.default]\ntracing_rate = 0\n",
            "cfg.txt:2: tracing_rate: expected an integer >= 1, got '0'",
        ),
        (
            "[Lexgion(Python).default]\ntrace_starts_at = 1.5\n",
            "cfg.txt:2: trace_starts_at: expected an integer >= 0, got '1.5'",
        ),
        (
            "[Lexgion(Python:f)]\ntrace_starts_at =\n",
            "cfg.txt:2: trace_starts_at: expected an integer >= 0, got ''",
        ),
        (
            "# mode\n\n[Python.default]\n    trace_mode = TRACE\n",
            "cfg.txt:4: unknown trace_mode 'TRACE' (expected OFF, STANDBY, MONITORING or TRACING)",
        ),
        (
            "[Python.default\n    trace_mode = OFF\n",
            "cfg.txt:1: unterminated section header: expected ']' in '[Python.default'",
        ),
        (
            "[Python.team(0)]\n",
            "cfg.txt:1: unknown Python punit kind 'team' in [Python.team(0)] "
            "(expected Python.thread(ids))",
        ),
        (
            "[Python.foo]\n",
            "cfg.txt:1: unknown section kind for Python: [Python.foo] "
            "(expected Python.default, Python.thread(ids) or Python.punit.thread)",
        ),
        (
            "[Python.punit.team]\n",
            "cfg.txt:1: unknown Python punit kind 'team' in [Python.punit.team] "
            "(expected Python.punit.thread)",
        ),
        (
            "[Python.thread(2-1)]\n",
            "cfg.txt:1: expected thread ids such as 0-3 or 0, 2, 5-7 in 'Python.thread(2-1)', "
            "got '2-1'",
        ),
        (
            "[Python.thread()]\n",
            "cfg.txt:1: expected thread ids such as 0-3 or 0, 2, 5-7 in 'Python.thread()', got ''",
        ),
        (
            "[Lexgion(Python:f)] : Python.thread(1-2)\n",
            "cfg.txt:1: expected Domain.default in the inheritance part, got "
            "'Python.thread(1-2)' (punit constraints go after a second ':', as in "
            "[X] : Python.default : Python.thread(1-2))",
        ),
        (
            "[Lexgion(Python:f)] junk\n",
            "cfg.txt:1: unexpected 'junk' after ']' (expected [Target] : Inheritance : PunitSet)",
        ),
        (
            "[Lexgion(Python:f)] : Python.default : Python.thread(0) : x\n",
            "cfg.txt:1: too many ':' after ']' (expected [Target] : Inheritance : PunitSet)",
        ),
        (
            "[Lexgion(Python:f)] : Python.default : Python.thread(1-x)\n",
            "cfg.txt:1: expected thread ids such as 0-3 or 0, 2, 5-7 in 'Python.thread(1-x)', "
            "got '1-x'",
        ),
        (
            "[Lexgion(Python:f)] : Python.default : Python.thread(1) MPI.rank(0)\n",
            "cfg.txt:1: expected ',' after 'Python.thread(1)' in the PunitSet part",
        ),
        (
            "[Lexgion(Python:f)] : : thread(1)\n",
            "cfg.txt:1: expected punit sets such as Python.thread(0-3) in the PunitSet part, "
            "got 'thread(1)'",
        ),
        (
            "[Lexgion(Python:f)] : : Python.core(1)\n",
            "cfg.txt:1: unknown Python punit kind 'core' in the PunitSet part "
            "(expected Python.thread(ids))",
        ),
        ("[Lexgion(Python:f]\n", "cfg.txt:1: missing ')' in section header [Lexgion(Python:f]"),
        (
            "[Lexgion(Python:)]\n",
            "cfg.txt:1: empty function name in 'Python:' of [Lexgion(Python:)]",
        ),
        ("[Lexgion(:f)]\n", "cfg.txt:1: empty file name in ':f' of [Lexgion(:f)]"),
        ("[Lexgion()]\n", "cfg.txt:1: empty name list in [Lexgion()]"),
        (
            "[Lexgion]\n",
            "cfg.txt:1: unknown Lexgion section [Lexgion] (expected Lexgion.default, "
            "Lexgion(Python).default or Lexgion(Python:name, ...))",
        ),
        (
            "[Lexgion(Python:f).foo]\n",
            "cfg.txt:1: unexpected '.foo' after Lexgion(...) in [Lexgion(Python:f).foo]",
        ),
        ("[ ]\n", "cfg.txt:1: empty section header '[ ]'"),
        (
            "[Python.default]\n    garbage here\n",
            "cfg.txt:2: expected 'key = value' or a [section] header, got 'garbage here'",
        ),
        ("[Python.default]\n= on\n", "cfg.txt:2: missing key before '='"),
        (
            "[Python.default]\npysysmon_c_start = maybe\n",
            "cfg.txt:2: pysysmon_c_start: expected on or off (or true/false, 1/0), got 'maybe'",
        ),
        (
            "[Lexgion(Python:f)]\nPython.pysysmon_c_start = yes\n",
            "cfg.txt:2: Python.pysysmon_c_start: expected on or off (or true/false, 1/0), "
            "got 'yes'",
        ),
        (
            "[Python.default]\nPython.thread = (0-x)\n",
            "cfg.txt:2: Python.thread: expected a thread range such as (0-3) or (0, 2, 5-7), "
            "got '(0-x)'",
        ),
        (
            "[Python.default]\nPython.thread = (-1)\n",
            "cfg.txt:2: Python.thread: expected a thread range such as (0-3) or (0, 2, 5-7), "
            "got '(-1)'",
        ),
        (
            "[Python.punit.thread]\nrange = 5-2\n",
            "cfg.txt:2: range: expected a thread range such as 0-3 or 0, 2, 5-7, got '5-2'",
        ),
        (
            "[Python]\nevents = function, bogus\n",
            "cfg.txt:2: events: unknown event 'bogus' (expected function, c_call, import, alloc, "
            "gil, function_begin, function_end, c_call_begin, c_call_end, all or none)",
        ),
        (
            "[Python]\nmodule_filter = numpy, bad name\n",
            "cfg.txt:2: module_filter: expected module names such as numpy or numpy.linalg, "
            "got 'bad name' (a name matches the module and its submodules; no wildcards)",
        ),
        (
            "[Python]\nmodule_exclude = numpy.*\n",
            "cfg.txt:2: module_exclude: expected module names such as numpy or numpy.linalg, "
            "got 'numpy.*' (a name matches the module and its submodules; no wildcards)",
        ),
        (
            "[Lexgion.default]\nwindow_end_action = SLEEP\n",
            "cfg.txt:2: window_end_action: unknown mode 'SLEEP' "
            "(expected OFF, STANDBY, MONITORING or TRACING)",
        ),
        (
            "[Lexgion.default]\ntrace_mode_after = Python:FAST, OpenMP:OFF\n",
            "cfg.txt:2: trace_mode_after: unknown mode 'FAST' "
            "(expected OFF, STANDBY, MONITORING or TRACING)",
        ),
        (
            "[Lexgion.default]\nwindow_end_action = INTROSPECT:soon:x.sh\n",
            "cfg.txt:2: window_end_action: expected INTROSPECT:pause:script[:modes] with a pause "
            "in seconds (0: none, -1: until SIGUSR1) and a script ('-': none), "
            "got 'INTROSPECT:soon:x.sh'",
        ),
        (
            "[Lexgion.default]\nwindow_end_action = INTROSPECT:5\n",
            "cfg.txt:2: window_end_action: expected INTROSPECT:pause:script[:modes] with a pause "
            "in seconds (0: none, -1: until SIGUSR1) and a script ('-': none), "
            "got 'INTROSPECT:5'",
        ),
        (
            "[Lexgion.default]\nwindow_end_action =\n",
            "cfg.txt:2: window_end_action: expected a mode (OFF, STANDBY, MONITORING or "
            "TRACING), a Domain:MODE list or INTROSPECT:pause:script[:modes], got ''",
        ),
        (
            "[Lexgion.default]\nwindow_timeout = soon\n",
            "cfg.txt:2: window_timeout: expected a number of seconds, got 'soon'",
        ),
        (
            "[Lexgion.default]\nwindow_timeout = inf\n",
            "cfg.txt:2: window_timeout: expected a number of seconds, got 'inf'",
        ),
        ("[Python]\ntrace_mode = \x01ON\n", "cfg.txt:2: unexpected control character '\\x01'"),
    ],
)
def test_error_messages(text: str, message: str) -> None:
    assert errors(text) == [message]


def test_binary_content_errors() -> None:
    with pytest.raises(ValueError) as caught:
        native._parse_config_string("[Python]\ntrace\x00_mode = OFF\n", "cfg.txt")
    assert str(caught.value) == "cfg.txt:2: unexpected NUL byte: the file is not text"


def test_invalid_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"[Lexgion(Python:caf\xe9)]\nmax_num_traces = 1\n")
    with pytest.raises(ValueError) as caught:
        native._parse_config(str(path))
    assert str(caught.value) == f"{path}:1: the line is not valid UTF-8 text"


def test_other_domains_content_and_comments_are_not_judged(tmp_path: Path) -> None:
    path = tmp_path / "mixed.txt"
    path.write_bytes(
        b"# caf\xe9 (Latin-1) in a comment\n"
        b"[OpenMP.default]\n"
        b"    omp_task_create = off \xff\x01\n"
        b"[Python.default]\n"
        b"    trace_mode = MONITORING ; \xe9t\xe9\n"
    )
    config = native._parse_config(str(path))
    assert config["mode"] == "MONITORING" and config["warnings"] == []


def test_every_problem_of_a_file_is_reported() -> None:
    path = TEST_CONFIGS / "errors.txt"
    with pytest.raises(ValueError) as caught:
        native._parse_config(str(path))
    assert str(caught.value).splitlines() == [
        f"{path}:3: unknown trace_mode 'TRACE' (expected OFF, STANDBY, MONITORING or TRACING)",
        f"{path}:4: pysysmon_c_start: expected on or off (or true/false, 1/0), got 'maybe'",
        f"{path}:7: max_num_traces: expected an integer >= -1, got 'abc'",
        f"{path}:8: tracing_rate: expected an integer >= 1, got '0'",
        f"{path}:9: expected 'key = value' or a [section] header, "
        "got 'this line has no equals sign'",
        f"{path}:11: expected thread ids such as 0-3 or 0, 2, 5-7 in 'Python.thread(2-1)', "
        "got '2-1'",
        f"{path}:14: expected Domain.default in the inheritance part, got 'Python.thread(1-2)' "
        "(punit constraints go after a second ':', as in [X] : Python.default : "
        "Python.thread(1-2))",
        f"{path}:17: unterminated section header: expected ']' in '[Lexgion(Python:g)'",
    ]


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(ValueError) as caught:
        native._parse_config(str(missing))
    assert str(caught.value) == f"{missing}: cannot open the file: No such file or directory"
    with pytest.raises(ValueError) as caught:
        native._parse_config(str(tmp_path))
    assert str(caught.value) == f"{tmp_path}: is a directory, not a configuration file"
    # A FIFO is refused without opening it for reading (which would wait for a writer).
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError) as caught:
        native._parse_config(str(fifo))
    assert "not a regular file (a FIFO or a device): refused" in str(caught.value)
    with pytest.raises(ValueError) as caught:
        native._lexgion_simulate(missing, "f")
    assert "cannot open the file" in str(caught.value)


# ---------------------------------------------------------------------------
# Warnings: unknown keys and sections, unsupported or invalid requests


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[Python.default]\nfoo = 1\n",
            "cfg.txt:2: unknown key 'foo' in [Python.default]: ignored",
        ),
        (
            "[Python]\nmax_num_traces = 5\n",
            "cfg.txt:2: 'max_num_traces' belongs in a [Lexgion...] section such as "
            "[Lexgion.default]: ignored in [Python]",
        ),
        (
            "[Python.default]\nPython.team = (0)\n",
            "cfg.txt:2: unknown Python punit kind 'team' in [Python.default] "
            "(expected Python.thread): ignored",
        ),
        (
            "[Python.default]\nOpenMP.thread = (0-3)\n",
            "cfg.txt:2: 'OpenMP.thread' does not belong in [Python.default]: ignored",
        ),
        (
            "[Lexgion(Python:f)]\nmax_traces = 5\n",
            "cfg.txt:2: unknown key 'max_traces' in [Lexgion(Python:f)]: ignored",
        ),
        (
            "[Lexgion.default]\nomp_task_create = on\n",
            "cfg.txt:2: unknown key 'omp_task_create' in [Lexgion.default]: ignored",
        ),
        (
            "[Python.thread(0)]\ntrace_mode = OFF\n",
            "cfg.txt:2: trace_mode is domain-wide: set it in [Python.default]; "
            "ignored in [Python.thread(0)]",
        ),
        (
            "[Lexgion(Python).default]\ntrace_mode = OFF\n",
            "cfg.txt:2: trace_mode is domain-wide: set it in [Python.default]; "
            "ignored in [Lexgion(Python).default]",
        ),
        (
            "[Python.punit.thread]\nlow = 0\n",
            "cfg.txt:2: unknown key 'low' in [Python.punit.thread] (expected range): ignored",
        ),
        ("max_num_traces = 5\n", "cfg.txt:1: key 'max_num_traces' is outside any section: ignored"),
        ("[Pyhton.default]\n", "cfg.txt:1: unknown section [Pyhton.default]: ignored"),
        (
            "[python.default]\ntrace_mode = OFF\n",
            "cfg.txt:1: unknown section [python.default]: ignored "
            "(section names are case-sensitive)",
        ),
        (
            "[REMOVE Python.default]\n",
            "cfg.txt:1: REMOVE is not valid for this section (use RESET): "
            "[REMOVE Python.default] ignored",
        ),
        (
            "[REMOVE Lexgion.default]\n",
            "cfg.txt:1: REMOVE is not valid for this section (use RESET): "
            "[REMOVE Lexgion.default] ignored",
        ),
        (
            "[RESET Lexgion(Python:f)]\n",
            "cfg.txt:1: RESET is not valid for this section (use REMOVE): "
            "[RESET Lexgion(Python:f)] ignored",
        ),
        (
            "[RESET Python.thread(0)]\n",
            "cfg.txt:1: RESET is not valid for this section (use REMOVE): "
            "[RESET Python.thread(0)] ignored",
        ),
        (
            "[Python.thread(*)]\n",
            "cfg.txt:1: Python.thread(*) is only valid with REMOVE: [Python.thread(*)] ignored",
        ),
        (
            "[REMOVE Python.punit.thread]\n",
            "cfg.txt:1: REMOVE is not valid for this section (set its range instead): "
            "[REMOVE Python.punit.thread] ignored",
        ),
        (
            "[RESET Lexgion.default]\nmax_num_traces = 5\n",
            "cfg.txt:2: key 'max_num_traces' ignored: [RESET Lexgion.default] takes no keys",
        ),
        (
            "[REMOVE Lexgion(Python:ghost)]\n",
            "cfg.txt:1: no [Lexgion(Python:ghost)] section above: nothing to remove",
        ),
        ("[REMOVE Python.thread(*)]\n", "cfg.txt:1: no [Python.thread(...)] section to remove"),
        (
            "[Lexgion(Python:f)] : Python.default : Python.thread(1), MPI.rank(0)\n",
            "cfg.txt:1: punit constraint 'MPI.rank(0)' cannot be checked by pinsight-python: "
            "ignored, the section applies to every MPI rank",
        ),
        (
            "[Lexgion(Python:f)] : : Foo.bar(0)\n",
            "cfg.txt:1: unknown domain 'Foo' in 'Foo.bar(0)': ignored",
        ),
        (
            "[Lexgion(Python).default] : : Python.thread(0)\n",
            "cfg.txt:1: default lexgion sections take no punit constraint: the PunitSet part of "
            "[Lexgion(Python).default] is ignored",
        ),
        (
            "[Python.default] : Python.default\n",
            "cfg.txt:1: [Python.default] does not inherit: the inheritance part of "
            "[Python.default] is ignored",
        ),
        (
            "[Lexgion(Python:f)] : Foo.default\n",
            "cfg.txt:1: unknown inheritance 'Foo.default' (expected Domain.default): ignored",
        ),
        (
            "[Lexgion(Foo).default]\nmax_num_traces = 1\n",
            "cfg.txt:1: unknown domain 'Foo' in [Lexgion(Foo).default]: section ignored",
        ),
        (
            "[Lexgion(Foo:file.py:f)]\n",
            "cfg.txt:1: unknown domain 'Foo' in 'Foo:file.py:f': ignored",
        ),
        (
            "[Lexgion(Python)]\n",
            "cfg.txt:1: [Lexgion(Python)] names a function called 'Python'; "
            "the domain's default is [Lexgion(Python).default]",
        ),
        (
            "[Lexgion.default]\nwindow_end_action = Foo:OFF, Python:OFF\n",
            "cfg.txt:2: window_end_action: unknown domain 'Foo': ignored",
        ),
        (
            "[Lexgion.default]\nwindow_end_action = Python:device_activity=off\n",
            "cfg.txt:2: window_end_action: Python has no device_activity: "
            "'Python:device_activity=off' ignored",
        ),
        (
            "[Lexgion.default]\nwindow_end_trigger = anchor\n",
            "cfg.txt:2: window_end_trigger = anchor is not supported yet: the window ends when "
            "the first lexgion reaches max_num_traces (first)",
        ),
    ],
)
def test_warning_messages(text: str, message: str) -> None:
    assert warnings(text) == [message]


def test_mpi_constraint_is_ignored_not_applied() -> None:
    text = "[Lexgion(Python:f)] : : Python.thread(1), MPI.rank(0)\nmax_num_traces = 2\n"
    assert traced(text, thread=1) == [0, 1]
    assert traced(text, thread=0) == []


# ---------------------------------------------------------------------------
# The example configurations shipped in config/


def example(name: str) -> Dict[str, Any]:
    return native._parse_config(str(EXAMPLE_CONFIGS / name))


def test_example_configs_parse_cleanly() -> None:
    names = sorted(p.name for p in EXAMPLE_CONFIGS.glob("*.txt"))
    assert names == [
        "named_lexgions.txt",
        "pinsight_trace_config.txt",
        "python_functions_only.txt",
        "rate_limited.txt",
    ]
    for name in names:
        assert example(name)["warnings"] == [], name


def test_example_python_functions_only() -> None:
    config = example("python_functions_only.txt")
    assert config["events"] == PY_EVENTS and config["events_possible"] == PY_EVENTS
    path = EXAMPLE_CONFIGS / "python_functions_only.txt"
    assert native._lexgion_simulate(path, "f", n_calls=1000) == list(range(1000))


def test_example_rate_limited() -> None:
    path = EXAMPLE_CONFIGS / "rate_limited.txt"
    result = native._lexgion_simulate_detail(path, "f", n_calls=5000)
    assert result["traced"] == list(range(10, 1010, 10))
    assert result["mode_after"] == "MONITORING"


def test_example_named_lexgions() -> None:
    path = EXAMPLE_CONFIGS / "named_lexgions.txt"

    def run(qualname: str, filename: str, thread: int = 0) -> Dict[str, Any]:
        return native._lexgion_simulate_detail(path, qualname, filename, "m", thread, 200)

    assert run("Solver.step", "/p/solver.py")["traced"] == list(range(20))
    assert run("Solver.step", "/p/other.py")["traced"] == list(range(100))
    solver_run = run("Solver.run", "/p/solver.py")
    assert solver_run["traced"] == [0] and solver_run["events"] == ALL_EVENTS
    assert run("log_debug", "/p/util.py")["never_traced"]
    assert run("Logger.debug", "/p/util.py")["traced"] == []
    assert run("helper", "/p/util.py")["traced"] == expected(200, 0, 10, 5)
    assert run("worker", "/p/w.py", thread=2)["traced"] == list(range(5))
    assert run("worker", "/p/w.py", thread=0)["traced"] == []
    unnamed = run("anything", "/p/a.py")
    assert unnamed["traced"] == list(range(100)) and unnamed["events"] == PY_EVENTS


def test_example_full_featured() -> None:
    config = example("pinsight_trace_config.txt")
    assert config["mode"] == "TRACING" and config["events"] == ALL_EVENTS
    assert config["module_filter"] == [] and config["module_exclude"] == []
    path = EXAMPLE_CONFIGS / "pinsight_trace_config.txt"
    assert native._lexgion_simulate(path, "f", "/p/app.py", "app", 3, 1000) == list(range(200))
    assert native._lexgion_simulate(path, "main", "/p/app.py", "app", 0, 1000) == [0]


# ---------------------------------------------------------------------------
# Garbage in: errors or warnings, never a crash

KNOWN_EVENTS = {*ALL_EVENTS, "pysysmon_import", "alloc", "gil"}
MODE_NAMES = {"OFF", "STANDBY", "MONITORING", "TRACING"}
MODULE_NAME = re.compile(r"[^\W.][\w]*(\.[^\W.][\w]*)*")
# Every error says what is wrong in one of these ways (what it expected, what it does
# not know, what is missing, unexpected or not valid).
SAYS_WHAT_IS_WRONG = re.compile(r"expected|unknown|missing|unterminated|not valid")


def diagnostic_lines(lines: List[str], name: str, text: str) -> None:
    """Each line names the file and a line of it, then what is wrong there."""
    last_line = text.count("\n") + 1
    for line in lines:
        m = re.fullmatch(re.escape(name) + r":(\d+): (.+)", line)
        assert m, f"not FILE:LINE: MESSAGE: {line!r}"
        assert 1 <= int(m.group(1)) <= last_line, f"line out of the file's range: {line!r}"


def check_parsed(config: Dict[str, Any], name: str, text: str) -> None:
    """What a parsed configuration must satisfy, whatever the text was."""
    assert config["path"] == name
    assert config["mode"] in MODE_NAMES
    assert set(config["events"]) <= KNOWN_EVENTS
    assert set(config["events_possible"]) <= KNOWN_EVENTS
    assert config["payload"] in {"full", "compact"}
    assert config["alloc_sample_interval"] > 0
    for module in config["module_filter"] + config["module_exclude"]:
        assert MODULE_NAME.fullmatch(module), module
    assert config["threads"] is None or all(0 <= lo <= hi for lo, hi in config["threads"])
    diagnostic_lines(config["warnings"], name, text)
    for lexgion in config["lexgions"]:
        result = native._lexgion_simulate_detail(
            text, lexgion["qualname"], "/x/" + (lexgion["file"] or "m.py"), "m", 1, 30
        )
        assert all(0 <= i < 30 for i in result["traced"])


def check_refused(error: ValueError, name: str, text: str) -> None:
    lines = str(error).splitlines()
    assert lines, "an error without a message"
    diagnostic_lines(lines, name, text)
    for line in lines:
        assert SAYS_WHAT_IS_WRONG.search(line.split(": ", 1)[1]), line


def fuzz_cases(rng: random.Random) -> List[bytes]:
    """Truncations and random edits of every configuration we have, and random bytes."""
    corpus = [p.read_bytes() for p in sorted(TEST_CONFIGS.glob("*.txt"))]
    corpus += [p.read_bytes() for p in sorted(EXAMPLE_CONFIGS.glob("*.txt"))]
    corpus.append(textwrap.dedent(PER_THREAD_WORKERS).encode())
    corpus.append(textwrap.dedent(NAMED_SYNTAX).encode())
    alphabet = b"[]():,=#;.-*\n\t 0123456789abcxyzPythonLexgiondefault\\\x00\xff\xc3\xa9"
    cases: List[bytes] = []
    for source in corpus:
        cases += [source[:cut] for cut in range(0, len(source), max(1, len(source) // 40))]
        cases += [mutated(source, rng, alphabet) for _ in range(40)]
    for _ in range(300):
        cases.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 600))))
        cases.append(bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 600))))
    return cases


def mutated(source: bytes, rng: random.Random, alphabet: bytes) -> bytes:
    """1 to 8 random edits: a byte replaced, a run deleted, a run inserted."""
    data = bytearray(source)
    for _ in range(rng.randint(1, 8)):
        if not data:
            break
        at = rng.randrange(len(data))
        choice = rng.random()
        if choice < 0.4:
            data[at] = rng.choice(alphabet)
        elif choice < 0.7:
            del data[at : at + rng.randint(1, 20)]
        else:
            data[at:at] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
    return bytes(data)


def test_fuzz_random_bytes_and_truncations() -> None:
    outcomes = collections.Counter()
    for data in fuzz_cases(random.Random(20240605)):
        text = data.decode("utf-8", "replace")
        try:
            config = native._parse_config_string(text, "fuzz.txt")
        except ValueError as error:
            check_refused(error, "fuzz.txt", text)
            outcomes["refused"] += 1
        else:
            check_parsed(config, "fuzz.txt", text)
            outcomes["parsed"] += 1
    # Both paths are exercised, each on many cases.
    assert outcomes["parsed"] > 100 and outcomes["refused"] > 100, outcomes


def test_fuzz_raw_bytes_files(tmp_path: Path) -> None:
    rng = random.Random(7)
    path = tmp_path / "garbage.txt"
    outcomes = collections.Counter()
    for _ in range(200):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 2000)))
        path.write_bytes(data)
        # What the parser sees of the bytes, for the range of line numbers.
        text = data.decode("utf-8", "replace")
        try:
            config = native._parse_config(str(path))
        except ValueError as error:
            check_refused(error, str(path), text)
            outcomes["refused"] += 1
        else:
            check_parsed(config, str(path), text)
            outcomes["parsed"] += 1
    # Random bytes hold a NUL or a control character all but always: refused; the
    # empty file (length 0) parses.
    assert outcomes["refused"] > 150, outcomes


def test_product_module_has_no_test_hooks(tmp_path: Path) -> None:
    from pinsight_python import _pinsight_python as product

    hooks = {name for name in dir(native) if not name.startswith("__")}
    assert hooks and not hooks & set(dir(product)), "test hooks belong in the test module"
    good = tmp_path / "good.txt"
    good.write_text("[Python.default]\ntrace_mode = MONITORING\nfrobnicate = 1\n")
    assert product.check_config(str(good)) == native._parse_config(str(good))["warnings"]


def test_the_keys_left_to_libpinsight_are_noted(tmp_path: Path) -> None:
    # What `trace --domains cuda` asks of a configuration (recording/run/plan.py): the
    # keys of PInsight's other domains' and services' sections, unjudged, by section.
    from pinsight_python import _pinsight_python as product

    path = tmp_path / "cfg.txt"
    path.write_text(textwrap.dedent("""\
        [Python.default]
        trace_mode = TRACING
        [CUDA.default]
          device_activity = on   # libpinsight.so's
        [OpenMP.default]
        trace_mode: OFF
        [Lexgion(CUDA).default]
        max_num_traces = 3
        [Knob]
        rate = 1
        """))
    assert product.native_keys(str(path)) == {
        "CUDA.default": ["device_activity"], "OpenMP.default": ["trace_mode"],
        "Lexgion(CUDA).default": ["max_num_traces"], "Knob": ["rate"]}
    assert product.native_keys(str(tmp_path / "missing.txt")) == {}
