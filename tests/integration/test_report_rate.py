"""Rate control shown in the results (issue 34, point 4): a capped or sampled
function's row says how many of its calls were traced, the report lists the
mode changes (a window's end) and the configuration in force, in every payload."""

from __future__ import annotations

import contextlib
import io
import textwrap
from pathlib import Path
from typing import Any, Dict

import pytest

from pinsight_python import cli as cli_module
from tests.tracing import Run, Tracer, report_json

HOT_COLD = """
def hot(i):
    return i

def cold(i):
    return i

def main():
    for i in range(5000):
        hot(i)
    for i in range(50):
        cold(i)

main()
"""

CALL_100 = """
def hot(i):
    return i

def main():
    for i in range(100):
        hot(i)

main()
"""


def run_with_config(tracer: Tracer, tmp_path: Path, config: str, code: str,
                    payload: str = "full") -> tuple[Run, Path]:
    cfg = tmp_path / f"cfg{tracer.counter + 1}.txt"
    cfg.write_text(textwrap.dedent(config))
    run = tracer.run(
        code, activate=f"pinsight_python.activate(config={str(cfg)!r}, payload={payload!r})")
    return run, cfg


def trace_dir(tracer: Tracer) -> Path:
    return tracer.tmp_path / f"trace{tracer.counter}"


def report_text(path: Path) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_module.main(["report", str(path)])
    assert code == 0, err.getvalue()
    return out.getvalue()


def function_row(proc: Dict[str, Any], name: str) -> Dict[str, Any]:
    rows = [r for r in proc["functions"] if r["qualname"] == name]
    assert len(rows) == 1, [r["qualname"] for r in proc["functions"]]
    return rows[0]


def main_process(report: Dict[str, Any]) -> Dict[str, Any]:
    procs = [p for p in report["processes"] if any(r["qualname"] == "main"
                                                   for r in p["functions"])]
    assert len(procs) == 1
    return procs[0]


@pytest.mark.parametrize("payload", ["full", "compact", "batched"])
def test_capped_function_is_marked(tracer: Tracer, tmp_path: Path, payload: str) -> None:
    run, cfg = run_with_config(tracer, tmp_path, """
        [Lexgion(Python:hot)]
            max_num_traces = 10
        """, HOT_COLD, payload)
    assert run.trace.named("lexgion_counts")
    path = trace_dir(tracer)
    proc = main_process(report_json(path, "--top", "0"))
    hot = function_row(proc, "hot")
    assert hot["calls"] == 10
    rate = hot["rate"]
    assert rate["capped"] and rate["traced"] == 10
    assert rate["seen"] >= 10
    assert rate["max_num_traces"] == 10
    assert rate["section"] == "Lexgion(Python:hot)"
    cold = function_row(proc, "cold")
    assert cold["calls"] == 50 and cold["rate"] is None
    assert [r["qualname"] for r in proc["rate_controlled"]] == ["hot"]
    assert proc["config"]["path"] == str(cfg)
    first = proc["mode_changes"][0]
    assert (first["mode"], first["reason"]) == ("TRACING", "activate")

    text = report_text(path)
    assert "rate control" in text and "capped 10/" in text
    assert f"Configuration: {cfg}" in text
    assert "callers includes the untraced calls" in text


def test_sampled_counts_are_exact(tracer: Tracer, tmp_path: Path) -> None:
    run_with_config(tracer, tmp_path, """
        [Lexgion(Python:hot)]
            tracing_rate = 10
        """, CALL_100)
    proc = main_process(report_json(trace_dir(tracer), "--top", "0"))
    rate = function_row(proc, "hot")["rate"]
    assert (rate["traced"], rate["seen"], rate["seen_is_lower_bound"]) == (10, 100, False)
    assert rate["sampled"] and not rate["capped"] and rate["untraced"] == 90
    assert "sampled 10/100" in report_text(trace_dir(tracer))


COLD_HOT_COLD = """
def hot(i):
    return i

def cold(i):
    return i

def main():
    for i in range(10):
        cold(i)
    for i in range(100):
        hot(i)
    for i in range(10):
        cold(i)

main()
"""


def test_window_end_is_listed(tracer: Tracer, tmp_path: Path) -> None:
    run_with_config(tracer, tmp_path, """
        [Lexgion(Python:hot)]
            max_num_traces = 3
            trace_mode_after = STANDBY
        [Lexgion(Python:cold)]
            tracing_rate = 2
        """, COLD_HOT_COLD)
    report = report_json(trace_dir(tracer), "--top", "0")
    proc = main_process(report)
    # STANDBY counts nothing: cold's later calls went unseen, but it was not capped.
    cold = function_row(proc, "cold")["rate"]
    assert (cold["traced"], cold["seen"], cold["seen_is_lower_bound"]) == (5, 10, True)
    assert cold["sampled"] and not cold["capped"] and cold["untraced"] is None
    hot = function_row(proc, "hot")["rate"]
    assert hot["capped"] and hot["traced"] == 3 and hot["seen_is_lower_bound"]
    changes = proc["mode_changes"]
    ended = [m for m in changes if m["reason"] == "window_end_action"]
    assert len(ended) == 1 and ended[0]["mode"] == "STANDBY"
    assert report["begin_ns"] <= ended[0]["ts_ns"] <= report["end_ns"]
    assert ended[0]["offset_ns"] == ended[0]["ts_ns"] - report["begin_ns"]
    text = report_text(trace_dir(tracer))
    assert "Mode changes:" in text
    assert any("STANDBY" in line and "window_end_action" in line for line in text.splitlines())


def test_summary_marks_capped(tracer: Tracer, tmp_path: Path) -> None:
    from pinsight_python.reading.summary import summarize

    run_with_config(tracer, tmp_path, """
        [Lexgion(Python:hot)]
            max_num_traces = 10
        """, HOT_COLD)
    lines = summarize(trace_dir(tracer), progress="never")
    calls = [line for line in lines if line.startswith("top functions by calls")]
    assert calls and "hot (10; capped 10/" in calls[0] and "cold (50)" in calls[0], lines


def test_reload_lists_the_new_configuration(tracer: Tracer, tmp_path: Path) -> None:
    second = tmp_path / "second.txt"
    second.write_text("[Lexgion(Python:hot)]\n    max_num_traces = 20\n")
    code = CALL_100.replace("main()\n", "") + textwrap.dedent(f"""
        import shutil
        main()
        shutil.copy({str(second)!r}, pinsight_python.status()["config_path"])
        pinsight_python.reload()
        main()
        """)
    _, cfg = run_with_config(tracer, tmp_path, """
        [Lexgion(Python:hot)]
            max_num_traces = 5
        """, code)
    proc = main_process(report_json(trace_dir(tracer), "--top", "0"))
    assert [(c["path"], c["generation"]) for c in proc["configs"]] == [(str(cfg), 1),
                                                                       (str(cfg), 2)]
    assert proc["config"]["generation"] == 2
    assert [m["reason"] for m in proc["mode_changes"]] == ["activate", "reload"]
    rate = function_row(proc, "hot")["rate"]
    # Counters survive the reload (PInsight): 5, then up to 20 in all.
    assert rate["traced"] == 20 and rate["max_num_traces"] == 20 and rate["capped"]
    assert "generation 2" in report_text(trace_dir(tracer))


def test_cyclic_windows_are_counted(tracer: Tracer, tmp_path: Path) -> None:
    """PInsight's cyclic INTROSPECT (resume in TRACING, no pause): hot's cap of 10
    counts from zero in each window, so its 100 calls are all traced, in 10 windows
    (the tenth cap opens an eleventh). The report says so instead of "capped 100/100"
    alone, which reads as a cap of 100 or more."""
    run_with_config(tracer, tmp_path, """
        [Lexgion.default]
            window_end_action = INTROSPECT:0:-:TRACING
        [Lexgion(Python:hot)]
            max_num_traces = 10
        """, CALL_100, payload="batched")
    proc = main_process(report_json(trace_dir(tracer), "--top", "0"))
    rate = function_row(proc, "hot")["rate"]
    assert (rate["traced"], rate["seen"], rate["max_num_traces"]) == (100, 100, 10)
    assert rate["capped"] and rate["windows"] == 11
    resumed = [m for m in proc["mode_changes"] if m["reason"] == "introspect"]
    assert len(resumed) == 10 and {m["mode"] for m in resumed} == {"TRACING"}
    text = report_text(trace_dir(tracer))
    assert "capped 100/100 (10 per window, 11 windows)" in text
    assert "capped in each window (11 windows), traced 100 of 100 calls" in text

    from pinsight_python.reading.summary import summarize

    lines = summarize(trace_dir(tracer), progress="never")
    calls = [line for line in lines if line.startswith("top functions by calls")]
    assert calls and "hot (100; capped 100/100 (10 per window, 11 windows))" in calls[0], lines


def test_forked_child_counts_its_own_calls(tracer: Tracer, tmp_path: Path) -> None:
    code = CALL_100.replace("main()\n", "") + textwrap.dedent("""
        import os
        main()
        pid = os.fork()
        if pid == 0:
            for i in range(50):
                hot(i)
        else:
            os.waitpid(pid, 0)
        """)
    run_with_config(tracer, tmp_path, """
        [Lexgion(Python:hot)]
            tracing_rate = 10
        """, code)
    report = report_json(trace_dir(tracer), "--top", "0")
    rates = {p["vpid"]: row["rate"] for p in report["processes"]
             for row in p["rate_controlled"] if row["qualname"] == "hot"}
    assert len(rates) == 2
    seen = sorted((r["seen"], r["traced"], r["seen_is_lower_bound"]) for r in rates.values())
    assert seen == [(50, 5, False), (100, 10, False)]
