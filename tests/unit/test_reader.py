"""The reader and the report formats, at unit level, on small committed traces.

tests/unit/traces/{full,compact} were recorded once with the real tracer
(scripts/make_unit_traces.py, which holds the program) in the two per-event payloads
(traces/batched, the third, is unbatch's: tests/unit/test_unbatch.py);
traces/full_file_per_event is the full payload as versions before issue 36 wrote it
(the file in every event, no code_info), kept to prove the reader still reads it. Reading
them needs the package alone (its compiled reader), no LTTng. The program's
counts are known: fib(6) makes 25 calls, two threads run work() once each, fails()
raises once and is caught. The end-to-end tests (tests/integration/test_report*.py)
check the same formats on traces recorded there and then.
"""

from __future__ import annotations

import collections
import io
import json
import xml.etree.ElementTree as ET
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from pinsight_python import _pinsight_reader, cli
from pinsight_python.reading import analysis
from tests.tracing import PROGRAM_CALLS, TRACES, native_calls, program_functions, report_json

PAYLOADS = ("full", "compact", "full_file_per_event")


@pytest.fixture(params=PAYLOADS)
def trace_dir(request: pytest.FixtureRequest) -> Path:
    path: Path = TRACES / request.param
    assert (path / "ust").is_dir(), f"{path}: run scripts/make_unit_traces.py"
    return path


def run(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    assert code == 0, err.getvalue()
    return out.getvalue()


def test_report_counts_the_programs_calls(trace_dir: Path) -> None:
    report = report_json(trace_dir, "--top", "0")
    assert report["discarded"]["events"] == 0
    assert report["event_counts"]["function_begin"] == report["event_counts"]["function_end"]
    [proc] = report["processes"]
    assert proc["label"].startswith("unit_program.py")
    assert all(v == 0 for v in proc["unbalanced"].values()), proc["unbalanced"]
    functions = program_functions(report)
    assert {name: f["calls"] for name, f in functions.items()} == PROGRAM_CALLS
    assert functions["fails"]["exceptions"] == 1
    assert [e["function"]["qualname"] for e in proc["exceptions"]] == ["fails"]
    natives = native_calls(report)
    assert natives["sorted"] == natives["sum"] == 2
    assert len(proc["threads"]) == 3
    # Times nest: a function's self time is within its total, main's within the run.
    for f in proc["functions"]:
        assert 0 <= f["self_ns"] <= f["total_ns"] <= report["duration_ns"], f


def test_both_payloads_read_alike() -> None:
    full, compact = (report_json(TRACES / p, "--top", "0") for p in ("full", "compact"))
    assert {k: f["calls"] for k, f in program_functions(full).items()} == {
        k: f["calls"] for k, f in program_functions(compact).items()}
    assert native_calls(full) == native_calls(compact)
    assert full["event_counts"] == compact["event_counts"]


def test_full_trace_of_an_earlier_version_reads_alike() -> None:
    """The same program's functions, files, lines and calls, whether the file
    came in every event or in code_info (threading's own lock calls differ
    between the two recordings, the program's do not)."""
    full, before = (report_json(TRACES / p, "--top", "0")
                    for p in ("full", "full_file_per_event"))

    def program(report: Dict[str, Any]) -> Dict[Tuple[str, str, int], Tuple[int, int]]:
        # Each recording ran the program from a temporary folder of its own.
        return {(f["qualname"], Path(f["filename"]).name, f["lineno"]):
                (f["calls"], f["exceptions"]) for f in program_functions(report).values()}

    assert program(full) == program(before)
    assert len(program(full)) == len(PROGRAM_CALLS)
    for name in ("sorted", "sum"):
        assert native_calls(full)[name] == native_calls(before)[name] == 2


def test_a_ctf_2_trace_reads_alike_where_babeltrace2_reads_ctf_2() -> None:
    """traces/full_ctf2: the full payload in CTF 2 (LTTng 2.16, LTTng's default from
    2.15 on; scripts/make_unit_traces.py --ctf2). With babeltrace2 2.1 loaded (the LTTng
    2.16 stage of scripts/test.sh), it reads as the CTF 1.8 trace does; with 2.0
    (Debian 12, every other stage), report fails with one line saying what to do."""
    trace = TRACES / "full_ctf2"
    assert next(trace.rglob("metadata")).read_bytes().startswith(b"\x1e{"), "not CTF 2"
    if _pinsight_reader.reads_ctf2():
        ctf2, ctf18 = (report_json(t, "--top", "0") for t in (trace, TRACES / "full"))
        assert {k: f["calls"] for k, f in program_functions(ctf2).items()} == PROGRAM_CALLS
        assert native_calls(ctf2)["sorted"] == native_calls(ctf18)["sorted"] == 2
        assert ctf2["discarded"]["events"] == 0 and len(ctf2["processes"][0]["threads"]) == 3
        return
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert cli.main(["report", str(trace)]) != 0
    version = ".".join(_pinsight_reader.babeltrace2_version().split(".")[:2])
    assert f"this trace is CTF 2; babeltrace2 {version} cannot read it; record with " \
        "--trace-format=ctf-1.8 or install babeltrace2 2.1" in err.getvalue(), err.getvalue()
    assert len(err.getvalue().splitlines()) == 1


def test_full_payload_names_files_once() -> None:
    """The committed full traces are of both formats: the file in code_info
    (one per code object) or, written before, in every frame and native-call event."""
    def metadata(payload: str) -> bytes:
        return b"".join(p.read_bytes() for p in (TRACES / payload).rglob("metadata"))

    assert b"caller_filename" not in metadata("full")
    assert b"caller_filename" in metadata("full_file_per_event")


def test_read_trace_api(trace_dir: Path) -> None:
    data = analysis.read_trace(trace_dir, progress="never")
    assert data.events == sum(json.loads(run("report", str(trace_dir), "--json"))
                              ["event_counts"].values())
    [proc] = data.processes
    threads = [t.vtid for t in proc.threads]
    assert len(set(threads)) == 3 and proc.vpid in threads
    filtered = analysis.read_trace(
        trace_dir, filters=analysis.ReadFilter(threads=(proc.vpid,)), progress="never")
    assert [t.vtid for p in filtered.processes for t in p.threads] == [proc.vpid]


def test_text_report(trace_dir: Path) -> None:
    text = run("report", str(trace_dir), "--top", "5")
    assert "1 process(es), 3 thread(s)" in text
    assert "Top 5 functions by self time" in text
    assert "unit_program.py" in text


def folded(trace_dir: Path) -> List[Tuple[List[str], int]]:
    lines = run("flamegraph", str(trace_dir), "--folded", "-o", "-").splitlines()
    out = []
    for line in lines:
        stack, _, weight = line.rpartition(" ")
        out.append(([frame.split(" (")[0] for frame in stack.split(";")], int(weight)))
    return out


def test_folded_stacks(trace_dir: Path) -> None:
    stacks = folded(trace_dir)
    assert stacks and all(weight >= 0 for _, weight in stacks)
    # process; thread; frames...: fib recurses 5 deep under main (fib(6) down to fib(1)).
    deepest = max(stack.count("fib") for stack, _ in stacks)
    assert deepest == 6
    assert all(stack[0].startswith("unit_program.py") for stack, _ in stacks)


def test_flamegraph_svg(trace_dir: Path, tmp_path: Path) -> None:
    svg = tmp_path / "f.svg"
    run("flamegraph", str(trace_dir), "-o", str(svg))
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert "fib" in svg.read_text()


def test_chrome_export_nests_per_thread(trace_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    run("export", str(trace_dir), "-o", str(out))
    events = json.loads(out.read_text())["traceEvents"]
    depth: Dict[Tuple[int, int], int] = collections.defaultdict(int)
    names = collections.Counter()
    for e in events:
        if e["ph"] == "B":
            depth[(e["pid"], e["tid"])] += 1
            names[e["name"]] += 1
        elif e["ph"] == "E":
            depth[(e["pid"], e["tid"])] -= 1
            assert depth[(e["pid"], e["tid"])] >= 0, e
    assert set(depth.values()) == {0} and len(depth) == 3
    assert names["fib"] == 25 and names["work"] == 2
