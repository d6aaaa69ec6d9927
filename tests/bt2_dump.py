"""Dump a CTF trace as JSON lines with babeltrace2's Python bindings.

Run by Debian's /usr/bin/python3 (the interpreter python3-bt2 binds), whatever
interpreter runs the tests. One line per event:
{"name", "ts" (ns), "fields": {...}, "ctx": {...}}, then one line
{"discarded": N} counting the events LTTng reported as discarded.
"""

import json
import sys

import bt2


# A flat dispatch on the field's class, one return per class: a table would hide it.
def _value(field):  # noqa: PLR0911
    if isinstance(field, bt2._EnumerationFieldConst):
        labels = field.labels
        return labels[0] if labels else int(field)
    if isinstance(field, bt2._StringFieldConst):
        return str(field)
    if isinstance(field, (bt2._IntegerFieldConst,)):
        return int(field)
    if isinstance(field, bt2._RealFieldConst):
        return float(field)
    if isinstance(field, bt2._StructureFieldConst):
        return {k: _value(v) for k, v in field.items()}
    if isinstance(field, bt2._ArrayFieldConst):
        return [_value(v) for v in field]
    return str(field)


def main(path: str) -> None:
    out = sys.stdout
    discarded = 0
    for msg in bt2.TraceCollectionMessageIterator(path):
        if isinstance(msg, bt2._DiscardedEventsMessageConst):
            # As the reader counts: a loss of unknown size counts once, and LTTng's
            # per-buffer counters add up modulo 2^64 (one packet's counter can be below
            # the one before; babeltrace2 then gives a count near 2^64).
            discarded = (discarded + (1 if msg.count is None else msg.count)) % 2**64
            continue
        if not isinstance(msg, bt2._EventMessageConst):
            continue
        ev = msg.event
        rec = {
            "name": ev.name,
            "ts": msg.default_clock_snapshot.ns_from_origin,
            "fields": _value(ev.payload_field) if ev.payload_field is not None else {},
            "ctx": _value(ev.common_context_field) if ev.common_context_field is not None else {},
        }
        out.write(json.dumps(rec) + "\n")
    out.write(json.dumps({"discarded": discarded}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
