"""A Perfetto trace read back with Perfetto's own schema (the ``perfetto`` package's
``perfetto_trace_pb2``), and checked as trace_processor reads it.

``read(path)`` decodes every packet (inflating ``compressed_packets``), checks the
rules trace_processor relies on while it goes (each sequence clears its incremental
state before it uses it; every interned id is defined on its sequence before it is
used; an incremental timestamp never runs backwards; every event's track is
described), resolves timestamps, names and tracks, then replays each track's slices
in trace_processor's order (by timestamp, then by place in the file) and checks they
nest and balance. The result holds the slices, instants, counters, flows and tracks,
for the tests to compare with ``report``.
"""

from __future__ import annotations

import collections
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from pinsight_python.reading.analysis import TraceData

INCREMENTAL_CLOCK = 64  # the first sequence-scoped clock id
CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
BEGIN, END, INSTANT, COUNTER = (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END,
                                pb.TrackEvent.TYPE_INSTANT, pb.TrackEvent.TYPE_COUNTER)


@dataclass
class Track:
    uuid: int
    name: str = ""
    parent: int = 0
    pid: Optional[int] = None
    tid: Optional[int] = None
    process_name: str = ""
    labels: Tuple[str, ...] = ()
    thread_name: str = ""
    counter: bool = False


@dataclass
class Slice:
    track: int
    name: str
    category: str
    ts: int
    end: int = -1
    depth: int = 0
    args: Dict[str, object] = field(default_factory=dict)
    source: Optional[Tuple[str, str, int]] = None  # file, function, line
    flows: List[int] = field(default_factory=list)
    parent: Optional[Slice] = None


@dataclass
class Instant:
    track: int
    name: str
    ts: int
    args: Dict[str, object]


@dataclass
class PerfettoTrace:
    packets: int
    tracks: Dict[int, Track]
    slices: List[Slice]
    instants: List[Instant]
    counters: Dict[int, List[Tuple[int, float]]]  # track -> (ts, value)
    flows: Dict[int, List[Slice]]  # flow id -> the slices that carry it

    def track_of(self, s: Slice) -> Track:
        return self.tracks[s.track]

    def thread_of(self, s: Slice) -> Track:
        """The thread track a slice is on, or under."""
        t = self.tracks[s.track]
        while t.tid is None and t.parent:
            t = self.tracks[t.parent]
        return t

    def thread_of_process(self, s: Slice) -> Optional[int]:
        """The pid of the process a slice is on or under."""
        t = self.tracks[s.track]
        while t.pid is None and t.parent:
            t = self.tracks[t.parent]
        return t.pid

    def processes(self) -> Dict[int, Track]:
        return {t.pid: t for t in self.tracks.values() if t.pid is not None and t.tid is None}

    def threads(self) -> Dict[Tuple[int, int], Track]:
        return {(t.pid, t.tid): t for t in self.tracks.values() if t.tid is not None}


class Sequence:
    """What trace_processor keeps per packet sequence."""

    def __init__(self) -> None:
        self.cleared = False
        self.default_track = 0
        self.clock_id = 0
        self.clock = 0  # the incremental clock's value
        self.interned: Dict[str, Dict[int, pb.Message]] = collections.defaultdict(dict)


def packets_of(path: Path) -> List[pb.TracePacket]:
    """Every packet, in file order, those of compressed bundles in their place."""
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    out: List[pb.TracePacket] = []
    for packet in trace.packet:
        if packet.HasField("compressed_packets"):
            inner = pb.Trace()
            inner.ParseFromString(zlib.decompress(packet.compressed_packets))
            assert not any(p.HasField("compressed_packets") for p in inner.packet)
            out.extend(inner.packet)
        else:
            out.append(packet)
    return out


def _lookup(seq: Sequence, table: str, iid: int, where: str) -> pb.Message:
    entry = seq.interned[table].get(iid)
    assert entry is not None, (
        f"{where}: {table} iid {iid} used before it is defined on its sequence")
    return entry


def _annotation(seq: Sequence, a: pb.DebugAnnotation, where: str) -> Tuple[str, object]:
    name = a.name if a.HasField("name") else _lookup(
        seq, "debug_annotation_names", a.name_iid, where).name
    if a.HasField("string_value_iid"):
        value: object = _lookup(seq, "debug_annotation_string_values", a.string_value_iid,
                                where).str.decode()
    elif a.HasField("string_value"):
        value = a.string_value
    elif a.HasField("int_value"):
        value = a.int_value
    else:
        value = a.uint_value
    return name, value


def _timestamp(seq: Sequence, packet: pb.TracePacket, where: str) -> int:
    clock = packet.timestamp_clock_id if packet.HasField("timestamp_clock_id") else seq.clock_id
    if clock == INCREMENTAL_CLOCK:
        assert seq.cleared, f"{where}: incremental timestamp before the clock's snapshot"
        seq.clock += packet.timestamp
        return seq.clock
    assert clock == pb.BUILTIN_CLOCK_BOOTTIME, f"{where}: clock {clock}"
    return packet.timestamp


def _state(seqs: Dict[int, Sequence], packet: pb.TracePacket, index: int) -> Sequence:
    seq_id = packet.trusted_packet_sequence_id
    assert seq_id, f"packet {index} has no sequence id"
    seq = seqs.setdefault(seq_id, Sequence())
    where = f"packet {index} (sequence {seq_id})"
    if packet.sequence_flags & CLEARED:
        seq.cleared = True
        seq.interned.clear()
    if packet.HasField("trace_packet_defaults"):
        d = packet.trace_packet_defaults
        seq.clock_id = d.timestamp_clock_id
        seq.default_track = d.track_event_defaults.track_uuid
    if packet.HasField("clock_snapshot"):
        clocks = {c.clock_id: c for c in packet.clock_snapshot.clocks}
        assert clocks[INCREMENTAL_CLOCK].is_incremental
        assert clocks[INCREMENTAL_CLOCK].timestamp == clocks[pb.BUILTIN_CLOCK_BOOTTIME].timestamp
        seq.clock = clocks[INCREMENTAL_CLOCK].timestamp
    if packet.HasField("interned_data"):
        assert seq.cleared, f"{where}: interned data before the incremental state is cleared"
        for fd, entries in packet.interned_data.ListFields():
            for entry in entries:
                assert entry.iid not in seq.interned[fd.name], (
                    f"{where}: {fd.name} {entry.iid} defined twice")
                seq.interned[fd.name][entry.iid] = entry
    return seq


def _describe(tracks: Dict[int, Track], d: pb.TrackDescriptor) -> None:
    t = tracks.setdefault(d.uuid, Track(d.uuid))
    t.name = d.name or t.name
    t.parent = d.parent_uuid or t.parent
    if d.HasField("process"):
        t.pid = d.process.pid
        t.process_name = d.process.process_name or t.process_name
        t.labels = tuple(d.process.process_labels) or t.labels
    if d.HasField("thread"):
        t.pid, t.tid = d.thread.pid, d.thread.tid
        t.thread_name = d.thread.thread_name or t.thread_name
    t.counter = t.counter or d.HasField("counter")


def read(path: Path) -> PerfettoTrace:
    packets = packets_of(path)
    seqs: Dict[int, Sequence] = {}
    tracks: Dict[int, Track] = {}
    events: List[Tuple[int, int, int, pb.TrackEvent, Sequence]] = []  # ts, index, track
    for index, packet in enumerate(packets):
        seq = _state(seqs, packet, index)
        if packet.HasField("track_descriptor"):
            _describe(tracks, packet.track_descriptor)
        if not packet.HasField("track_event"):
            continue
        where = f"packet {index} (sequence {packet.trusted_packet_sequence_id})"
        e = packet.track_event
        track = e.track_uuid if e.HasField("track_uuid") else seq.default_track
        assert track in tracks, f"{where}: track {track} not described before its events"
        events.append((_timestamp(seq, packet, where), index, track, e, seq))
    trace = PerfettoTrace(len(packets), tracks, [], [], collections.defaultdict(list),
                          collections.defaultdict(list))
    # trace_processor's order: by time, then by place in the file.
    events.sort(key=lambda x: (x[0], x[1]))
    open_slices: Dict[int, List[Slice]] = collections.defaultdict(list)
    for ts, index, track, e, seq in events:
        _replay(trace, open_slices, ts, f"packet {index}", track, e, seq)
    unclosed = {t: [s.name for s in stack] for t, stack in open_slices.items() if stack}
    assert not unclosed, f"slices never ended: {unclosed}"
    return trace


def _replay(trace: PerfettoTrace, open_slices: Dict[int, List[Slice]], ts: int, where: str,
            track: int, e: pb.TrackEvent, seq: Sequence) -> None:
    args = dict(_annotation(seq, a, where) for a in e.debug_annotations)
    if e.type == COUNTER:
        assert trace.tracks[track].counter, f"{where}: counter value on a track that is no counter"
        trace.counters[track].append((ts, e.counter_value))
        return
    name = e.name if e.HasField("name") else (
        _lookup(seq, "event_names", e.name_iid, where).name if e.name_iid else "")
    if e.type == INSTANT:
        trace.instants.append(Instant(track, name, ts, args))
        return
    stack = open_slices[track]
    if e.type == BEGIN:
        category = ",".join(_lookup(seq, "event_categories", i, where).name
                            for i in e.category_iids)
        s = Slice(track, name, category, ts, depth=len(stack), args=args,
                  parent=stack[-1] if stack else None)
        if e.source_location_iid:
            loc = _lookup(seq, "source_locations", e.source_location_iid, where)
            s.source = (loc.file_name, loc.function_name, loc.line_number)
        stack.append(s)
        trace.slices.append(s)
    else:
        assert e.type == END, f"{where}: event type {e.type}"
        assert stack, f"{where}: slice end on track {track} without an open slice"
        s = stack.pop()
        s.end = ts
        s.args.update(args)
    for flow in e.flow_ids:
        s.flows.append(flow)
        trace.flows[flow].append(s)


def thread_slice_counts(trace: PerfettoTrace) -> Dict[Tuple[int, int], collections.Counter[str]]:
    """Per (pid, tid): the slices of the thread's own track (frames), by name."""
    counts: Dict[Tuple[int, int], collections.Counter[str]] = collections.defaultdict(
        collections.Counter)
    for s in trace.slices:
        t = trace.tracks[s.track]
        if t.tid is not None:
            assert t.pid is not None
            counts[(t.pid, t.tid)][s.name] += 1
    return counts


def report_segments(data: TraceData) -> Dict[Tuple[int, int], collections.Counter[str]]:
    """The same from the aggregates ``report`` prints (a read of the same trace): each
    function's frame segments (a generator's resumes are slices of their own), an
    import named ``import MODULE`` as the export names it."""
    counts: Dict[Tuple[int, int], collections.Counter[str]] = {}
    for p in data.processes:
        for t in p.threads:
            c: collections.Counter[str] = collections.Counter()
            for f in t.functions:
                symbol = data.symbols[f.symbol]
                c[f"import {symbol.qualname}" if symbol.is_import else symbol.qualname] += (
                    f.segments)
            counts[(p.chrome_pid, t.vtid)] = +c
    return counts


Join = Tuple[str, Optional[str], Optional[str]]  # region, native callee, Python caller


def _caller(frame: Slice) -> Join:
    """The frame a flow leaves from as report names it: the native callee it went
    through (the frame itself, when native) and the Python function below it."""
    via = frame.name if frame.category == "native" else None
    python: Optional[Slice] = frame
    while python is not None and python.category != "python":
        python = python.parent
    return ("", via, python.name if python is not None else None)


def joins(trace: PerfettoTrace) -> collections.Counter[Join]:
    """(region or kernel, native callee, Python caller) of every flow: each flow joins
    exactly two slices, a frame of a thread's own track and a slice of a domain's or a
    GPU's track of the same process, the frame starting first (trace_processor's
    direction: from the earlier slice). A region that never ended (a begin without its
    end: report lists it unmatched) leaves its flow on the frame alone: drawn by no one."""
    out: collections.Counter[Join] = collections.Counter()
    for flow, ends in trace.flows.items():
        if len(ends) == 1 and trace.tracks[ends[0].track].tid is not None:
            continue
        if any(s.category == ASYNCIO for s in ends):
            continue  # task_flows()
        assert len(ends) == 2, f"flow {flow} joins {len(ends)} slices"
        frame, region = sorted(ends, key=lambda s: trace.tracks[s.track].tid is None)
        assert trace.tracks[frame.track].tid is not None, f"flow {flow}: no frame"
        assert trace.tracks[region.track].tid is None, f"flow {flow}: no region"
        assert trace.thread_of(frame).pid == trace.thread_of_process(region), f"flow {flow}"
        assert frame.ts <= region.ts, f"flow {flow}: the frame starts after the region"
        _, via, caller = _caller(frame)
        out[(region.name, via, caller)] += 1
    return out


ASYNCIO = "asyncio"  # the category of a task's steps


def task_steps(trace: PerfettoTrace) -> Dict[int, List[Slice]]:
    """Per track of asyncio tasks (a task's own, or the one the tasks past the first
    10,000 share): its steps in time order."""
    steps: Dict[int, List[Slice]] = collections.defaultdict(list)
    for s in trace.slices:
        if s.category == ASYNCIO:
            steps[s.track].append(s)
    for track in steps.values():
        track.sort(key=lambda s: s.ts)
    return steps


def task_flows(trace: PerfettoTrace) -> List[Tuple[Slice, Slice]]:
    """The flows of asyncio tasks, each as (from, to): from a step (the one that made a
    task, a task's last, one that handed work to a thread) to a step or a work item's
    frame on another thread, which starts no earlier. A flow left with one end (the
    trace ended before its other) is drawn by no one, and left out."""
    out: List[Tuple[Slice, Slice]] = []
    for flow, ends in trace.flows.items():
        if not any(s.category == ASYNCIO for s in ends) or len(ends) == 1:
            continue
        assert len(ends) == 2, f"flow {flow} joins {len(ends)} slices"
        source, target = sorted(ends, key=lambda s: s.ts)
        assert source.category == ASYNCIO, f"flow {flow} leaves {source.name}, not a task's step"
        out.append((source, target))
    return out


def attributed(report: Dict[str, Any]) -> collections.Counter[Join]:
    """report --json's native rows with a caller, keyed as joins() keys flows."""
    labels = report["native_labels"]
    out: collections.Counter[Join] = collections.Counter()
    for row in report["native"]:
        if row["caller"] is None and row["via"] is None:
            continue
        name = f"[{labels.get(row['domain'], row['domain'])}] {row['name']}"
        out[(name, row["via"], (row["caller"] or {}).get("qualname"))] += row["count"]
    return out


def check_joins(trace: PerfettoTrace, report: Dict[str, Any]) -> int:
    """A flow for every region and kernel report attributes to a call, from that call's
    innermost frame (its native callee's, or the Python function's), the same join;
    returns their number."""
    found, expected = joins(trace), attributed(report)
    assert found == expected, (found, expected)
    return sum(found.values())
