"""A damaged trace is read up to the damage and past it, on the small committed traces
(tests/unit/traces: real recordings, no LTTng needed to read them).

Each kind of damage is made on a copy (tests/tracing.py) and the read compared with a
reference: the same trace with the damaged packets taken out whole, which babeltrace2
reads as it is. tests/integration/test_damaged.py does the same on larger traces
recorded there and then (per-event and batched payloads, two processes).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from pinsight_python import cli
from pinsight_python.reading import analysis
from tests.tracing import (
    IndexedPacket,
    copy_trace_dir,
    ctf_trace_dir,
    cut_file,
    cut_metadata_text,
    garble,
    indexed_packets,
    metadata_text,
    reader_counts,
    stream_files,
    without_packets,
)

TRACES = Path(__file__).resolve().parent / "traces"


def cli_run(*args: str) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def report(path: Path) -> Tuple[Dict[str, Any], str]:
    code, out, err = cli_run("report", str(path), "--json", "--top", "0")
    assert code == 0, err
    return json.loads(out), err


@pytest.fixture(params=["full", "full_file_per_event"])
def trace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A copy of a committed trace whose busiest stream file holds several packets (and
    another, tmp_path/original, to make the reference from)."""
    copy_trace_dir(ctf_trace_dir(TRACES / request.param), tmp_path / "original")
    return copy_trace_dir(ctf_trace_dir(TRACES / request.param), tmp_path / "trace")


def busiest(trace_dir: Path) -> Tuple[Path, List[IndexedPacket]]:
    stream = max(stream_files(trace_dir), key=lambda s: len(indexed_packets(s)))
    found = indexed_packets(stream)
    assert len(found) >= 2, stream
    return stream, found


def reference(stream: Path, dropped: List[int], tmp_path: Path) -> Dict[str, Any]:
    """The reader's counts of the intact trace without those packets of `stream`
    (taken out whole)."""
    ref = copy_trace_dir(tmp_path / "original", tmp_path / "reference")
    without_packets(ref / stream.name, dropped)
    return reader_counts(ref)


def damaged_files(report_json: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {Path(f["file"]).name: f for f in report_json["damaged_files"]}


def test_cut_in_a_packet_reads_every_packet_before_it(trace: Path, tmp_path: Path) -> None:
    stream, packets = busiest(trace)
    last = packets[-1]
    cut_file(stream, last.offset + last.size // 2)
    expected = reference(stream, [len(packets) - 1], tmp_path)
    assert reader_counts(trace) == expected
    rep, err = report(trace)
    [(name, found)] = damaged_files(rep).items()
    assert name == stream.name and found["kinds"] == ["cut"]
    assert found["packets"] == 1 and found["bytes"] == last.size // 2
    assert found["begin_ns"] and found["end_ns"]  # the cut packet's header tells its span
    assert f"trace damaged: {stream}" in err and "cut inside a packet" in err
    # The threads that wrote to the stream: their totals are lower bounds.
    assert rep["lower_bounds"]
    assert any(t["lower_bound"] for p in rep["processes"] for t in p["threads"])


def test_zeros_to_the_end_are_a_cut(trace: Path, tmp_path: Path) -> None:
    """An unclean shutdown leaves a file its length with zeros where the last writes
    never landed."""
    stream, packets = busiest(trace)
    last = packets[-1]
    garble(stream, last.offset, b"\0" * last.size)
    assert reader_counts(trace) == reference(stream, [len(packets) - 1], tmp_path)
    assert damaged_files(report(trace)[0])[stream.name]["kinds"] == ["cut"]


def test_an_event_stamped_outside_its_packet_is_left_out(trace: Path, tmp_path: Path) -> None:
    """Garbled bytes in the first event's timestamp (LTTng 2.13: packet header 32 bytes,
    context 52, the first event header at 84, its 32-bit time after a 16-bit id): that
    event and those after it in the packet, timed from it, fall outside the packet."""
    stream, packets = busiest(trace)
    last = packets[-1]
    garble(stream, last.offset + 86, b"\x01\x00\x00\x00")
    got = reader_counts(trace)
    without = reference(stream, [len(packets) - 1], tmp_path)
    rep, _ = report(trace)
    found = damaged_files(rep)[stream.name]
    assert found["kinds"] == ["undecodable"]
    assert without["events"] <= got["events"] < reader_counts(tmp_path / "original")["events"]
    assert found["events_lost"] or found["packets"]


def test_garbled_packet_header_costs_that_packet(trace: Path, tmp_path: Path) -> None:
    stream, packets = busiest(trace)
    k = len(packets) - 2 if len(packets) > 2 else 1
    garble(stream, packets[k].offset, b"\xde\xad\xbe\xef")
    assert reader_counts(trace) == reference(stream, [k], tmp_path)
    rep, _ = report(trace)
    found = damaged_files(rep)[stream.name]
    assert found["kinds"] == ["bad_packet_header"] and found["packets"] == 1
    # The packet the reader left out is not LTTng's discard.
    assert rep["discarded"]["packets"] == 0


def test_garbled_first_packet_header(trace: Path, tmp_path: Path) -> None:
    """babeltrace2 knows a stream by its file's first packet: the reader reads the file
    from its first good packet on (a copy of it)."""
    stream, _ = busiest(trace)
    garble(stream, 0, b"\x00" * 4)
    assert reader_counts(trace) == reference(stream, [0], tmp_path)


def test_garbled_events_cost_the_rest_of_their_packet(trace: Path, tmp_path: Path) -> None:
    stream, packets = busiest(trace)
    k = len(packets) - 2 if len(packets) > 2 else 0
    middle = packets[k].offset + packets[k].content_bits // 16
    garble(stream, middle, b"\xff" * 64)
    got = reader_counts(trace)
    expected = reference(stream, [k], tmp_path)
    rep, err = report(trace)
    found = damaged_files(rep)[stream.name]
    assert found["kinds"] == ["undecodable"] and found["packets"] == 1
    # The packet's events before the damage are read; the other packets whole.
    assert expected["events"] <= got["events"] <= expected["events"] + found["events_read"]
    assert "babeltrace2 could not decode" in err
    # Garbled bytes decode as text that is not UTF-8: read all the same.
    assert rep["events"] == got["events"]


@pytest.mark.parametrize("size", [0, 100])
def test_stream_file_without_a_whole_packet(trace: Path, tmp_path: Path, size: int) -> None:
    stream, packets = busiest(trace)
    cut_file(stream, size)
    assert reader_counts(trace) == reference(stream, list(range(len(packets))), tmp_path)
    found = damaged_files(report(trace)[0])[stream.name]
    assert found["kinds"] == ["empty" if size == 0 else "no_whole_packet"]


def test_nothing_left_to_read_is_an_error(trace: Path) -> None:
    for stream in stream_files(trace):
        cut_file(stream, 0)
    code, _, err = cli_run("report", str(trace))
    assert code == 1
    assert "nothing of the trace could be read" in err and "empty" in err


def test_missing_index_loses_nothing(trace: Path, tmp_path: Path) -> None:
    intact = reader_counts(trace)
    stream, _ = busiest(trace)
    (stream.parent / "index" / f"{stream.name}.idx").unlink()
    assert reader_counts(trace) == intact
    assert report(trace)[0]["damaged_files"] == []


def test_cut_index_loses_nothing(trace: Path, tmp_path: Path) -> None:
    intact = reader_counts(trace)
    stream, _ = busiest(trace)
    index = stream.parent / "index" / f"{stream.name}.idx"
    cut_file(index, index.stat().st_size - 30)
    assert reader_counts(trace) == intact
    rep, err = report(trace)
    [found] = rep["damaged_files"]
    assert found["kinds"] == ["bad_index"] and found["nothing_lost"]
    assert "nothing is lost" in err


def test_metadata_cut_before_the_stream_declaration_reads_nothing(trace: Path) -> None:
    """LTTng 2.13 declares the stream after the events of the providers registered
    first: babeltrace2 cannot decode a packet without it. Said, and exit status 1."""
    text = metadata_text(trace)
    cut_metadata_text(trace, text.index("stream {") - 100)
    code, _, err = cli_run("report", str(trace))
    assert code == 1
    assert "metadata is cut before its stream declaration" in err, err
    assert "nothing of this trace can be read" in err


def test_every_view_reads_a_cut_trace(trace: Path, tmp_path: Path) -> None:
    stream, packets = busiest(trace)
    cut_file(stream, packets[-1].offset + 10)
    for view in (["report", str(trace)],
                 ["flamegraph", str(trace), "-o", str(tmp_path / "f.svg")],
                 ["export", str(trace), "-o", str(tmp_path / "e.json")]):
        code, _, err = cli_run(*view)
        assert code == 0, (view, err)
        assert f"trace damaged: {stream}" in err, (view, err)
    assert "lower bounds" in (tmp_path / "f.svg").read_text()
    summary = "\n".join(__import__("pinsight_python.reading.summary",
                                   fromlist=["summarize"]).summarize(trace, progress="never"))
    assert f"WARNING: trace damaged: {stream}" in summary


def test_unbatch_goes_on_past_a_packet_it_cannot_decode(tmp_path: Path) -> None:
    """The reader builds its graph anew past the packet: what the conversion holds of
    the first one (its output's classes) stays valid."""
    trace = copy_trace_dir(ctf_trace_dir(TRACES / "batched"), tmp_path / "batched")
    stream = max(stream_files(trace), key=lambda s: s.stat().st_size)
    garble(stream, 84, b"\xff" * 64)  # the first event header: an unknown class
    code, _, err = cli_run("unbatch", "-o", str(tmp_path / "out"), str(trace))
    assert code == 0, err
    assert f"trace damaged: {stream}" in err and "could not decode" in err


def test_unbatch_reads_a_damaged_batched_trace(tmp_path: Path) -> None:
    trace = copy_trace_dir(ctf_trace_dir(TRACES / "batched"), tmp_path / "batched")
    stream = max(stream_files(trace), key=lambda s: s.stat().st_size)
    cut_file(stream, stream.stat().st_size // 2)
    code, _, err = cli_run("unbatch", "-o", str(tmp_path / "out"), str(trace))
    assert code == 0, err
    assert f"trace damaged: {stream}" in err
    # The other stream's events are in the per-event trace.
    assert analysis.read_trace(tmp_path / "out", progress="never").events > 0
