"""report / flamegraph / export against ground truth.

Programs run under the real tracer in real LTTng sessions; the reader's
numbers are checked against the events babeltrace2's Python bindings read
from the same trace (tests/tracing.py), replayed here by a deliberately
simple reference implementation.
"""

from __future__ import annotations

import collections
import io
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import types
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from pinsight_python import cli
from pinsight_python.reading.analysis import read_trace
from pinsight_python.recording import lttng
from tests.tracing import (
    CLI,
    Event,
    Run,
    Trace,
    Tracer,
    check_balanced,
    isolated_session,
    report_json,
)
from tests.tracing import read_trace as bt2_read_trace

Key = Tuple[str, ...]  # ("python", qualname, filename, lineno) or ("native", callee)

# Native calls are builtin functions and methods: the only native callables
# both backends see (CPython's profile hook reports no others).
WORKLOAD = """
import json
import math

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def squares(n):
    for i in range(n):
        yield i * i

class Shape:
    def area(self):
        return sum(len(str(i)) for i in range(3))

def fails():
    math.sqrt(-1.0)

def catcher():
    for _ in range(4):
        try:
            fails()
        except ValueError:
            pass

def main():
    fib(15)
    total = sum(squares(5))
    shapes = [Shape() for _ in range(7)]
    areas = sorted((s.area() for s in shapes), key=lambda a: -a)
    catcher()
    json.dumps({"total": total, "areas": areas})

main()
"""


# ---------------------------------------------------------------------------- helpers


def def_line(name: str) -> int:
    """Line of `def name` in the traced script (Tracer.run prepends two lines)."""
    return 2 + 1 + WORKLOAD.splitlines().index(f"def {name}(n):")


@dataclass
class RefStats:
    calls: int = 0
    segments: int = 0
    total_ns: int = 0
    self_ns: int = 0
    exceptions: int = 0


@dataclass
class RefThread:
    functions: Dict[Key, RefStats] = field(
        default_factory=lambda: collections.defaultdict(RefStats)
    )
    # (caller qualname, caller filename, callee) -> [calls, total_ns, raised]
    native_calls: Dict[Tuple[str, str, str], List[int]] = field(
        default_factory=lambda: collections.defaultdict(lambda: [0, 0, 0])
    )
    root_ns: int = 0  # time in frames at the bottom of the stack


def reference(trace: Trace) -> Dict[Tuple[int, int], RefThread]:
    """Per (vpid, vtid): the aggregates, replayed from the babeltrace2 dump.

    Same rules as the reader, written the obvious way: a stack per thread,
    self = duration minus children, total counted for the outermost frame of
    a function (and of a caller -> callee pair) only, calls on transition=start.
    """
    return {key: _replay(events) for key, events in trace.by_thread().items()}


def _frame_key(e: Event) -> Key:
    f = e.fields
    if e.short.startswith("function_"):
        return ("python", f["qualname"], e.file, str(f["lineno"]))
    return ("native", f["callee_name"])


def _replay(events: List[Event]) -> RefThread:
    ref = RefThread()
    stack: List[List[Any]] = []  # [key, start, child_ns, (caller qualname, filename)]
    for e in events:
        if e.short in ("function_begin", "c_call_begin"):
            _replay_begin(ref, stack, e)
        elif e.short in ("function_end", "c_call_end"):
            _replay_end(ref, stack, e)
    return ref


def _replay_begin(ref: RefThread, stack: List[List[Any]], e: Event) -> None:
    f = e.fields
    key = _frame_key(e)
    stats = ref.functions[key]
    stats.segments += 1
    if e.short == "function_begin":
        stats.calls += f["transition"] == "start"
        stack.append([key, e.ts, 0, None])
    else:
        stats.calls += 1
        stack.append([key, e.ts, 0, (f["caller_qualname"], e.file)])


def _replay_end(ref: RefThread, stack: List[List[Any]], e: Event) -> None:
    key = _frame_key(e)
    if not stack or stack[-1][0] != key:
        return  # began before tracing did
    key, start, child_ns, caller = stack.pop()
    duration = e.ts - start
    stats = ref.functions[key]
    stats.self_ns += duration - child_ns
    if all(frame[0] != key for frame in stack):
        stats.total_ns += duration
    failed = e.fields["transition"] in ("unwind", "raise")
    stats.exceptions += failed
    if caller is not None:
        edge = ref.native_calls[(*caller, key[1])]
        edge[0] += 1
        if all((frame[0], frame[3]) != (key, caller) for frame in stack):
            edge[1] += duration
        edge[2] += failed
    if stack:
        stack[-1][2] += duration
    else:
        ref.root_ns += duration


def run_cli(args: List[str], capsys: pytest.CaptureFixture[str]) -> Tuple[int, str, str]:
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def row_key(row: Dict[str, Any]) -> Key:
    if row["kind"] == "native":
        return ("native", row["name"])
    return ("python", row["qualname"], row["filename"], str(row["lineno"]))


def thread_of(report: Dict[str, Any], vpid: int, vtid: int) -> Dict[str, Any]:
    for proc in report["processes"]:
        for thread in proc["threads"]:
            if proc["vpid"] == vpid and thread["vtid"] == vtid:
                return dict(thread)
    raise AssertionError(f"thread {vpid}/{vtid} missing from the report")


def by_qualname(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    return {r["qualname"]: r for r in rows}


@pytest.fixture
def workload(tracer: Tracer) -> Run:
    run = tracer.run(WORKLOAD)
    check_balanced(run.trace, allow_open=True)
    return run


# ---------------------------------------------------------------------------- report


def test_report_matches_reference_replay(workload: Run, capsys: pytest.CaptureFixture[str]) -> None:
    report = report_json(str(workload.trace.path), "--top", "0")
    expected = reference(workload.trace)
    assert report["events"] == len(workload.trace.counted)
    assert report["discarded"]["events"] == workload.trace.discarded == 0
    for (vpid, vtid), ref in expected.items():
        thread = thread_of(report, vpid, vtid)
        got = {row_key(r): r for r in thread["functions"]}
        assert set(got) == {k for k, s in ref.functions.items() if s.segments}
        for key, stats in ref.functions.items():
            row = got[key]
            assert (row["calls"], row["segments"], row["exceptions"]) == (
                stats.calls, stats.segments, stats.exceptions), key
            assert (row["total_ns"], row["self_ns"]) == (stats.total_ns, stats.self_ns), key
        natives = {(n["caller"]["qualname"], n["caller"]["filename"], n["callee"]): n
                   for n in thread["native_calls"]}
        assert set(natives) == set(ref.native_calls)
        for pair, (calls, total_ns, raised) in ref.native_calls.items():
            n = natives[pair]
            assert (n["calls"], n["total_ns"], n["raised"]) == (calls, total_ns, raised), pair


def test_report_counts_and_time_consistency(
    workload: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    report = report_json(str(workload.trace.path), "--top", "0")
    [proc] = report["processes"]
    funcs = by_qualname([r for r in proc["functions"] if r["kind"] == "python"])
    begins = workload.trace.functions("function_begin")
    # fib(15) makes 1973 calls; the generator starts once and resumes 5 times.
    assert funcs["fib"]["calls"] == 1973 == begins["fib"]
    assert funcs["squares"]["calls"] == 1
    assert funcs["squares"]["segments"] == begins["squares"] == 6  # start + 5 resumes
    assert funcs["Shape.area"]["calls"] == 7
    assert funcs["fails"]["calls"] == 4 and funcs["fails"]["exceptions"] == 4
    assert funcs["main.<locals>.<lambda>"]["calls"] == 7
    for row in proc["functions"]:
        assert 0 <= row["self_ns"] <= row["total_ns"], row
    # Callees' totals fit in their caller's.
    main = funcs["main"]
    assert funcs["fib"]["total_ns"] + funcs["catcher"]["total_ns"] <= main["total_ns"]
    assert funcs["fails"]["total_ns"] <= funcs["catcher"]["total_ns"]
    assert main["total_ns"] <= report["duration_ns"]
    # Native calls: the bridge from Python callers to native callees.
    natives = {(n["caller"]["qualname"], n["callee"]): n for n in proc["native_calls"]}
    assert natives[("fails", "math.sqrt")]["calls"] == 4
    assert natives[("fails", "math.sqrt")]["raised"] == 4
    assert natives[("main", "sorted")]["calls"] == 1
    # The lambda runs inside sorted(): its time is part of the native call's.
    assert natives[("main", "sorted")]["total_ns"] >= funcs["main.<locals>.<lambda>"]["total_ns"]
    kinds = collections.Counter(e["kind"] for e in proc["exceptions"])
    assert kinds["unwind"] >= 1 and kinds["raise"] >= 1
    unwinds = {e["function"]["qualname"]: e["count"] for e in proc["exceptions"]
               if e["kind"] == "unwind"}
    assert unwinds["fails"] == 4


def test_report_json_schema(workload: Run, capsys: pytest.CaptureFixture[str]) -> None:
    report = report_json(str(workload.trace.path), "--top", "3")
    assert report["schema"] == "pinsight-python.report/1"
    assert report["top"] == 3
    for name in ("trace", "events", "other_events", "begin_ns", "end_ns", "duration_ns"):
        assert name in report
    assert isinstance(report["trace_dirs"], list) and report["trace_dirs"]
    assert set(report["discarded"]) == {"events", "packets", "records", "ranges"}
    assert report["damaged_files"] == [] and report["lower_bounds"] is False
    assert isinstance(report["warnings"], list)
    function_fields = {"kind", "name", "qualname", "filename", "lineno", "calls", "segments",
                       "total_ns", "self_ns", "exceptions", "module", "origin",
                       "instances_finished", "wall_ns", "rate"}
    location_fields = {"name", "qualname", "filename", "lineno"}
    activity = {"modules", "functions", "functions_total", "native_calls", "native_calls_total",
                "generators", "exceptions", "unbalanced", "imports"}
    assert set(report["filters"]) == {"pids", "ranks", "threads", "modules", "excludes",
                                      "ignore_frozen"}
    assert report["event_counts"]["function_begin"] > 0 and report["control_threads"] == 0
    for proc in report["processes"]:
        assert activity | {"vpid", "host", "label", "mpi_rank", "mpi_size", "pid", "hostname",
                           "argv", "python_version", "backend", "procname", "events",
                           "threads", "allocations", "gil", "config", "configs",
                           "mode_changes", "rate_controlled", "tasks", "lower_bound"} == set(proc)
        assert proc["lower_bound"] is False  # an intact trace
        assert proc["config"] == proc["configs"][-1] and proc["config"]["path"] is None
        assert [m["reason"] for m in proc["mode_changes"]][:1] == ["activate"]
        assert proc["rate_controlled"] == []  # no rate control in this trace
        assert proc["gil"] is None  # no gil events in this trace
        assert set(proc["imports"]) == {"modules_total", "cumulative_ns", "modules",
                                        "slowest_chains"}
        assert set(proc["allocations"]) == {"functions_total", "sampled_bytes",
                                            "retained_bytes", "functions"}
        assert proc["backend"] in ("sys.monitoring", "setprofile")
        assert proc["pid"] == proc["vpid"]
        sections = [proc, *proc["threads"]]
        for thread in proc["threads"]:
            assert activity | {"vtid", "python_thread_id", "label", "events", "begin_ns",
                               "end_ns", "gil", "lower_bound"} == set(thread)
            assert thread["gil"] is None
        for section in sections:
            # --top 3: the union of the top 3 by self and by total time.
            assert len(section["functions"]) <= 6
            assert len(section["native_calls"]) <= 3
            assert set(section["unbalanced"]) == {"ends_without_begin", "implicitly_closed",
                                                  "open_at_end", "stepped_aside",
                                                  "cut_by_damage"}
            selfs = [r["self_ns"] for r in section["functions"]]
            assert selfs == sorted(selfs, reverse=True)
            for row in section["functions"]:
                assert set(row) == function_fields
                assert row["kind"] in ("python", "native") and row["rate"] is None
                if row["kind"] == "native":
                    assert row["filename"] is None and row["lineno"] is None
                else:
                    assert isinstance(row["filename"], str) and isinstance(row["lineno"], int)
            for g in section["generators"]:
                assert set(g) == location_fields | {"instances_started", "instances_finished",
                                                    "segments", "running_ns", "wall_ns",
                                                    "mean_wall_ns"}
            for n in section["native_calls"]:
                assert set(n) == {"caller", "callee", "calls", "total_ns", "raised"}
                assert set(n["caller"]) == location_fields
            for e in section["exceptions"]:
                assert e["kind"] in ("unwind", "raise")
                assert set(e) == ({"kind", "function", "count"} if e["kind"] == "unwind"
                                  else {"kind", "caller", "callee", "count"})


def test_report_text_tables(workload: Run, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["report", str(workload.trace.path), "--top", "5"], capsys)
    assert code == 0, err
    assert f"Trace {workload.trace.path}" in out
    assert "Top 5 functions by self time" in out
    assert "Top 5 functions by total time" in out
    assert "Native calls by Python functions" in out
    assert "Exceptions" in out
    # Aligned columns: numbers end under the end of their header. All rows, as fib
    # need not be in the top 5 by self time: a loaded machine can preempt an import
    # for longer than fib(15) runs (CI, 2026-11-30).
    code, out, err = run_cli(["report", str(workload.trace.path), "--top", "0"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if "calls  exc  function" in line)
    calls_end = lines[header].index("calls") + len("calls")
    fib_row = next(line for line in lines[header:] if re.search(r"\bfib\b", line))
    assert fib_row[:calls_end].endswith(" 1,973") and fib_row[calls_end] == " "


def test_report_threads_and_mpi_rank(tracer: Tracer, capsys: pytest.CaptureFixture[str]) -> None:
    run = tracer.run(
        """
        import threading

        def work(n):
            return sum(range(n))

        def worker(n):
            for _ in range(n):
                work(10)

        threads = [threading.Thread(target=worker, args=(k + 2,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        """,
        env={"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"},
    )
    report = report_json(str(run.trace.path), "--top", "0")
    [proc] = report["processes"]
    assert proc["label"] == "rank 3"
    assert (proc["mpi_rank"], proc["mpi_size"]) == (3, 4)
    workers = [t for t in proc["threads"] if "worker" in by_qualname(t["functions"])]
    assert len(workers) == 3
    calls = sorted(by_qualname(t["functions"])["work"]["calls"] for t in workers)
    assert calls == [2, 3, 4]
    assert len({t["vtid"] for t in proc["threads"]}) == len(proc["threads"])
    assert by_qualname(proc["functions"])["work"]["calls"] == 9
    code, out, _err = run_cli(["report", str(run.trace.path)], capsys)
    assert code == 0 and "=== rank 3 (pid" in out
    assert re.search(r"^--- all \d+ threads ---$", out, re.MULTILINE)


def test_unbalanced_input_is_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The session starts while frames are running: their ends come without
    # begins. The program leaves by os._exit() with frames still open.
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = tmp_path / "late.py"
    script.write_text(textwrap.dedent(
        f"""
        import os
        import time
        import pinsight_python
        pinsight_python.activate()

        def leaf():
            return 1

        def middle():
            open({str(ready)!r}, "w").close()
            while not os.path.exists({str(go)!r}):
                time.sleep(0.01)
            leaf()

        def outer():
            middle()
            leaf()

        def exits():
            leaf()
            os._exit(0)

        outer()
        exits()
        """
    ))
    out = tmp_path / "trace"
    # Its own run only (as tests/tracing.isolated): another process of the user
    # recorded by the same session would be another process in the report.
    gid = random.randrange(200_000, 2**31 - 1) if os.geteuid() == 0 else None
    session = lttng.Session(out, track_vgid=gid)
    session.create()
    try:
        proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path,
                                preexec_fn=None if gid is None else lambda: os.setgid(gid))  # noqa: PLW1509 (the session tracks the group)
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():
                assert proc.poll() is None and time.monotonic() < deadline, "program did not start"
                time.sleep(0.01)
            session.start()
            go.touch()
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        session.destroy()
    truth = bt2_read_trace(out)
    ends = collections.Counter(e.fields["qualname"] for e in truth.named("function_end"))
    assert ends["middle"] == ends["outer"] == 1 and not truth.functions()["middle"]

    report = report_json(str(out), "--top", "0")
    [proc_report] = report["processes"]
    unbalanced = proc_report["unbalanced"]
    assert unbalanced["ends_without_begin"] >= 2  # middle, outer (and a native call)
    assert unbalanced["open_at_end"] >= 2  # exits, os._exit
    funcs = by_qualname(proc_report["functions"])
    assert funcs["leaf"]["calls"] == 3 and funcs["exits"]["calls"] == 1
    assert "middle" not in funcs and "outer" not in funcs
    code, text, _err = run_cli(["report", str(out)], capsys)
    assert code == 0 and "Unbalanced input:" in text and "without a begin" in text
    assert "open at trace end" in text


def test_parallel_decoding_matches_single_thread(tracer: Tracer) -> None:
    # Threads pinned to different CPUs fill different per-CPU streams, which
    # the reader decodes on separate threads and merges by time.
    run = tracer.run(
        """
        import os
        import threading

        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        def worker(cpu):
            os.sched_setaffinity(0, {cpu % os.cpu_count()})
            for _ in range(3):
                fib(16)
                sorted(range(50), key=lambda v: -v)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        """
    )
    streams = [p for p in run.trace.path.rglob("*") if p.is_file() and p.parent.name == "64-bit"
               and p.name != "metadata" and p.stat().st_size > 64 * 1024]
    assert len(streams) >= 2, "the events did not spread over two streams"
    one = read_trace(run.trace.path, decode_threads=1, progress="never").raw
    two = read_trace(run.trace.path, decode_threads=2, progress="never").raw
    assert (one.decode_threads, two.decode_threads) == (1, 2)
    # Every figure but the reader's own threads and CPU times is the same.
    own = {"decode_threads", "decode_cpu_s", "decode_thread_cpu_s", "analysis_cpu_s"}
    fields = [name for name in reader_fields(one) if name not in own]
    assert len(fields) == len(one) - len(own)
    assert [getattr(one, f) for f in fields] == [getattr(two, f) for f in fields]
    assert one.events == len(run.trace.counted)


def reader_fields(record: Any) -> List[str]:
    """The field names of one of the reader's records (its PyStructSequence members)."""
    return [name for name, value in vars(type(record)).items()
            if isinstance(value, types.MemberDescriptorType)]


def test_processes_of_several_hosts_stay_apart(
    workload: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two copies of one trace, the second renamed to another host in its
    # metadata: the same vpids, two different processes.
    combined = tmp_path / "combined"
    shutil.copytree(workload.trace.path, combined / "a")
    shutil.copytree(workload.trace.path, combined / "b")
    host = socket.gethostname()
    other = ("y" if host[0] == "x" else "x") * len(host)
    for metadata in (combined / "b").rglob("metadata"):
        data = metadata.read_bytes()
        assert f'hostname = "{host}";'.encode() in data
        metadata.write_bytes(data.replace(f'hostname = "{host}";'.encode(),
                                          f'hostname = "{other}";'.encode()))
    report = report_json(str(combined), "--top", "0")
    assert report["events"] == 2 * len(workload.trace.counted)
    hosts = {p["host"]: p for p in report["processes"]}
    assert set(hosts) == {host, other}
    assert hosts[host]["vpid"] == hosts[other]["vpid"]
    assert hosts[other]["label"].endswith(f"(pid {hosts[other]['vpid']} on {other})")
    for proc in hosts.values():
        assert by_qualname(proc["functions"])["fib"]["calls"] == 1973
        assert proc["unbalanced"] == {"ends_without_begin": 0, "implicitly_closed": 0,
                                      "open_at_end": 0, "stepped_aside": 0, "cut_by_damage": 0}
    chrome = tmp_path / "trace.json"
    assert run_cli(["export", str(combined), "-o", str(chrome)], capsys)[0] == 0
    events = json.loads(chrome.read_text())["traceEvents"]
    assert len({e["pid"] for e in events if e["ph"] == "B"}) == 2
    check_chrome_nesting(events)


# ---------------------------------------------------------------------------- discarded events


def test_discarded_events_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "busy.py"
    script.write_text(textwrap.dedent(
        """
        import pinsight_python
        pinsight_python.activate()

        def f(n):
            return n if n < 2 else f(n - 1) + f(n - 2)

        for _ in range(3):
            f(21)
        """
    ))
    out = tmp_path / "trace"
    # Two 4 KiB sub-buffers per CPU cannot keep up with ~200k events.
    with isolated_session(out, subbuf_size="4k", num_subbuf=2) as run_as:
        subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path,
                       preexec_fn=run_as)
    truth = bt2_read_trace(out)
    assert truth.discarded > 0, "the tiny channel discarded nothing: the test proves nothing"

    report = report_json(str(out), "--top", "0")
    assert report["discarded"]["events"] == truth.discarded
    assert report["discarded"]["ranges"] and report["discarded"]["records"] >= 1
    assert all(r["count"] > 0 for r in report["discarded"]["ranges"])
    assert any("discarded" in w and "unreliable" in w for w in report["warnings"])
    assert report["events"] == len(truth.counted)

    code, text, _err = run_cli(["report", str(out)], capsys)
    assert code == 0
    assert f"WARNING: LTTng discarded {truth.discarded:,} events" in text

    chrome = tmp_path / "trace.json"
    code, _out, err = run_cli(["export", str(out), "-o", str(chrome)], capsys)
    assert code == 0, err
    data = json.loads(chrome.read_text())
    # What export says it wrote is what the file holds (issue 34, point 5).
    assert f"wrote {chrome}: {len(data['traceEvents']):,} trace events from " in err, err
    instants = [e for e in data["traceEvents"] if e["ph"] == "i"]
    assert sum(e["args"]["count"] for e in instants) == truth.discarded
    assert data["otherData"]["discarded_events"] == truth.discarded


# ---------------------------------------------------------------------------- flamegraph


def parse_folded(text: str) -> List[Tuple[List[str], int]]:
    rows = []
    for line in text.splitlines():
        match = re.fullmatch(r"(.+) (\d+)", line)
        assert match, f"not a folded line: {line!r}"
        rows.append((match.group(1).split(";"), int(match.group(2))))
    return rows


def test_folded_stacks(workload: Run, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["flamegraph", str(workload.trace.path), "--folded"], capsys)
    assert code == 0, err
    rows = parse_folded(out)
    expected = reference(workload.trace)
    vpid = next(iter(expected))[0]
    # Per thread, the weights add up to the time spent in its bottom frames.
    per_thread: Dict[str, int] = collections.Counter()
    for frames, weight in rows:
        assert re.fullmatch(rf"prog\d+\.py \(pid {vpid}\)", frames[0]), frames[0]
        per_thread[frames[1]] += weight
    report = report_json(str(workload.trace.path), "--top", "0")
    labels = {t["vtid"]: t["label"] for p in report["processes"] for t in p["threads"]}
    for (_vpid, vtid), ref in expected.items():
        if ref.root_ns:
            assert per_thread[labels[vtid]] == ref.root_ns
    # fib(15) recurses 15 deep; native calls are leaves named by their callee.
    fib_name = next(f for frames, _ in rows for f in frames if f.startswith("fib ("))
    assert fib_name.endswith(f".py:{def_line('fib')})")
    assert max(frames.count(fib_name) for frames, _ in rows) == 15
    assert any(frames[-1] == "math.sqrt" and frames[-2].startswith("fails (") for frames, _ in rows)
    # Python called back from native code nests inside the native frame.
    assert any(frames[-2:-1] == ["sorted"] and frames[-1].startswith("main.<locals>.<lambda>")
               for frames, _ in rows)


def calls_in(title: str) -> int:
    match = re.search(r"calls ([\d,]+)", title)
    assert match, title
    return int(match.group(1).replace(",", ""))


def test_flamegraph_svg(workload: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    svg_path = tmp_path / "out.svg"
    code, _out, err = run_cli(["flamegraph", str(workload.trace.path), "-o", str(svg_path),
                               "--title", "demo", "--min-width", "0"], capsys)
    assert code == 0, err
    root = ET.parse(svg_path).getroot()
    svg = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{svg}svg"
    frames = root.findall(f"{svg}g")
    titles = [g.findtext(f"{svg}title") or "" for g in frames]
    fib_calls = [calls_in(t) for t in titles if t.startswith("fib (")]
    assert sum(fib_calls) == 1973 and len(fib_calls) == 15  # one box per depth
    assert any(t.startswith("math.sqrt\n") for t in titles)  # a native frame
    widths = [float(rect.get("width", "0")) for rect in root.iter(f"{svg}rect")]
    assert sorted(widths)[-2] == pytest.approx(1200 - 20, abs=0.01)  # the root spans the graph
    assert "demo" in ET.tostring(root, encoding="unicode")


# ---------------------------------------------------------------------------- export


def chrome_slices(events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The slices the begin ("B") and end ("E") events make, each with the
    begin's fields, its "dur" and the end's args merged, as viewers do; checks
    that the events are in time order and nest like a stack per (pid, tid)."""
    timed = [e for e in events if e["ph"] != "M"]
    assert [e["ts"] for e in timed] == sorted(e["ts"] for e in timed), "not in time order"
    stacks: Dict[Tuple[int, int], List[Dict[str, Any]]] = collections.defaultdict(list)
    slices = []
    for e in timed:
        track = (e.get("pid", 0), e.get("tid", 0))
        if e["ph"] == "B":
            stacks[track].append(e)
        elif e["ph"] == "E":
            assert stacks[track], f"{track}: an end without a begin"
            begin = stacks[track].pop()
            merged = dict(begin, dur=e["ts"] - begin["ts"])
            merged["args"] = {**begin.get("args", {}), **e.get("args", {})}
            slices.append(merged)
    assert not any(stacks.values()), "begins without an end"
    return slices


def check_chrome_nesting(events: List[Dict[str, Any]]) -> None:
    """Per (pid, tid), begins and ends nest like a stack, in time order."""
    chrome_slices(events)


def test_chrome_export(workload: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.json"
    code, _out, err = run_cli(["export", "--format", "chrome", str(workload.trace.path),
                               "-o", str(out)], capsys)
    assert code == 0, err
    assert "wrote" in err and not (tmp_path / "trace.json.partial").exists()
    data = json.loads(out.read_text())
    assert data["displayTimeUnit"] == "ns"
    events = data["traceEvents"]
    trace = workload.trace
    pairs = {(e.ctx["vpid"], e.ctx["vtid"]) for e in trace.events}
    complete = chrome_slices(events)
    assert {(e["pid"], e["tid"]) for e in complete} <= pairs
    begins = sum(1 for e in trace.events if e.short in ("function_begin", "c_call_begin"))
    assert len(complete) == begins  # one slice per frame segment, native calls included
    names = collections.Counter(e["name"] for e in complete)
    assert names["fib"] == 1973
    sqrt_calls = [e for e in trace.named("c_call_begin") if e.fields["callee_name"] == "math.sqrt"]
    assert names["math.sqrt"] == len(sqrt_calls) >= 4
    assert all(e["cat"] == "native" for e in complete if e["name"] == "math.sqrt")
    fib = next(e for e in complete if e["name"] == "fib")
    assert fib["cat"] == "python" and fib["args"]["line"] == def_line("fib")
    assert fib["args"]["file"].endswith(".py")
    assert {e["args"].get("exit") for e in complete if e["name"] == "fails"} == {"unwind"}
    check_chrome_nesting(events)
    metadata = {(e["name"], e["pid"]) for e in events if e["ph"] == "M"}
    for pid, _tid in pairs:
        assert ("process_name", pid) in metadata and ("thread_name", pid) in metadata
    first = min(e.ts for e in trace.events)
    assert data["otherData"]["origin_ns"] == first
    # ts are microseconds from the first event, exact to the nanosecond.
    ends = [e for e in trace.events if e.short == "function_end" and e.fields["qualname"] == "main"]
    main = next(e for e in complete if e["name"] == "main")
    assert main["ts"] + main["dur"] == pytest.approx((ends[0].ts - first) / 1000, abs=1e-3)


# ---------------------------------------------------------------------------- CLI errors


def cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, check=False)


def test_cli_unwritable_output(workload: Run, tmp_path: Path) -> None:
    target = tmp_path / "missing-dir" / "trace.json"
    proc = cli_process("export", str(workload.trace.path), "-o", str(target))
    assert proc.returncode == 1
    assert f"cannot write {target}" in proc.stderr
    proc = cli_process("flamegraph", str(workload.trace.path), "-o", str(target))
    assert proc.returncode == 1


def test_console_script_is_installed(workload: Run) -> None:
    script = Path(sys.executable).with_name("pinsight-python")
    assert script.exists(), f"{script}: the pyproject entry point is not installed"
    proc = subprocess.run([str(script), "report", str(workload.trace.path), "--top", "1"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Top 1 functions by self time" in proc.stdout


# ---------------------------------------------------------------------------- progress


def test_progress_forced_during_read(workload: Run) -> None:
    stream = io.StringIO()
    data = read_trace(workload.trace.path, progress="always", progress_stream=stream)
    assert data.events == len(workload.trace.counted)
    # A short read shows no bar (the delay) and leaves the line clean.
    assert stream.getvalue() == ""
    assert os.fspath(data.path) == os.fspath(workload.trace.path)
