"""The Trace Compass analyses in tracecompass/*.xml, end to end: layers 1 and 3 of
tests/unit/test_tracecompass.py (which says what they are) that need more than the
package: the structure, checked by xmllint against Trace Compass's own XSD
(../shared/tracecompass-xsd), and the behaviour over a real trace of our tracer,
recorded here and read back with babeltrace2.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, List, Sequence

import pytest

from tests import tc_replay
from tests.tracing import (
    CALLSTACK_ID,
    CALLSTACK_XML,
    CROSSDOMAIN_ID,
    CROSSDOMAIN_VIEW_ID,
    CROSSDOMAIN_XML,
    OUR_PROVIDER,
    THREADS_VIEW_ID,
    XSD,
    Event,
    Tracer,
    assert_clean,
    check_balanced,
    frame_paths,
    reference_frames,
    replay,
    rows_by_path,
    running_reference,
    thread_key,
    xml_files,
)


@pytest.fixture(scope="module")
def xmllint() -> str:
    path = shutil.which("xmllint")
    if path is None:
        pytest.fail("xmllint not found: apt-get install libxml2-utils (scripts/setup.sh does)")
    if not XSD.is_file():
        pytest.fail(f"Trace Compass schemas not found at {XSD}: shared/ must sit beside the repo")
    return path


def validate(xmllint: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [xmllint, "--noout", "--schema", str(XSD), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("path", xml_files(), ids=lambda p: p.name)
def test_analysis_validates_against_trace_compass_schema(xmllint: str, path: Path) -> None:
    proc = validate(xmllint, path)
    assert proc.returncode == 0, proc.stderr


def test_schema_check_rejects_an_invalid_analysis(xmllint: str, tmp_path: Path) -> None:
    # Guards the check above: a schema that accepted anything would pass it.
    broken = tmp_path / "broken.xml"
    text = CALLSTACK_XML.read_text().replace("<callstackGroup", "<callstackGruop", 1)
    broken.write_text(text.replace("</callstackGroup>", "</callstackGruop>", 1))
    assert validate(xmllint, broken).returncode != 0


TRACED_PROGRAM = """
import threading

def inner(values):
    return sorted(values)

def outer():
    return inner([3, 1, 2])

def numbers():
    yield 1
    yield 2

def fails():
    raise ValueError("unwound")

def worker():
    outer()

def main():
    import colorsys  # an import frame (events = import), around the module's code
    outer()
    list(numbers())
    try:
        fails()
    except ValueError:
        pass
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()

main()
"""


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory: pytest.TempPathFactory) -> List[Event]:
    run = Tracer(tmp_path_factory.mktemp("tc")).run(
        TRACED_PROGRAM, activate='pinsight_python.activate(events=["function", "c_call", "import"])'
    )
    check_balanced(run.trace)  # the tracer's own contract, before ours
    assert run.trace.discarded == 0
    return run.trace.events


def named(events: Sequence[Any], short: str) -> List[Any]:
    return [e for e in events if e.name == f"{OUR_PROVIDER}:{short}"]


@pytest.mark.parametrize(
    ("path", "callstack_id"),
    [(CALLSTACK_XML, CALLSTACK_ID), (CROSSDOMAIN_XML, CROSSDOMAIN_ID)],
    ids=["callstack", "crossdomain"],
)
def test_replayed_real_trace_has_the_events_call_stacks(
    real_trace: List[Event], path: Path, callstack_id: str
) -> None:
    analysis, result = replay(path, callstack_id, real_trace)
    assert_clean(result)
    callstack = analysis.callstacks[callstack_id]
    frames = tc_replay.callstack_frames(callstack, result.ss)
    assert frames == reference_frames(real_trace)
    assert set(tc_replay.open_stacks(callstack, result.ss).values()) == {0}

    # The program's shape, on two threads of one process.
    assert len(frames) == 2 and len({pid for pid, _ in frames}) == 1
    sorted_callee = {
        e.fields["callee_name"]
        for e in named(real_trace, "c_call_begin")
        if e.fields["caller_qualname"] == "inner"
    }
    assert len(sorted_callee) == 1
    callee = sorted_callee.pop()
    main_key = thread_key(named(real_trace, "function_begin")[0])
    main_paths = frame_paths(frames[main_key])
    assert any(p[-4:] == ("main", "outer", "inner", callee) for p in main_paths)
    assert sum(p[-1] == "numbers" for p in main_paths) == 3  # start, 2 resumes
    assert all(p[-2] != "numbers" for p in main_paths if p[-1] == "numbers")
    assert any(p[-2:] == ("main", "fails") for p in main_paths)
    assert any(p[-2:] == ("main", "import colorsys") for p in main_paths)
    assert any("import colorsys" in p and p[-1] == "<module>" for p in main_paths)
    (worker_key,) = set(frames) - {main_key}
    assert any(
        p[-4:] == ("worker", "outer", "inner", callee) for p in frame_paths(frames[worker_key])
    )


def test_python_threads_view_of_real_trace(real_trace: List[Event]) -> None:
    analysis, result = replay(CALLSTACK_XML, CALLSTACK_ID, real_trace)
    rows = rows_by_path(analysis.views[THREADS_VIEW_ID], result.ss)
    (info,) = named(real_trace, "process_info")
    pid = str(info.ctx["vpid"])
    process = rows[f"Processes/{pid}"]
    if info.fields["mpi_rank"] >= 0:
        assert process.name.startswith(f"rank {info.fields['mpi_rank']}/")
    else:
        assert process.name == f"pid {info.fields['pid']}, {info.fields['argv']}"
    modes = [e.fields["mode"] for e in named(real_trace, "mode_change")]
    assert modes, "no mode_change at activation"
    changes = [m for i, m in enumerate(modes) if i == 0 or m != modes[i - 1]]
    assert [s.value for s in process.states] == changes  # TC merges equal values

    threads = {k: v for k, v in rows.items() if "/Threads/" in k}
    keys = {thread_key(e) for e in real_trace if e.name.endswith(("_begin", "thread_start"))}
    assert set(threads) == {f"Processes/{p}/Threads/{t}" for p, t in keys}
    for start in named(real_trace, "thread_start"):
        row = threads[f"Processes/{pid}/Threads/{start.ctx['vtid']}"]
        assert (
            row.name
            == f"Python thread {start.fields['python_thread_id']} (tid {start.ctx['vtid']})"
        )
    for p, t in keys:
        row = threads[f"Processes/{p}/Threads/{t}"]
        assert [(s.start, s.value) for s in row.states] == running_reference(real_trace, (p, t))
        assert row.states[-1].value == "idle"


def test_crossdomain_python_rows_match_the_python_view(real_trace: List[Event]) -> None:
    python_only, result = replay(CALLSTACK_XML, CALLSTACK_ID, real_trace)
    crossdomain, cross_result = replay(CROSSDOMAIN_XML, CROSSDOMAIN_ID, real_trace)
    running = rows_by_path(python_only.views[THREADS_VIEW_ID], result.ss)
    cross = rows_by_path(crossdomain.views[CROSSDOMAIN_VIEW_ID], cross_result.ss)
    for path, row in running.items():
        assert cross[path].name == row.name
        if "/Threads/" in path:
            assert cross[f"{path}/Python"].states == row.states
            assert not {f"{path}/{d}" for d in ("OpenMP", "MPI", "CUDA")} & set(cross)
