"""Reports that can be trusted, with less noise, and the end-of-run summary.

One real program, traced once in a real LTTng session, exercises every rule:
a caller -> callee pair nesting inside itself (r -> exec re-entering r), a
generator, a thread, a package of the program's own, a fresh import (frozen
importlib frames), a SIGUSR1 reload (handled on our control thread) and a
child process with an MPI rank, and a forked child. The reader's outputs are checked against the
events babeltrace2 reads from the same trace.
"""

from __future__ import annotations

import collections
import json
import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from pinsight_python import cli
from pinsight_python.reading.analysis import ReadFilter, read_trace
from pinsight_python.reading.flamegraph import _fit_label
from pinsight_python.reading.summary import summarize
from tests.tracing import Run, Tracer, check_balanced

PROGRAM = """
import os
import signal
import subprocess
import sys
import threading
import time

from mypkg import mod

def r(n):
    if n > 0:
        exec("r(n - 1)", {"r": r, "n": n})
    else:
        time.sleep(0.05)

def squares(n):
    for i in range(n):
        yield i * i

def worker():
    for _ in range(20):
        mod.work(100)

def reload_config():
    before = pinsight_python.status()["config_generation"]
    os.kill(os.getpid(), signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while pinsight_python.status()["config_generation"] == before:
        assert time.monotonic() < deadline, "the configuration was not reloaded"
        time.sleep(0.01)

def main():
    r(25)
    print(sum(squares(40)))
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    mod.work(1000)
    import fractions  # a fresh import: importlib's frozen frames
    reload_config()
    pid = os.fork()
    if pid == 0:
        mod.work(10)
        os._exit(0)
    os.waitpid(pid, 0)
    env = dict(os.environ, OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2")
    subprocess.run([sys.executable, "child.py"], env=env, check=True)

main()
"""

CHILD = """
import fractions
import pinsight_python
pinsight_python.activate()

def child_work():
    return sorted(range(100), key=lambda v: -v)

child_work()
fractions.Fraction(1, 3)  # a library frame outside __main__, for the filters
"""

MODULE = """
def work(n):
    return sum(helper(i) for i in range(n))

def helper(i):
    return i % 7
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("trust")
    (tmp / "mypkg").mkdir()
    (tmp / "mypkg" / "__init__.py").write_text("")
    (tmp / "mypkg" / "mod.py").write_text(MODULE)
    (tmp / "child.py").write_text(textwrap.dedent(CHILD))
    (tmp / "reload.ini").write_text("[Python.default]\ntrace_mode = TRACING\n")
    run = Tracer(tmp).run(PROGRAM, activate="pinsight_python.activate(config='reload.ini')")
    check_balanced(run.trace, allow_open=True)
    return run


def report(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Dict[str, Any]:
    code = cli.main(["report", str(path), "--json", "--top", "0", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    result: Dict[str, Any] = json.loads(out)
    return result


def pids(run: Run) -> Tuple[int, int]:
    """(parent vpid, child vpid), from process_info."""
    infos = {e.fields["mpi_rank"]: e.ctx["vpid"] for e in run.trace.named("process_info")}
    return run.trace.named("process_info")[0].ctx["vpid"], infos[1]


def forked(run: Run) -> int:
    """The vpid of the forked child: its own process_info, the parent's fields."""
    parent, child = pids(run)
    [vpid] = {e.ctx["vpid"] for e in run.trace.events} - {parent, child}
    return vpid


def functions(section: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {row["qualname"]: row for row in section["functions"]}


# ---------------------------------------------------------------------------- trust


def test_self_nesting_pair_counts_outermost_calls(
    program: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    data = report(program.trace.path, capsys)
    parent, _child = pids(program)
    [main] = [t for p in data["processes"] if p["vpid"] == parent for t in p["threads"]
              if t["vtid"] == parent]
    pairs = {(n["caller"]["qualname"], n["callee"]): n for n in main["native_calls"]}
    pair = pairs[("r", "exec")]
    assert pair["calls"] == 25
    # Only the outermost r -> exec counts: the 25 nested ones lie inside it.
    r_total = functions(main)["r"]["total_ns"]
    assert pair["total_ns"] <= r_total <= main["end_ns"] - main["begin_ns"]
    assert pair["total_ns"] <= data["duration_ns"]
    # The outermost call's own duration, from babeltrace2's events.
    events = [e for e in program.trace.events if e.ctx["vtid"] == parent
              and e.short in ("c_call_begin", "c_call_end")
              and e.fields["callee_name"] == "exec" and e.fields["caller_qualname"] == "r"]
    assert pair["total_ns"] == events[-1].ts - events[0].ts


def test_calls_mean_starts_everywhere(program: Run, capsys: pytest.CaptureFixture[str]) -> None:
    data = report(program.trace.path, capsys)
    parent, _child = pids(program)
    [proc] = [p for p in data["processes"] if p["vpid"] == parent]
    squares = functions(proc)["squares"]
    assert (squares["calls"], squares["segments"]) == (1, 41)  # a start and 40 resumes
    lines = summarize(program.trace.path, progress="never")
    summary = "\n".join(lines)
    counts = collections.Counter(e.short for e in program.trace.events)
    assert f"events: {len(program.trace.counted):,} (" in summary
    assert f"function_begin {counts['function_begin']:,}" in summary
    # Two processes' threads: self times add up over them, as the summary says.
    assert re.search(r"threads: [2-9]\d*, time span: .* \(self times below are summed over "
                     r"threads\)\n", summary), summary
    # The summary's calls are the report's: starts, not generator resumes.
    mentioned = dict(re.findall(r"([\w.<>]+) \(([\d,]+)\)", summary))
    assert mentioned["r"] == "26"
    if "squares" in mentioned:
        assert mentioned["squares"] == "1"
    # The program's own modules come first.
    modules = [line for line in lines if line.startswith("self time in ")]
    assert modules[0].startswith("self time in the program's modules: ")
    assert "mypkg.mod" in modules[0] and "json" not in modules[0]
    assert any(line.startswith("self time in the standard library: ") for line in modules)


def test_control_thread_is_not_a_program_thread(
    program: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parent, _child = pids(program)
    by_thread = program.trace.by_thread()
    # The reload's mode_change (and config_info) came from a thread that emitted
    # nothing else.
    control = [key for key, events in by_thread.items()
               if "mode_change" in {e.short for e in events}
               and {e.short for e in events} <= {"mode_change", "config_info"}]
    assert control and all(vpid == parent for vpid, _ in control)
    data = report(program.trace.path, capsys)
    assert data["control_threads"] == len(control)
    [proc] = [p for p in data["processes"] if p["vpid"] == parent]
    assert {t["vtid"] for t in proc["threads"]} == {
        tid for (vpid, tid) in by_thread if vpid == parent and (vpid, tid) not in control}
    assert len(proc["threads"]) == 2  # main and the worker
    summary = "\n".join(summarize(program.trace.path, progress="never"))
    assert "processes: 3, threads: 4," in summary
    chrome = tmp_path / "trace.json"
    assert cli.main(["export", str(program.trace.path), "-o", str(chrome)]) == 0
    events = json.loads(chrome.read_text())["traceEvents"]
    tids = {e.get("tid") for e in events if e["ph"] != "i"}
    assert not tids & {tid for _, tid in control}


def test_labels_and_time_order(
    program: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parent, child = pids(program)
    script = Path(program.trace.path).name.replace("trace", "prog") + ".py"
    fork = forked(program)
    labels = {parent: f"{script} (pid {parent})", child: "rank 1", fork: f"{script} (pid {fork})"}
    [info] = [e for e in program.trace.named("process_info") if e.ctx["vpid"] == fork]
    assert info.fields["pid"] == fork
    data = report(program.trace.path, capsys)
    assert {p["vpid"]: p["label"] for p in data["processes"]} == labels
    code = cli.main(["flamegraph", str(program.trace.path), "--folded"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert {line.split(";", 1)[0] for line in out.splitlines()} == set(labels.values())
    chrome = tmp_path / "trace.json"
    assert cli.main(["export", str(program.trace.path), "-o", str(chrome)]) == 0
    events = json.loads(chrome.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == labels
    timed = [e for e in events if e["ph"] != "M"]
    assert [e["ts"] for e in timed] == sorted(e["ts"] for e in timed)
    # Begins and ends pair up like a stack on every thread, one pair per segment.
    stacks: Dict[Tuple[int, int], List[str]] = collections.defaultdict(list)
    for e in timed:
        if e["ph"] == "B":
            stacks[(e["pid"], e["tid"])].append(e["name"])
        elif e["ph"] == "E":
            stacks[(e["pid"], e["tid"])].pop()
    assert not any(stacks.values())
    segments = sum(1 for e in program.trace.events if e.short in ("function_begin", "c_call_begin"))
    assert sum(1 for e in timed if e["ph"] == "B") == segments


def test_flamegraph_boxes_show_the_name_first(
    program: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = ("work (/long/path/to/mypkg/mod.py:2)", "work (mypkg/mod.py:2)", "work")
    assert _fit_label(labels, 60) == labels[0]
    assert _fit_label(labels, 25) == labels[1]
    assert _fit_label(labels, 10) == "work"
    assert _fit_label(labels, 3) == "w.."
    svg = tmp_path / "out.svg"
    assert cli.main(["flamegraph", str(program.trace.path), "-o", str(svg), "--width", "400"]) == 0
    ns = "{http://www.w3.org/2000/svg}"
    for g in ET.parse(svg).getroot().iter(f"{ns}g"):
        text, title = g.findtext(f"{ns}text") or "", g.findtext(f"{ns}title") or ""
        if text and " (" in title.split("\n")[0]:
            qualname = title.split(" (", 1)[0]
            assert qualname.startswith(text.rstrip(".")) or text.startswith(qualname), (text, title)


# ---------------------------------------------------------------------------- filters


def test_process_and_thread_filters(program: Run, capsys: pytest.CaptureFixture[str]) -> None:
    parent, child = pids(program)
    assert [p["vpid"] for p in report(program.trace.path, capsys, "--pid", str(child))[
        "processes"]] == [child]
    assert [p["vpid"] for p in report(program.trace.path, capsys, "--rank", "1")[
        "processes"]] == [child]
    data = report(program.trace.path, capsys, "--thread", str(parent))
    [proc] = data["processes"]
    assert [t["vtid"] for t in proc["threads"]] == [parent]
    assert "worker" not in functions(proc)
    assert cli.main(["report", str(program.trace.path), "--pid", str(child), "--thread",
                     str(child)]) == 0
    assert f"showing only: --pid {child} --thread {child}" in capsys.readouterr().out
    nothing = report(program.trace.path, capsys, "--pid", "999999999")
    assert nothing["processes"] == [] and "--pid 999999999" in nothing["warnings"][-1]


def test_module_filters_hide_frames_into_their_caller(
    program: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    parent, _child = pids(program)
    full = report(program.trace.path, capsys, "--pid", str(parent))["processes"][0]
    assert functions(full)["work"]["module"] == "mypkg.mod"
    assert functions(full)["work"]["origin"] == "program"
    assert any(r["origin"] == "frozen" for r in full["functions"])
    origins = [m["origin"] for m in full["modules"]]
    assert origins == sorted(origins, key=["program", "library", "stdlib", "frozen", "unknown",
                                           "native"].index)
    # Issue 34, point 5: code exec'd from a string is the program's, named "<string>";
    # the import finder of an editable install (ours, here) is not the program's.
    strings = [row for row in full["functions"] if row["module"] == "<string>"]
    assert strings and {row["origin"] for row in strings} == {"program"}, strings
    assert not [m for m in full["modules"] if (m["module"] or "").startswith("_editable_")]

    only = report(program.trace.path, capsys, "--pid", str(parent), "--module", "mypkg")
    rows = only["processes"][0]["functions"]
    assert {r["module"] for r in rows if r["kind"] == "python"} == {"mypkg", "mypkg.mod"}
    assert functions(only["processes"][0])["work"]["calls"] == functions(full)["work"]["calls"]

    excluded = report(program.trace.path, capsys, "--pid", str(parent), "--exclude", "mypkg.mod")
    proc = excluded["processes"][0]
    assert "work" not in functions(proc) and "helper" not in functions(proc)
    # work's time became main's and worker's self time: the totals are unchanged.
    for name in ("main", "worker"):
        assert functions(proc)[name]["total_ns"] == functions(full)[name]["total_ns"]
    assert functions(proc)["worker"]["self_ns"] > functions(full)["worker"]["self_ns"]

    unfrozen = report(program.trace.path, capsys, "--pid", str(parent), "--ignore-frozen")
    proc = unfrozen["processes"][0]
    assert not any(r["origin"] == "frozen" for r in proc["functions"])
    # fractions' module code ran under frozen frames: it now nests in main.
    assert functions(proc)["<module>"]["calls"] >= 1

    # __main__ is the script, as in module_filter.
    main_only = report(program.trace.path, capsys, "--pid", str(parent), "--module", "__main__")
    names = set(functions(main_only["processes"][0]))
    assert {"r", "main", "squares"} <= names and "work" not in names


def test_filters_apply_to_flamegraph_and_export(
    program: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parent, _child = pids(program)
    code = cli.main(["flamegraph", str(program.trace.path), "--folded", "--rank", "1",
                     "--exclude", "__main__"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out and all(line.startswith("rank 1;") for line in out.splitlines())
    assert "child_work" not in out and "sorted" not in out  # hidden, with its native calls
    assert "Fraction.__new__" in out
    chrome = tmp_path / "t.json"
    assert cli.main(["export", str(program.trace.path), "-o", str(chrome), "--ignore-frozen",
                     "--pid", str(parent)]) == 0
    events = json.loads(chrome.read_text())["traceEvents"]
    assert {e["pid"] for e in events if e["ph"] == "B"} == {parent}
    assert not any("<frozen" in e["args"].get("file", "") for e in events if e["ph"] == "B")
    data = read_trace(program.trace.path, filters=ReadFilter(threads=(parent,)),
                      progress="never")
    assert [t.vtid for p in data.processes for t in p.threads] == [parent]
