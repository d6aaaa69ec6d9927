"""What damage to a trace cost a read: one account per damaged file.

A trace cut by a crash, a full disk or a dropped relay connection is read up to the
damage and past it (src/reader: stream_scan, trace_set, trace_graph): the reader
reports each part of a file it had to skip (``TraceResult.damaged``, one record per
place). Here they are added up per file, with the words every view prints on stderr
and ``report`` keeps in its warnings and its JSON (``damaged_files``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

from .analysis import format_ns
from .resources import format_bytes

if TYPE_CHECKING:
    from .._pinsight_reader import DamagedPart, MissingEvents, TraceResult

__all__ = ["DamagedFile", "damage_lines", "damaged_files", "lower_bound_threads"]

# What each kind of damage is, in words (DamagedPart.kind).
KINDS = {
    "cut": "cut inside a packet (the rest of the file is lost)",
    "no_whole_packet": "holds no whole packet",
    "empty": "is empty (its stream wrote nothing, or lost it all)",
    "bad_packet_header": "has {a garbled packet header|N garbled packet headers}",
    "undecodable": "has {a packet|N packets} babeltrace2 could not decode past some point",
    "stopped": "could not be read past some point",
    "cut_metadata": "is cut inside a declaration",
    "bad_metadata": "cannot be read",
    "bad_index": "(the packet index) is cut or does not match its stream file",
}
# Kinds whose detail the words above do not already say.
DETAILED = ("undecodable", "stopped", "bad_metadata", "no_whole_packet")


@dataclass(frozen=True)
class DamagedFile:
    """A damaged file of the trace and what the reader skipped of it, added up."""

    file: str
    kinds: Tuple[str, ...]  # in the order found
    details: Tuple[str, ...]
    places: Tuple[str, ...]  # the kind of each place skipped, in file order
    begin_ns: Optional[int]  # the time lost, from (None: unknown)
    end_ns: Optional[int]  # to (None: unknown, or the end of the trace)
    packets: int  # packets skipped, whole or in part
    bytes: int
    events_read: int  # events of its damaged packets read before the damage
    events_lost: Optional[int]  # known: batched records missing there, events dropped

    @property
    def nothing_lost(self) -> bool:
        """Only its index was damaged: rebuilt from the stream file."""
        return set(self.kinds) == {"bad_index"}

    def as_json(self) -> Dict[str, Any]:
        return {
            "file": self.file, "kinds": list(self.kinds),
            "details": list(dict.fromkeys(self.details)), "places": len(self.places),
            "begin_ns": self.begin_ns, "end_ns": self.end_ns, "packets": self.packets,
            "bytes": self.bytes, "events_read": self.events_read,
            "events_lost": self.events_lost, "nothing_lost": self.nothing_lost,
        }

    def describe(self, origin_ns: int) -> str:
        """One line: the file, what was wrong, what it cost."""
        what = "; ".join(_counted(KINDS.get(kind, kind), self.places.count(kind))
                         for kind in self.kinds)
        details = [d for d, k in zip(self.details, self.places) if k in DETAILED]
        if details:
            what += f" ({'; '.join(dict.fromkeys(details))})"
        if self.nothing_lost:
            return (f"{self.file} {what}: the reader indexed the stream file itself, "
                    "nothing is lost")
        if "bad_metadata" in self.kinds:
            return f"{self.file} {what}"
        cost = []
        if self.packets:
            cost.append(f"{self.packets:,} packet{'s' if self.packets != 1 else ''} "
                        f"({format_bytes(self.bytes)}) skipped")
        when = self._when(origin_ns)
        if when:
            cost.append(when)
        if self.events_read:
            cost.append(f"{self.events_read:,} events of the damaged packet"
                        f"{'s' if self.packets > 1 else ''} read before the damage")
        if self.events_lost:
            cost.append(f"{self.events_lost:,} events known lost")
        return f"{self.file} {what}" + (f": {', '.join(cost)}" if cost else "")

    def _when(self, origin_ns: int) -> str:
        def at(ns: int) -> str:
            return format_ns(ns - origin_ns) if origin_ns else f"{ns} ns since the epoch"

        if self.begin_ns is None:
            return ""
        since = ("from the start of the trace" if origin_ns and self.begin_ns <= origin_ns
                 else f"from {at(self.begin_ns)}")
        if self.end_ns is None:
            return f"lost {since} on"
        return f"lost {since} to {at(self.end_ns)}" + ("" if since.endswith("trace") else
                                                        " into the trace")


def damaged_files(parts: Sequence[DamagedPart],
                  missing: Sequence[MissingEvents] = ()) -> List[DamagedFile]:
    """The reader's DamagedPart records added up per file, in the order found; a
    batched thread's gap of known size (`missing`) inside a file's lost time counts
    as its events lost."""
    by_file: Dict[str, List[DamagedPart]] = {}
    for part in parts:
        by_file.setdefault(part.file, []).append(part)
    claimed: Set[int] = set()
    out = []
    for file, places in by_file.items():
        begins = [p.begin_ns for p in places if p.begin_ns]
        ends = [p.end_ns for p in places]
        begin = min(begins) if begins else None
        end = None if not ends or 0 in ends else max(ends)
        lost = sum(p.events_lost for p in places)
        known = bool(lost)
        for i, gap in enumerate(missing):
            if i not in claimed and gap.missing and _within(gap, places):
                claimed.add(i)
                lost += gap.missing
                known = True
        out.append(DamagedFile(
            file=file,
            kinds=tuple(dict.fromkeys(p.kind for p in places)),
            details=tuple(p.detail for p in places),
            places=tuple(p.kind for p in places),
            begin_ns=begin, end_ns=end,
            packets=sum(p.packets for p in places),
            bytes=sum(p.bytes for p in places),
            events_read=sum(p.events_read for p in places),
            events_lost=lost if known else None,
        ))
    return out


def _counted(words: str, count: int) -> str:
    """"has {a packet|N packets}": the one or the other."""
    if "{" not in words:
        return words
    head, rest = words.split("{", 1)
    choices, tail = rest.split("}", 1)
    one, many = choices.split("|")
    return head + (one if count == 1 else many.replace("N", f"{count:,}")) + tail


def _within(gap: MissingEvents, places: Sequence[DamagedPart]) -> bool:
    # The thread's last record before the gap falls in a span the file lost.
    return any(p.begin_ns and p.begin_ns <= gap.after_ns
               and (not p.end_ns or gap.after_ns <= p.end_ns) for p in places)


def lower_bound_threads(raw: TraceResult) -> int:
    """Threads whose totals are lower bounds: their streams lost packets."""
    return sum(t.lower_bound for p in raw.processes for t in p.threads)


def damage_lines(raw: TraceResult) -> List[str]:
    """The warnings of a damaged trace: one per damaged file, then what it means for
    the figures."""
    files = damaged_files(raw.damaged, raw.missing_events)
    lines = [f"trace damaged: {f.describe(raw.first_ns)}" for f in files]
    threads = lower_bound_threads(raw)
    if threads:
        cut = sum(t.anomalies.cut_by_damage for p in raw.processes for t in p.threads)
        lines.append(
            f"the totals (calls, times) of {threads} thread{'s' if threads != 1 else ''} are lower "
            "bounds: their streams lost packets to the damage"
            + (f"; {cut:,} frames open there were closed there" if cut else ""))
    return lines
