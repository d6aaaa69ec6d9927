"""The Python conversion `pinsight-python unbatch` ran before its C++ one
(src/reader/unbatch.cpp), kept as the reference the tests compare the new one with
(tests/integration/test_unbatch.py) and as bench/bench_unbatch.py's baseline.

Run by the interpreter babeltrace2's Python bindings (bt2) belong to, usually
/usr/bin/python3, as a script: ``unbatch_bt2.py TRACE OUT``. A babeltrace2 graph: a
source of ours, reading TRACE through babeltrace2's own reader, feeds sink.ctf.fs.

Every event is copied, but event_block: each of its records becomes the compact
event it stands for (compact_function_begin/end, compact_c_call_begin/end, with the
record's own time), and the thread's other events held since its previous block are
merged with them by time. Each thread gets a stream of its own in the output (a CTF
stream must be in time order; a thread's records are late by up to a block). Names
stay in code_info / callable_info, as in a compact trace: Trace Compass's analyses
read it as one. About 23,000 events a second: Python per event.
"""

import collections
import heapq
import importlib
import sys

import bt2

fcs = importlib.import_module("bt2.field_class")  # the field class types (not in bt2.*)

BLOCK = "python_pinsight_lttng_ust:event_block"
RECORD_EVENTS = (
    "python_pinsight_lttng_ust:compact_function_begin",
    "python_pinsight_lttng_ust:compact_function_end",
    "python_pinsight_lttng_ust:compact_c_call_begin",
    "python_pinsight_lttng_ust:compact_c_call_end",
    "python_pinsight_lttng_ust:generator_end",  # as compact's: no names, lineno 0
)
GENERATOR_END = 4
FINAL = 1  # event_block's flags
PARTIAL = 2


def copy_enumeration(tc, fc):
    if isinstance(fc, fcs._UnsignedEnumerationFieldClassConst):
        out = tc.create_unsigned_enumeration_field_class(
            fc.field_value_range, preferred_display_base=fc.preferred_display_base)
        ranges = bt2.UnsignedIntegerRangeSet
    else:
        out = tc.create_signed_enumeration_field_class(
            fc.field_value_range, preferred_display_base=fc.preferred_display_base)
        ranges = bt2.SignedIntegerRangeSet
    for label, mapping in fc.items():
        out.add_mapping(label, ranges([(r.lower, r.upper) for r in mapping.ranges]))
    return out


def copy_class(tc, fc):  # noqa: PLR0911 - a flat dispatch, one return per field class type
    """A field class of the output trace class, like `fc` of the input's."""
    if isinstance(fc, fcs._EnumerationFieldClassConst):
        return copy_enumeration(tc, fc)
    if isinstance(fc, fcs._UnsignedIntegerFieldClassConst):
        return tc.create_unsigned_integer_field_class(
            fc.field_value_range, preferred_display_base=fc.preferred_display_base)
    if isinstance(fc, fcs._SignedIntegerFieldClassConst):
        return tc.create_signed_integer_field_class(
            fc.field_value_range, preferred_display_base=fc.preferred_display_base)
    if isinstance(fc, fcs._StringFieldClassConst):
        return tc.create_string_field_class()
    if isinstance(fc, fcs._RealFieldClassConst):
        if isinstance(fc, fcs._SinglePrecisionRealFieldClassConst):
            return tc.create_single_precision_real_field_class()
        return tc.create_double_precision_real_field_class()
    return copy_compound(tc, fc)


def copy_compound(tc, fc):
    if isinstance(fc, fcs._StructureFieldClassConst):
        out = tc.create_structure_field_class()
        for name, member in fc.items():
            out.append_member(name, copy_class(tc, member.field_class))
        return out
    if isinstance(fc, fcs._StaticArrayFieldClassConst):
        return tc.create_static_array_field_class(copy_class(tc, fc.element_field_class),
                                                  fc.length)
    if isinstance(fc, fcs._DynamicArrayFieldClassConst):
        # Its length member (LTTng's _NAME_length) is copied as a plain integer.
        return tc.create_dynamic_array_field_class(copy_class(tc, fc.element_field_class))
    raise ValueError(f"unsupported field class {type(fc).__name__}")


def copy_value(dst, src):
    if isinstance(src, bt2._StructureFieldConst):
        for name, field in src.items():
            copy_value(dst[name], field)
    elif isinstance(src, bt2._ArrayFieldConst):
        if isinstance(src, bt2._DynamicArrayFieldConst):
            dst.length = len(src)
        for i, field in enumerate(src):
            copy_value(dst[i], field)
    elif isinstance(src, bt2._StringFieldConst):
        dst.value = str(src)
    elif isinstance(src, bt2._RealFieldConst):
        dst.value = float(src)
    else:
        dst.value = int(src)


def read_varint(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def unzigzag(v):
    return (v >> 1) ^ -(v & 1)


def records(block):
    """(clock value, kind, code_id, callable_id, line, transition) of a block's records;
    a generator's end: (clock value, kind, code_id, lifetime_ns, segments, how)."""
    data = bytes(int(b) for b in block["records"])
    clock = int(block["base_clock"])
    code = callable_id = 0
    at = 0
    for _ in range(int(block["record_count"])):
        if at >= len(data):
            break
        head = data[at]
        at += 1
        kind = head >> 3
        value, at = read_varint(data, at)
        code = (code + unzigzag(value)) & 0xFFFFFFFFFFFFFFFF
        line = 0
        if kind in (2, 3):
            value, at = read_varint(data, at)
            callable_id = (callable_id + unzigzag(value)) & 0xFFFFFFFFFFFFFFFF
            line, at = read_varint(data, at)
        elif kind == GENERATOR_END:
            lifetime, at = read_varint(data, at)
            segments, at = read_varint(data, at)
        value, at = read_varint(data, at)
        clock += value
        if kind == GENERATOR_END:
            yield clock, kind, code, lifetime, segments, head & 7
        else:
            yield clock, kind, code, callable_id if kind >= 2 else 0, line, head & 7


def first_stream(path):
    for msg in bt2.TraceCollectionMessageIterator(path):
        if isinstance(msg, bt2._StreamBeginningMessageConst):
            return msg.stream
    raise SystemExit(f"{path}: no stream")


class Unbatch(bt2._UserMessageIterator):
    def __init__(self, config, port):
        self._path, self._trace, self._sc, self._classes = port.user_data
        self._input = iter(bt2.TraceCollectionMessageIterator(self._path))
        self._queue = collections.deque()
        self._streams = {}  # thread -> [stream, packet, last clock value]
        self._held = collections.defaultdict(list)  # thread -> [(clock, order, event msg)]
        self._batched = set()
        self._order = 0
        self._done = False

    def __next__(self):
        while not self._queue:
            if self._done:
                raise StopIteration
            self._step()
        return self._queue.popleft()

    def _step(self):
        msg = next(self._input, None)
        if msg is None:
            for thread in list(self._held):
                self._release(thread, [])
            for stream, packet, last in self._streams.values():
                self._queue.append(self._create_packet_end_message(packet, last))
                self._queue.append(self._create_stream_end_message(stream))
            self._done = True
            return
        if not isinstance(msg, bt2._EventMessageConst):
            return
        event = msg.event
        context = event.common_context_field
        vpid = int(context["vpid"]) if context is not None and "vpid" in context else -1
        vtid = int(context["vtid"]) if context is not None and "vtid" in context else -1
        if event.name == BLOCK:
            payload = event.payload_field
            thread = (vpid, int(payload["tid"]))
            made = [(clock, kind, code, callee, line, transition, int(payload["python_thread_id"]))
                    for clock, kind, code, callee, line, transition in records(payload)]
            # A partial block vouches for the thread's records up to its last one.
            until = None
            if int(payload["flags"]) & PARTIAL:
                until = made[-1][0] if made else -1
            self._release(thread, made, until)
            if int(payload["flags"]) & FINAL:
                self._batched.discard(thread)
            else:
                self._batched.add(thread)
            return
        if event.name not in self._classes:
            return
        thread = (vpid, vtid)
        self._order += 1
        item = (msg.default_clock_snapshot.value, self._order, msg)
        if thread in self._batched:
            self._held[thread].append(item)
        else:
            self._emit(thread, item)

    def _release(self, thread, made, until=None):
        held = self._held.pop(thread, [])
        if until is not None:
            later = [item for item in held if item[0] > until]
            held = [item for item in held if item[0] <= until]
            if later:
                self._held[thread] = later
        recs = []
        for rec in made:
            self._order += 1
            recs.append((rec[0], self._order, rec))
        for item in heapq.merge(held, recs, key=lambda i: (i[0], i[1])):
            self._emit(thread, item)

    def _emit(self, thread, item):
        clock, _, what = item
        entry = self._streams.get(thread)
        if entry is None:
            stream = self._trace.create_stream(self._sc)
            packet = stream.create_packet()
            self._queue.append(self._create_stream_beginning_message(stream))
            self._queue.append(self._create_packet_beginning_message(packet, clock))
            entry = self._streams[thread] = [stream, packet, clock]
        clock = max(clock, entry[2])  # a block later than promised: kept in order
        entry[2] = clock
        if isinstance(what, tuple):
            _, kind, code, callee, line, transition, python_thread_id = what
            out = self._create_event_message(self._classes[RECORD_EVENTS[kind]], entry[1], clock)
            payload = out.event.payload_field
            payload["code_id"] = code
            payload["python_thread_id"] = python_thread_id
            if kind == GENERATOR_END:
                payload["qualname"] = payload["filename"] = ""
                payload["lineno"] = 0
                payload["lifetime_ns"] = callee
                payload["segments"] = line
                payload["how"] = transition
            else:
                payload["transition"] = transition
            if kind in (2, 3):
                payload["callable_id"] = callee
                payload["caller_lineno"] = line
        else:
            source = what.event
            out = self._create_event_message(self._classes[source.name], entry[1], clock)
            if source.payload_field is not None:
                copy_value(out.event.payload_field, source.payload_field)
        context = out.event.common_context_field
        if context is not None:
            if "vpid" in context:
                context["vpid"] = thread[0]
            if "vtid" in context:
                context["vtid"] = thread[1]
        self._queue.append(out)


class Source(bt2._UserSourceComponent, message_iterator_class=Unbatch):
    def __init__(self, config, params, obj):
        path = str(params["path"])
        stream = first_stream(path)
        in_sc = stream.cls
        tc = self._create_trace_class()
        icc = in_sc.default_clock_class
        cc = self._create_clock_class(
            frequency=icc.frequency, name=icc.name, description=icc.description,
            precision=icc.precision, offset=icc.offset,
            origin_is_unix_epoch=icc.origin_is_unix_epoch, uuid=icc.uuid)
        context = in_sc.event_common_context_field_class
        sc = tc.create_stream_class(
            default_clock_class=cc,
            event_common_context_field_class=copy_class(tc, context) if context else None,
            supports_packets=True,
            packets_have_beginning_default_clock_snapshot=True,
            packets_have_end_default_clock_snapshot=True,
        )
        classes = {}
        for ec in in_sc.values():
            if ec.name == BLOCK:
                continue
            payload = ec.payload_field_class
            classes[ec.name] = sc.create_event_class(
                name=ec.name,
                payload_field_class=copy_class(tc, payload) if payload is not None else None)
        missing = [name for name in RECORD_EVENTS[:GENERATOR_END] if name not in classes]
        if missing:
            raise SystemExit(f"{path}: the trace's metadata lacks {', '.join(missing)}")
        environment = {name: (str(v) if isinstance(v, bt2._StringValueConst) else int(v))
                       for name, v in stream.trace.environment.items()}
        trace = tc(environment=environment)
        self._add_output_port("out", (path, trace, sc, classes))


def main(path, out):
    graph = bt2.Graph()
    source = graph.add_component(Source, "unbatch", params={"path": path})
    sink_class = bt2.find_plugin("ctf").sink_component_classes["fs"]
    sink = graph.add_component(sink_class, "sink", params={
        "path": out, "assume-single-trace": True, "quiet": True})
    graph.connect_ports(source.output_ports["out"], sink.input_ports["in"])
    graph.run()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
