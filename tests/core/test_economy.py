"""Trace economy (issue 16): the compact payload gives the analyses what the full one
gives, and its names are found in traces that start late.

- The same deterministic workload traced with each payload: the reader's report,
  folded stacks and Chrome export, and both Trace Compass analyses (replayed),
  agree on everything but times and process ids.
- A session created 2 s after the program started, and a snapshot (flight-recorder)
  session whose buffers wrapped, still name the functions (code_info is written
  again with a code object's first event after each tick of the naming epoch).
"""

from __future__ import annotations

import collections
import json
import os
import random
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Dict

import pytest

from pinsight_python.recording import lttng
from tests.tracing import (
    ANALYSES,
    MIXED_WORKLOAD,
    Trace,
    Tracer,
    chrome_frames,
    clean_env,
    cli,
    folded_stacks,
    normalized,
    read_trace,
    replayed_stacks,
)


def stream_bytes(trace_dir: Path) -> int:
    """The bytes of the trace's events: its packets' contents, from LTTng's index
    files (the stream files hold whole sub-buffers, padding included)."""
    total = 0
    for index in trace_dir.rglob("*.idx"):
        data = index.read_bytes()
        entry_len = struct.unpack(">I", data[12:16])[0]
        for offset in range(16, len(data) - entry_len + 1, entry_len):
            # struct ctf_packet_index: offset, packet_size, content_size (bits), ...
            total += struct.unpack(">Q", data[offset + 16 : offset + 24])[0] // 8
    assert total > 0, f"{trace_dir}: no packet indexed"
    return total


# ---------------------------------------------------------------------------- normalizing


# ---------------------------------------------------------------------------- choosing


def test_payload_key_and_overrides(tmp_path: Path) -> None:
    from pinsight_python import _pinsight_python_testing as testing

    def parse(text: str) -> Dict[str, Any]:
        return testing._parse_config_string(textwrap.dedent(text), "cfg.txt")

    assert parse("[Python]\ntrace_mode = TRACING\n")["payload"] == "full"
    assert parse("[Python.default]\n    payload = Compact\n")["payload"] == "compact"
    with pytest.raises(ValueError) as caught:
        parse("[Python]\npayload = tiny\n")
    assert str(caught.value) == (
        "cfg.txt:2: unknown payload 'tiny' (expected full, compact or batched)"
    )

    config = tmp_path / "compact.txt"
    config.write_text("[Python]\npayload = compact\n")
    probe = (
        "import pinsight_python as p, sys\n"
        "try:\n"
        "    p.activate(**eval(sys.argv[1]))\n"
        "except ValueError as e:\n"
        "    print('error:', e); raise SystemExit\n"
        "print(p.status()['payload'])\n"
    )

    def payload(kwargs: str, **env: str) -> str:
        environ = clean_env()
        proc = subprocess.run(
            [sys.executable, "-c", probe, kwargs],
            capture_output=True,
            text=True,
            env={**environ, **env},
            check=True,
        )
        return proc.stdout.strip()

    assert payload("{}") == "full"
    assert payload(f"dict(config={str(config)!r})") == "compact"
    assert payload(f"dict(config={str(config)!r})", PINSIGHT_PYTHON_PAYLOAD="full") == "full"
    assert payload("dict(payload='compact')", PINSIGHT_PYTHON_PAYLOAD="full") == "compact"
    assert payload("{}", PINSIGHT_PYTHON_PAYLOAD="small") == (
        "error: PINSIGHT_PYTHON_PAYLOAD: unknown payload 'small' "
        "(expected full, compact or batched)"
    )


# ---------------------------------------------------------------------------- same results


@pytest.fixture(scope="module")
def both_payloads(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Trace]:
    tmp = tmp_path_factory.mktemp("economy")
    work = tmp / "work.py"
    work.write_text(textwrap.dedent(MIXED_WORKLOAD))
    tracer = Tracer(tmp)
    code = f"import runpy\nrunpy.run_path({str(work)!r}, run_name='__main__')\n"
    traces = {}
    for payload in ("full", "compact"):
        run = tracer.run(code, env={"PINSIGHT_PYTHON_PAYLOAD": payload})
        assert run.trace.discarded == 0
        traces[payload] = run.trace
    return traces


def test_compact_events_carry_ids_and_names_come_once(both_payloads: Dict[str, Trace]) -> None:
    full, compact = both_payloads["full"], both_payloads["compact"]
    kinds = collections.Counter(e.short for e in compact.events)
    assert not {"function_begin", "function_end", "c_call_begin", "c_call_end"} & set(kinds)
    assert not {k for k in collections.Counter(e.short for e in full.events) if "compact" in k}
    for e in compact.events:
        if e.short.startswith("compact_"):
            strings = [k for k, v in e.fields.items() if isinstance(v, str) and k != "transition"]
            assert not strings, e
    # Names once per code object and callable in this short run (one epoch or two).
    named = collections.Counter(e.fields["code_id"] for e in compact.named("code_info"))
    assert named and max(named.values()) <= 3
    names = {e.fields["qualname"] for e in compact.named("code_info")}
    assert {"leaf", "numbers", "Box.total", "worker", "main"} <= names
    assert "math.sqrt" in {e.fields["name"] for e in compact.named("callable_info")}
    # The contexts the analyses need, no more; process_info has the process name.
    assert set(compact.events[0].ctx) == {"vpid", "vtid"}
    (info,) = compact.named("process_info")
    assert info.fields["procname"].startswith("python")
    # Fewer bytes for the same events; the full payload names its files in
    # code_info too, once per code object (its events keep qualname and line).
    names_events = kinds["code_info"] + kinds["callable_info"]
    full_names = collections.Counter(e.fields["code_id"] for e in full.named("code_info"))
    assert full_names and max(full_names.values()) <= 3
    assert not full.named("callable_info")
    assert len(compact.events) - names_events == len(full.events) - sum(full_names.values())
    # The full events keep the qualname and line; compact's ids are written once.
    assert stream_bytes(compact.path) < 0.85 * stream_bytes(full.path)


def test_reader_results_agree(both_payloads: Dict[str, Trace], tmp_path: Path) -> None:
    full, compact = both_payloads["full"], both_payloads["compact"]
    reports = {
        name: json.loads(cli("report", "--json", "--top", "0", str(t.path)))
        for name, t in both_payloads.items()
    }
    for report in reports.values():
        for proc in report["processes"]:
            assert proc["unbalanced"]["implicitly_closed"] == 0
    assert normalized(reports["full"]) == normalized(reports["compact"])
    names = {f["name"] for p in reports["compact"]["processes"] for f in p["functions"]}
    assert {"leaf", "numbers", "Box.total", "math.sqrt", "len"} <= names
    assert not [n for n in names if n.startswith("<code")]

    folded = {name: folded_stacks(cli("flamegraph", "--folded", str(t.path)))
              for name, t in both_payloads.items()}
    assert folded["full"] == folded["compact"] and folded["full"]

    exported = {}
    for name, t in both_payloads.items():
        out = tmp_path / f"{name}.json"
        cli("export", "-o", str(out), str(t.path))
        exported[name] = chrome_frames(out)
    assert exported["full"] == exported["compact"] and exported["full"]
    assert full.path != compact.path


@pytest.mark.parametrize(("path", "callstack_id"), ANALYSES, ids=["callstack", "crossdomain"])
def test_trace_compass_results_agree(
    both_payloads: Dict[str, Trace], path: Path, callstack_id: str
) -> None:
    full = replayed_stacks(both_payloads["full"].events, path, callstack_id)
    compact = replayed_stacks(both_payloads["compact"].events, path, callstack_id)
    assert full == compact
    names = {name for stack in compact for _, name in stack}
    assert {"leaf", "numbers", "Box.total", "math.sqrt", "len"} <= names


# ---------------------------------------------------------------------------- late traces

LOOP = """
import os, sys, time
import pinsight_python
pinsight_python.activate(payload=sys.argv[4])
def tick(i):
    return sum(range(i % 50))
def slow_phase(seconds, stop_file):
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end and not os.path.exists(stop_file):
        tick(i)
        i += 1
        time.sleep(0.002)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
print("ready", flush=True)
for _ in range(int(sys.argv[1])):
    fib(18)
slow_phase(float(sys.argv[2]), sys.argv[3])
"""


def run_late(
    tmp_path: Path, session: lttng.Session, burst: int, snapshot: bool, payload: str = "compact"
) -> Trace:
    """Run LOOP: after its burst of fib, a slow phase calling tick() every 2 ms.

    Not a snapshot: the session is created 2 s after the program started, and
    the program stops 2.5 s later. A snapshot: the session records the whole
    run, whose slow phase lasts 4 s, and the snapshot is taken at its end.
    """
    gid = random.randrange(200_000, 2**31 - 1)  # the session records this group only
    session.track_vgid = gid

    # A snapshot wraps only the buffers of the CPUs the program ran on: on one
    # CPU all its events share one buffer, which the slow phase overwrites many
    # times (unpinned, a busy machine could leave the start on a CPU it left).
    cpu = min(os.sched_getaffinity(0))

    def in_group() -> None:
        os.setgid(gid)
        if snapshot:
            os.sched_setaffinity(0, {cpu})

    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(LOOP))
    stop = tmp_path / "stop"
    argv = [sys.executable, str(script), str(burst), "4" if snapshot else "100", str(stop), payload]
    if not snapshot:
        with subprocess.Popen(
            argv, stdout=subprocess.PIPE, text=True, preexec_fn=in_group  # noqa: PLW1509
        ) as proc:
            try:
                assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
                time.sleep(2.0)  # the program runs and writes its names: no session yet
                session.create()
                session.start()
                time.sleep(2.5)
                stop.touch()
                assert proc.wait(timeout=60) == 0
            finally:
                if proc.poll() is None:
                    proc.kill()
                session.destroy()
    else:
        session.create()
        try:
            session.start()
            run = subprocess.run(
                argv, capture_output=True, text=True, preexec_fn=in_group,
                timeout=120, check=False,
            )
            assert run.returncode == 0, run.stderr
            session.record_snapshot()
        finally:
            session.destroy()
    assert session.output is not None
    return read_trace(session.output)


def report_names(trace: Trace) -> Dict[str, int]:
    report = json.loads(cli("report", "--json", "--top", "0", str(trace.path)))
    return {
        f["name"]: f["calls"] for p in report["processes"] for f in p["functions"]
    }


def test_session_started_after_the_program_names_functions(tmp_path: Path) -> None:
    session = lttng.Session(tmp_path / "late")
    trace = run_late(tmp_path, session, burst=1, snapshot=False)
    # The program's start (its process_info, the first code_info) is not in the trace.
    assert not trace.named("process_info")
    assert trace.named("compact_function_begin")
    names = report_names(trace)
    assert names.get("tick", 0) > 50, names
    assert names.get("slow_phase", 0) == 0  # running before the session: no begin
    replayed = replayed_stacks(trace.events, *ANALYSES[0], whole=False)
    assert any(name == "tick" for stack in replayed for _, name in stack)


@pytest.mark.parametrize("payload", ["compact", "full"])
def test_snapshot_session_names_functions(tmp_path: Path, payload: str) -> None:
    # Buffers that the run overwrites many times (256 KiB per CPU, 2-3 s of the
    # slow phase): the snapshot holds only the end of the run, long after the
    # first code_info went out. The full payload names its files there too.
    session = lttng.Session(tmp_path / "snap", snapshot=True, subbuf_size="64K", num_subbuf=4)
    trace = run_late(tmp_path, session, burst=40, snapshot=True, payload=payload)
    assert not trace.named("process_info"), "the buffers did not wrap"
    report = json.loads(cli("report", "--json", "--top", "0", str(trace.path)))
    # One row: events written before tick's code_info of the snapshot are the same function.
    [tick] = [f for p in report["processes"] for f in p["functions"] if f["name"] == "tick"]
    assert tick["calls"] > 50, tick
    assert tick["filename"] == str(tmp_path / "loop.py")
    replayed = replayed_stacks(trace.events, *ANALYSES[1], whole=False)
    assert any(name == "tick" for stack in replayed for _, name in stack)
