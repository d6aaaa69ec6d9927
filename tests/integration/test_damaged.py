"""A damaged trace is read up to the damage and past it: real traces recorded here, in
the per-event (compact) and batched payloads, of two processes each pinned to a CPU of
its own, so that each writes a stream file of its own (LTTng's per-CPU buffers).

The damage is made on a copy (tests/tracing.py) to process A's stream file; the read is
compared with the reference (the intact trace without the damaged packets, taken out
whole, which babeltrace2 reads as it is), and process B is read in full. Small
sub-buffers give the stream files hundreds of packets: damage in the middle of one
leaves packets to read after it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from pinsight_python import cli
from pinsight_python.reading import analysis, summary
from tests.tracing import (
    IndexedPacket,
    clean_env,
    copy_trace_dir,
    ctf_trace_dir,
    cut_file,
    cut_metadata_text,
    garble,
    indexed_packets,
    isolated_session,
    metadata_text,
    reader_counts,
    stream_files,
    without_packets,
)

PROGRAM = textwrap.dedent(
    """
    import os, sys, threading, time
    import pinsight_python

    os.sched_setaffinity(0, {int(sys.argv[1])})  # its threads too: one stream file

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def work(rounds):
        for _ in range(rounds):
            fib(12)
            sorted(range(30))
            time.sleep(0.001)  # the consumer keeps up: no discards

    def main():
        helper = threading.Thread(target=work, args=(30,))
        helper.start()
        work(60)
        helper.join()

    pinsight_python.activate(events=["function", "c_call"], payload=sys.argv[2])
    main()
    """
)


class Recorded:
    """A trace of processes A and B, and which stream file holds each."""

    def __init__(self, trace_dir: Path, pids: Tuple[int, int], payload: str) -> None:
        self.trace_dir = trace_dir
        self.pids = pids
        self.payload = payload
        self.files: Dict[int, Path] = {}
        for stream in stream_files(trace_dir):
            alone = trace_dir.parent / f"only-{stream.name}"
            copy_trace_dir(trace_dir, alone)
            for other in stream_files(alone):
                if other.name != stream.name:
                    other.unlink()
                    (alone / "index" / f"{other.name}.idx").unlink()
            vpids = {vpid for vpid, _ in reader_counts(alone)["threads"]}
            if len(vpids) == 1:
                self.files[vpids.pop()] = stream
        assert set(self.files) == set(pids), f"{self.files} {pids}: one stream file each"


@pytest.fixture(scope="module", params=["compact", "batched"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("two processes on two CPUs of their own need two CPUs")
    tmp = tmp_path_factory.mktemp(f"damaged-{request.param}")
    script = tmp / "program.py"
    script.write_text(PROGRAM)
    out = tmp / "trace"
    with isolated_session(out, subbuf_size="8k", num_subbuf=128) as run_as:
        procs = [subprocess.Popen([sys.executable, str(script), str(cpu), request.param],
                                  env=clean_env(), cwd=tmp,
                                  preexec_fn=run_as)  # noqa: PLW1509 (a setgid only, before exec)
                 for cpu in cpus[:2]]
        for proc in procs:
            assert proc.wait(timeout=120) == 0
    return Recorded(ctf_trace_dir(out), (procs[0].pid, procs[1].pid), request.param)


@pytest.fixture
def trace(recorded: Recorded, tmp_path: Path) -> Path:
    return copy_trace_dir(recorded.trace_dir, tmp_path / "trace")


def reference(recorded: Recorded, stream: Path, dropped: List[int], tmp_path: Path
              ) -> Dict[str, Any]:
    ref = copy_trace_dir(recorded.trace_dir, tmp_path / "reference")
    without_packets(ref / stream.name, dropped)
    return reader_counts(ref)


def report(path: Path) -> Tuple[Dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["report", str(path), "--json", "--top", "0"])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue()), err.getvalue()


def process_b_in_full(recorded: Recorded, got: Dict[str, Any]) -> None:
    intact = reader_counts(recorded.trace_dir)["threads"]
    b = recorded.pids[1]
    theirs = {key: value for key, value in intact.items() if key[0] == b}
    assert theirs and {key: got["threads"][key] for key in theirs} == theirs


def stream_a(recorded: Recorded, trace: Path) -> Tuple[Path, List[IndexedPacket]]:
    stream = trace / recorded.files[recorded.pids[0]].name
    packets = indexed_packets(stream)
    assert len(packets) >= 10, f"{stream}: {len(packets)} packets"
    return stream, packets


def test_cut_in_a_packet(recorded: Recorded, trace: Path, tmp_path: Path) -> None:
    stream, packets = stream_a(recorded, trace)
    k = len(packets) // 2
    cut_file(stream, packets[k].offset + packets[k].size // 2)
    got = reader_counts(trace)
    assert got == reference(recorded, stream, list(range(k, len(packets))), tmp_path)
    process_b_in_full(recorded, got)
    rep, err = report(trace)
    [found] = rep["damaged_files"]
    assert Path(found["file"]).name == stream.name and found["kinds"] == ["cut"]
    assert f"trace damaged: {stream}" in err
    # A's main() ran across the cut: its frames end there, marked; A's totals are
    # lower bounds, B's are not.
    by_pid = {p["vpid"]: p for p in rep["processes"]}
    a, b = (by_pid[pid] for pid in recorded.pids)
    assert a["lower_bound"] and not b["lower_bound"]
    main_thread = next(t for t in a["threads"] if t["vtid"] == a["vpid"])
    assert main_thread["lower_bound"] and main_thread["unbalanced"]["cut_by_damage"] >= 1
    assert b["unbalanced"]["cut_by_damage"] == 0


def test_garbled_packet_header(recorded: Recorded, trace: Path, tmp_path: Path) -> None:
    stream, packets = stream_a(recorded, trace)
    k = len(packets) // 2
    garble(stream, packets[k].offset, b"\xde\xad\xbe\xef")
    got = reader_counts(trace)
    assert got == reference(recorded, stream, [k], tmp_path)
    process_b_in_full(recorded, got)
    rep, _ = report(trace)
    [found] = rep["damaged_files"]
    assert found["kinds"] == ["bad_packet_header"] and found["packets"] == 1
    assert rep["discarded"]["packets"] == 0


def test_garbled_events(recorded: Recorded, trace: Path, tmp_path: Path) -> None:
    """64 bytes of 0xff where events are: an event header there names event class
    0xffffffff (or runs past the packet's content), which babeltrace2 cannot decode.
    The packet's events before it are read, the packets after it are."""
    stream, packets = stream_a(recorded, trace)
    k = len(packets) // 2
    # The compact payload's events are integers only: any spot hits an event header.
    # A batched block is one long event: the packet's first event header, at byte 84
    # (after LTTng's packet header, 32 bytes, and context, 52).
    middle = packets[k].content_bits // 16
    at = packets[k].offset + (middle if recorded.payload == "compact" else 84)
    garble(stream, at, b"\xff" * 64)
    got = reader_counts(trace)
    expected = reference(recorded, stream, [k], tmp_path)
    rep, err = report(trace)
    [found] = rep["damaged_files"]
    assert found["kinds"] == ["undecodable"] and found["packets"] == 1
    assert expected["events"] <= got["events"] <= expected["events"] + found["events_read"]
    process_b_in_full(recorded, got)
    assert "babeltrace2 could not decode" in err


@pytest.mark.parametrize("kind", ["empty", "no_whole_packet"])
def test_whole_stream_file_lost(recorded: Recorded, trace: Path, tmp_path: Path,
                                kind: str) -> None:
    stream, packets = stream_a(recorded, trace)
    cut_file(stream, 0 if kind == "empty" else packets[0].size // 3)
    got = reader_counts(trace)
    assert got == reference(recorded, stream, list(range(len(packets))), tmp_path)
    process_b_in_full(recorded, got)
    [found] = report(trace)[0]["damaged_files"]
    assert found["kinds"] == [kind]


def test_indexes_missing_or_cut_lose_nothing(recorded: Recorded, trace: Path) -> None:
    intact = reader_counts(recorded.trace_dir)
    stream, _ = stream_a(recorded, trace)
    index = trace / "index" / f"{stream.name}.idx"
    cut_file(index, index.stat().st_size - 100)
    assert reader_counts(trace) == intact
    assert report(trace)[0]["damaged_files"][0]["nothing_lost"]
    index.unlink()
    assert reader_counts(trace) == intact
    assert report(trace)[0]["damaged_files"] == []


def test_metadata_cut_in_its_middle(recorded: Recorded, trace: Path) -> None:
    """Cut inside the declaration of an event class the program used (the compact
    payload's function ends; the batched one's code_info, after its blocks'): where
    LTTng declared the stream before it, every packet is read up to its first event of
    a class the metadata lost; where after, babeltrace2 can read nothing of the trace."""
    text = metadata_text(trace)
    lost = "compact_function_end" if recorded.payload == "compact" else "code_info"
    cut_at = text.index(f'name = "python_pinsight_lttng_ust:{lost}"')
    cut_metadata_text(trace, cut_at)
    proc = subprocess.run([sys.executable, "-m", "pinsight_python.cli", "report", str(trace),
                           "--json"], capture_output=True, text=True, check=False)
    if text.index("\nstream {") > cut_at:
        assert proc.returncode == 1, proc.stderr
        assert "metadata is cut before its stream declaration" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    found = {Path(f["file"]).name: f for f in rep["damaged_files"]}
    assert found["metadata"]["kinds"] == ["cut_metadata"]
    assert "the cut metadata does not declare" in proc.stderr
    intact = reader_counts(recorded.trace_dir)
    assert 0 < rep["events"] < intact["events"]
    if recorded.payload == "compact":
        assert rep["event_counts"]["function_end"] == 0  # every one of them lost
        assert rep["event_counts"]["function_begin"] > 0


def test_summary_and_unbatch(recorded: Recorded, trace: Path, tmp_path: Path) -> None:
    stream, packets = stream_a(recorded, trace)
    garble(stream, packets[len(packets) // 3].offset, b"\x00" * 8)
    lines = summary.summarize(trace, progress="never")
    # With the warnings that come first (LTTng's discards, under load), before the figures.
    figures = next(i for i, line in enumerate(lines) if line.startswith("events:"))
    assert any(line.startswith(f"WARNING: trace damaged: {stream}")
               for line in lines[:figures]), lines
    if recorded.payload != "batched":
        return
    out = tmp_path / "unbatched"
    proc = subprocess.run([sys.executable, "-m", "pinsight_python.cli", "unbatch", "-o",
                           str(out), str(trace)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"trace damaged: {stream}" in proc.stderr
    # The per-event rewrite holds what the damaged trace gave.
    got, rewritten = reader_counts(trace), reader_counts(out)
    assert got["threads"] == rewritten["threads"]
    assert analysis.read_trace(out, progress="never").raw.damaged == []
