"""Replay Trace Compass XML analyses over trace events, in Python.

Trace Compass (TC) builds a state system by running the event handlers of an
XML analysis over a trace; tracecompass/*.xml are such analyses. TC is a Java
GUI the tests cannot run, so this module re-implements the subset of its
data-driven analysis language those files use, with TC's semantics as read in
eclipse-tracecompass/org.eclipse.tracecompass at commit 14360afb219e
(tmf.analysis.xml.core: DataDrivenActionStateChange, DataDrivenCondition,
DataDrivenValue*, DataDrivenOutputEntry; statesystem.core: StateSystem,
TransientState):

- event handlers (eventName with "*" wildcards), all matching handlers in
  document order; state changes, if/then/else, condition/not/and/or;
- attribute paths of constant, eventField, location and query parts; a part
  that resolves to null drops the state change, as in TC;
- values int, long, string, null, eventField, eventName, query, delete, stack
  peek, forcedType, and Rhino scripts of the form 'text' + id + ...;
- stack push/pop on the state system (depth in the attribute, frames in its
  children "1", "2", ...; popping an empty stack is ignored, as in TC);
- TC's typing: an attribute keeps the Java type of its first non-null value
  (Integer for int constants and stack depths, Long for integer fields);
- time graph view entries (path wildcards, display, name) and callstack
  groups (level paths, the "CallStack" attribute under each leaf).

Anything outside the subset raises Unsupported, so an analysis cannot use a
construct these tests would silently replay wrong. Events are duck-typed like
tests/tracing.py's Event: name, ts, fields (payload), ctx (vpid, vtid, ...).
"""

from __future__ import annotations

import collections
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

ROOT = -1  # TC's ITmfStateSystem.ROOT_ATTRIBUTE
INVALID = -2  # TC's INVALID_ATTRIBUTE
CALL_STACK = "CallStack"  # InstrumentedCallStackAnalysis.CALL_STACK
CONTEXT_PREFIX = "context."  # how TC's CTF parser names context fields


class Unsupported(Exception):
    """The XML uses something outside the replayed subset."""


class StateValueTypeError(Exception):
    """TC would throw StateValueTypeException: an attribute changed Java type."""


class JInt(int):
    """A Java Integer: int constants, forcedType="int", stack depths."""


class JLong(int):
    """A Java Long: every integer event field in TC's CTF parser."""


def java_type(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, JInt):
        return "Integer"
    if isinstance(value, int):
        return "Long"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, str):
        return "String"
    raise Unsupported(f"state value of Python type {type(value).__name__}")


def java_string(value: Any) -> str:
    """String.valueOf(value) as TC applies it to attribute names and comparisons."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class Interval:
    start: int
    end: int
    value: Any


@dataclass(frozen=True)
class Frame:
    depth: int
    name: Any
    start: int
    end: int


class StateSystem:
    """TC's state system as the XML analyses drive it: an attribute tree whose
    attributes each hold one ongoing value and a history of closed intervals."""

    def __init__(self) -> None:
        self.names: Dict[int, str] = {ROOT: ""}
        self.parents: Dict[int, int] = {}
        self.children: Dict[int, Dict[str, int]] = {ROOT: {}}
        self.ongoing: Dict[int, Any] = {}
        self.ongoing_start: Dict[int, int] = {}
        self.types: Dict[int, Optional[str]] = {}
        self.history: Dict[int, List[Interval]] = {}
        self.start_time: Optional[int] = None
        self.end_time: Optional[int] = None
        self.empty_pops: List[Tuple[int, str]] = []

    # -- attribute tree -------------------------------------------------------
    def quark_relative_and_add(self, parent: int, name: str) -> int:
        quark = self.children[parent].get(name)
        if quark is None:
            quark = len(self.names) - 1  # ROOT is -1, quarks count from 0
            self.names[quark] = name
            self.parents[quark] = parent
            self.children[parent][name] = quark
            self.children[quark] = {}
            self.ongoing[quark] = None
            self.ongoing_start[quark] = self.start_time if self.start_time is not None else 0
            self.types[quark] = None
            self.history[quark] = []
        return quark

    def opt_quark_relative(self, parent: int, name: str) -> int:
        return self.children[parent].get(name, INVALID)

    def quark(self, *path: str) -> int:
        quark = ROOT
        for name in path:
            quark = self.opt_quark_relative(quark, name)
            if quark == INVALID:
                raise KeyError("/".join(path))
        return quark

    def full_path(self, quark: int) -> str:
        names = []
        while quark != ROOT:
            names.append(self.names[quark])
            quark = self.parents[quark]
        return "/".join(reversed(names))

    def sub_attributes(self, quark: int) -> List[int]:
        return list(self.children[quark].values())

    # -- changes --------------------------------------------------------------
    def modify(self, t: int, value: Any, quark: int) -> None:
        """TransientState.processStateChange."""
        expected = self.types[quark]
        actual = java_type(value)
        if expected is None:
            self.types[quark] = actual
        elif actual is not None and actual != expected:
            raise StateValueTypeError(
                f"{self.full_path(quark)}: {actual} value {value!r} in a {expected} attribute"
            )
        if self.ongoing[quark] == value and java_type(self.ongoing[quark]) == actual:
            return
        start = self.ongoing_start[quark]
        if start < t:
            self.history[quark].append(Interval(start, t - 1, self.ongoing[quark]))
            self.ongoing_start[quark] = t
            self.ongoing[quark] = value
        elif start == t:
            self.ongoing[quark] = value  # TC keeps no zero-length interval
        else:
            raise AssertionError(f"{self.full_path(quark)}: change at {t} before {start}")

    def push(self, t: int, value: Any, quark: int) -> None:
        depth = self.ongoing[quark]
        depth = 0 if depth is None else int(depth)
        depth += 1
        frame_quark = self.quark_relative_and_add(quark, str(depth))
        self.modify(t, JInt(depth), quark)
        self.modify(t, value, frame_quark)

    def pop(self, t: int, quark: int) -> Any:
        depth = self.ongoing[quark]
        if depth is None:
            self.empty_pops.append((t, self.full_path(quark)))
            return None
        if not isinstance(depth, JInt):
            raise StateValueTypeError(f"{self.full_path(quark)}: popped a non-stack attribute")
        frame_quark = self.children[quark][str(depth)]
        popped = self.ongoing[frame_quark]
        self.modify(t, JInt(depth - 1) if depth > 1 else None, quark)
        self.remove(t, frame_quark)
        return popped

    def remove(self, t: int, quark: int) -> None:
        for child in self.sub_attributes(quark):
            self.remove(t, child)
        self.modify(t, None, quark)

    def stack_top(self, quark: int) -> Any:
        """StateSystemUtils.querySingleStackTop at the current time."""
        depth = self.ongoing[quark]
        if depth is None:
            return None
        return self.ongoing[self.children[quark][str(depth)]]

    def close(self, end: int) -> None:
        for quark, value in self.ongoing.items():
            self.history[quark].append(Interval(self.ongoing_start[quark], end, value))
        self.end_time = end

    # -- reading, after close() -------------------------------------------------
    def intervals(self, quark: int) -> List[Interval]:
        """Intervals with a value, in time order."""
        return [i for i in self.history[quark] if i.value is not None]

    def first_value(self, quark: int) -> Any:
        values = self.intervals(quark)
        return values[0].value if values else None


# ---------------------------------------------------------------------------
# Events


@dataclass
class Diagnostics:
    """What TC would only log: fields it could not find, paths that resolved to null."""

    missing_fields: collections.Counter = field(default_factory=collections.Counter)
    dropped_changes: collections.Counter = field(default_factory=collections.Counter)


def event_field(event: Any, name: str, diagnostics: Diagnostics) -> Any:
    """DataDrivenValueEventField: payload fields, then "context._x" fields."""
    if name in event.fields:
        value = event.fields[name]
    elif name.startswith(CONTEXT_PREFIX):
        # babeltrace2 drops CTF 1.8's leading underscore; TC keeps it.
        key = name[len(CONTEXT_PREFIX) :]
        value = event.ctx.get(key, event.ctx.get(key.lstrip("_")))
    else:
        value = None
    if value is None:
        diagnostics.missing_fields[(event.name, name)] += 1
        return None
    if isinstance(value, (bool, list, dict)):
        raise Unsupported(f"{event.name}: field {name} of type {type(value).__name__}")
    if isinstance(value, int):
        return JLong(value)
    return value


# ---------------------------------------------------------------------------
# Values, paths, conditions


def force_type(value: Any, forced: str) -> Any:
    """TmfXmlUtils.newTmfStateValueFromObjectWithForcedType(...).unboxValue()."""
    if value is None or not forced:
        return value
    converters: Dict[str, Callable[[Any], Any]] = {
        "int": lambda v: JInt(int(v)),
        "long": lambda v: JLong(int(v)),
        "double": float,
        "string": java_string,
    }
    if forced not in converters:
        raise Unsupported(f"forcedType {forced}")
    if isinstance(value, (int, float, str)):
        return converters[forced](value)
    return java_string(value)


def js_string(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


SCRIPT_TOKEN = re.compile(r"\s*(?:'(?P<text>[^'\\]*)'|(?P<name>[A-Za-z_]\w*)|(?P<plus>\+))")


def eval_script(script: str, values: Dict[str, Any]) -> Any:
    """The Rhino scripts our analyses use: literals and ids joined by +."""
    operands: List[Any] = []
    expect_operand = True
    pos = 0
    while pos < len(script.rstrip()):
        match = SCRIPT_TOKEN.match(script, pos)
        if match is None:
            raise Unsupported(f"script {script!r} at {pos}")
        pos = match.end()
        if expect_operand == bool(match.group("plus")):
            raise Unsupported(f"script {script!r}: expected {'operand' if expect_operand else '+'}")
        if match.group("name") is not None:
            if match.group("name") not in values:
                raise Unsupported(f"script {script!r}: no stateValue id {match.group('name')}")
            operands.append(values[match.group("name")])
        elif match.group("text") is not None:
            operands.append(match.group("text"))
        expect_operand = not expect_operand
    if expect_operand:
        raise Unsupported(f"script {script!r} ends with +")
    result = operands[0]
    for operand in operands[1:]:
        if isinstance(result, str) or isinstance(operand, str):
            result = js_string(result) + js_string(operand)
        else:
            result = result + operand
    return result


def compare(first: Any, second: Any) -> int:
    """DataDrivenComparisonCondition: numbers if the first is an integer, else strings."""
    if isinstance(first, int) and isinstance(second, (int, float)):
        return (first > second) - (first < second)
    a, b = java_string(first), java_string(second)
    return (a > b) - (a < b)


OPERATORS: Dict[str, Callable[[int], bool]] = {
    "eq": lambda c: c == 0,
    "ne": lambda c: c != 0,
    "ge": lambda c: c >= 0,
    "gt": lambda c: c > 0,
    "le": lambda c: c <= 0,
    "lt": lambda c: c < 0,
}


class StateProvider:
    """One <stateProvider> element, ready to replay."""

    def __init__(self, element: ET.Element) -> None:
        self.element = element
        self.id = element.get("id", "")
        self.defined: Dict[str, str] = {}
        self.locations: Dict[str, List[ET.Element]] = {}
        self.handlers: List[Tuple[re.Pattern[str], ET.Element]] = []
        for child in element:
            if child.tag == "definedValue":
                self.defined[child.get("name", "")] = child.get("value", "")
            elif child.tag == "location":
                self.locations[child.get("id", "")] = self._expand_location(child)
            elif child.tag == "eventHandler":
                name = child.get("eventName", "")
                # DataDrivenEventHandler: only "*" is translated; the rest is a regex.
                self.handlers.append((re.compile(name.replace("*", ".*")), child))
            elif child.tag == "mappingGroup":
                raise Unsupported("mappingGroup")
            elif child.tag != "head":
                raise Unsupported(f"stateProvider child <{child.tag}>")
        self._handlers_by_event: Dict[str, List[ET.Element]] = {}

    def _expand_location(self, location: ET.Element) -> List[ET.Element]:
        """TmfXmlLocationCu: a location is its parts, earlier locations inlined."""
        parts: List[ET.Element] = []
        for part in location.findall("stateAttribute"):
            if part.get("type") == "location":
                name = part.get("value", "")
                if name not in self.locations:
                    raise Unsupported(f"location {location.get('id')} uses {name} before it")
                parts += self.locations[name]
            else:
                parts.append(part)
        return parts

    def handlers_for(self, event_name: str) -> List[ET.Element]:
        cached = self._handlers_by_event.get(event_name)
        if cached is None:
            cached = [h for regex, h in self.handlers if regex.fullmatch(event_name)]
            self._handlers_by_event[event_name] = cached
        return cached

    def text(self, raw: Optional[str]) -> str:
        """AnalysisCompilationData.getStringValue: "$NAME" is a definedValue."""
        raw = raw or ""
        if raw.startswith("$"):
            if raw[1:] not in self.defined:
                raise Unsupported(f"undefined value {raw}")
            return self.defined[raw[1:]]
        return raw


def _the_state_value(change: ET.Element) -> ET.Element:
    """The one stateValue of a state change, if this replay supports it (Unsupported)."""
    if change.find("futureTime") is not None:
        raise Unsupported("futureTime")
    values = change.findall("stateValue")
    if len(values) != 1:
        raise Unsupported(f"state change with {len(values)} stateValue")
    for unsupported in ("increment", "update", "mappingGroup"):
        if values[0].get(unsupported):
            raise Unsupported(f"stateValue {unsupported}")
    return values[0]


class Replay:
    """Runs one state provider over events and keeps the resulting state system."""

    def __init__(self, provider: StateProvider) -> None:
        self.provider = provider
        self.ss = StateSystem()
        self.diagnostics = Diagnostics()

    def run(self, events: Iterable[Any]) -> Replay:
        last = None
        for event in events:
            if self.ss.start_time is None:
                self.ss.start_time = event.ts
            if last is not None and event.ts < last:
                raise AssertionError(f"events out of time order at {event.name} {event.ts}")
            last = event.ts
            for handler in self.provider.handlers_for(event.name):
                for change in handler.findall("stateChange"):
                    self.apply(change, event)
        self.ss.close(last if last is not None else 0)
        return self

    # -- actions ----------------------------------------------------------------
    def apply(self, change: ET.Element, event: Any) -> None:
        condition = change.find("if")
        if condition is not None:
            branch = change.find("then") if self.test(condition, event) else change.find("else")
            if branch is not None:
                self.apply(branch, event)
            return
        value_el = _the_state_value(change)
        quark = self.path(change.findall("stateAttribute"), event)
        if quark == INVALID:
            self.diagnostics.dropped_changes[event.name] += 1
            return
        stack = value_el.get("stack", "")
        if stack == "pop":
            self.ss.pop(event.ts, quark)
        elif stack == "popAll":
            raise Unsupported("stack popAll")
        else:
            value = self.value(value_el, event)
            if stack == "push":
                self.ss.push(event.ts, value, quark)
            else:
                self.ss.modify(event.ts, value, quark)

    def path(self, parts: Sequence[ET.Element], event: Any) -> int:
        """DataDrivenStateSystemPath.getQuark, creating attributes on the way."""
        quark = ROOT
        for part in self._inline(parts):
            name = self.attribute_name(part, event)
            if name is None:
                return INVALID
            quark = self.ss.quark_relative_and_add(quark, java_string(name))
        return quark

    def _inline(self, parts: Sequence[ET.Element]) -> List[ET.Element]:
        out: List[ET.Element] = []
        for part in parts:
            if part.get("type") == "location":
                name = part.get("value", "")
                if name not in self.provider.locations:
                    raise Unsupported(f"undefined location {name}")
                out += self.provider.locations[name]
            else:
                out.append(part)
        return out

    def attribute_name(self, part: ET.Element, event: Any) -> Any:
        kind = part.get("type")
        if kind == "constant":
            return self.provider.text(part.get("value"))
        if kind == "eventField":
            return event_field(event, self.provider.text(part.get("value")), self.diagnostics)
        if kind == "eventName":
            return event.name
        if kind == "query":
            quark = self.path(part.findall("stateAttribute"), event)
            return None if quark == INVALID else self.ss.ongoing[quark]
        raise Unsupported(f"stateAttribute type {kind}")

    def value(self, element: ET.Element, event: Any) -> Any:
        forced = element.get("forcedType", "")
        if element.get("stack") == "peek":
            quark = self.path(element.findall("stateAttribute"), event)
            value = None if quark == INVALID else self.ss.stack_top(quark)
            return force_type(value, forced)
        kind = element.get("type")
        text = self.provider.text(element.get("value"))
        constants: Dict[str, Callable[[], Any]] = {
            "int": lambda: JInt(int(text)),
            "long": lambda: JLong(int(text)),
            "string": lambda: text,
            "null": lambda: None,
            "delete": lambda: None,
            "eventName": lambda: event.name,
        }
        if kind in constants:
            value = constants[kind]()
        elif kind == "eventField":
            value = event_field(event, text, self.diagnostics)
        elif kind == "query":
            quark = self.path(element.findall("stateAttribute"), event)
            value = None if quark == INVALID else self.ss.ongoing[quark]
        elif kind == "script":
            if element.get("scriptEngine", "rhino") != "rhino":
                raise Unsupported(f"script engine {element.get('scriptEngine')}")
            # DataDrivenValueScript resolves its ids without their forcedType.
            inputs = {
                sub.get("id", ""): self.value(sub, event) for sub in element.findall("stateValue")
            }
            value = eval_script(element.get("value", ""), inputs)
        else:
            raise Unsupported(f"stateValue type {kind}")
        return force_type(value, forced)

    def test(self, element: ET.Element, event: Any) -> bool:
        """The single child of an <if>, <not>, or one child of <and>/<or>."""
        children = list(element)
        if element.tag in ("if", "not"):
            if len(children) != 1:
                raise Unsupported(f"<{element.tag}> with {len(children)} children")
            result = self.test(children[0], event)
            return not result if element.tag == "not" else result
        if element.tag == "and":
            return all(self.test(c, event) for c in children)
        if element.tag == "or":
            return any(self.test(c, event) for c in children)
        if element.tag != "condition":
            raise Unsupported(f"condition <{element.tag}>")
        return self.compare_condition(element, event)

    def compare_condition(self, element: ET.Element, event: Any) -> bool:
        operator = element.get("operator", "eq")
        values = element.findall("stateValue")
        attributes = element.findall("stateAttribute")
        fields = element.findall("field")
        if len(values) == 2 and not attributes and not fields:
            first = self.value(values[0], event)
        elif len(values) == 1 and attributes and not fields:
            # compileAsQuery: the path is created if missing, then queried.
            quark = self.path(attributes, event)
            first = None if quark == INVALID else self.ss.ongoing[quark]
        elif len(values) == 1 and len(fields) == 1 and not attributes:
            first = event_field(event, fields[0].get("name", ""), self.diagnostics)
        else:
            raise Unsupported("condition shape")
        second = self.value(values[-1], event)
        return OPERATORS[operator](compare(first, second))


# ---------------------------------------------------------------------------
# Analyses files: callstacks and views


@dataclass
class Callstack:
    id: str
    element: ET.Element
    provider: StateProvider
    levels: List[List[str]]
    thread_level: Optional[int]


@dataclass
class Row:
    """One time graph view entry: its label, states and child rows."""

    path: str
    name: str
    states: List[Interval]
    children: List[Row]

    def walk(self) -> Iterable[Row]:
        yield self
        for child in self.children:
            yield from child.walk()


class AnalysisFile:
    """The callstacks, state providers and views of one tracecompass/*.xml."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.root = ET.parse(path).getroot()
        self.providers: Dict[str, StateProvider] = {}
        self.callstacks: Dict[str, Callstack] = {}
        self.views: Dict[str, ET.Element] = {}
        for element in self.root.iter("stateProvider"):
            self.providers[element.get("id", "")] = StateProvider(element)
        for element in self.root.iter("callstack"):
            inner = element.find("stateProvider")
            if inner is None:
                raise Unsupported("callstack without an inline stateProvider")
            groups = element.findall("callstackGroup")
            if len(groups) != 1:
                raise Unsupported("callstack with other than one callstackGroup")
            thread = groups[0].find("thread")
            self.callstacks[element.get("id", "")] = Callstack(
                id=element.get("id", ""),
                element=element,
                provider=self.providers[inner.get("id", "")],
                levels=[lvl.get("path", "").split("/") for lvl in groups[0].findall("level")],
                thread_level=int(thread.get("level", "0")) if thread is not None else None,
            )
        for element in self.root.iter("timeGraphView"):
            self.views[element.get("id", "")] = element

    def replay(self, callstack_id: str, events: Iterable[Any]) -> Replay:
        return Replay(self.callstacks[callstack_id].provider).run(events)


def callstack_elements(callstack: Callstack, ss: StateSystem) -> Dict[Tuple[str, ...], int]:
    """The leaf elements of a callstack series (InstrumentedCallStackElement):
    the attributes its level paths reach, by their names from the top level."""
    elements: Dict[Tuple[str, ...], int] = {(): ROOT}
    for pattern in callstack.levels:
        deeper: Dict[Tuple[str, ...], int] = {}
        for names, quark in elements.items():
            reached = [(names, quark)]
            for part in pattern:  # ITmfStateSystem.getQuarks: names or "*"
                if part == "..":
                    raise Unsupported("'..' in a callstack level path")
                reached = [
                    ((*n, ss.names[c]) if part == "*" else n, c)
                    for n, q in reached
                    for c in ss.sub_attributes(q)
                    if part in ("*", ss.names[c])
                ]
            deeper.update(reached)
        elements = deeper
    return elements


def callstack_frames(callstack: Callstack, ss: StateSystem) -> Dict[Tuple[str, ...], List[Frame]]:
    """Per leaf element, the frames the Flame Chart draws, by start then depth."""
    frames: Dict[Tuple[str, ...], List[Frame]] = {}
    for names, quark in callstack_elements(callstack, ss).items():
        stack = ss.opt_quark_relative(quark, CALL_STACK)
        if stack == INVALID:
            continue
        found = [
            Frame(int(ss.names[depth_quark]), i.value, i.start, i.end)
            for depth_quark in ss.sub_attributes(stack)
            for i in ss.intervals(depth_quark)
        ]
        frames[names] = sorted(found, key=lambda f: (f.start, f.depth))
    return frames


def open_stacks(callstack: Callstack, ss: StateSystem) -> Dict[Tuple[str, ...], int]:
    """Per leaf element, the depth left on its stack at the end of the trace."""
    out = {}
    for names, quark in callstack_elements(callstack, ss).items():
        stack = ss.opt_quark_relative(quark, CALL_STACK)
        if stack != INVALID:
            out[names] = int(ss.ongoing[stack] or 0)
    return out


def view_rows(view: ET.Element, ss: StateSystem) -> List[Row]:
    """DataDrivenOutputEntry.buildEntries for a view's top-level entries."""
    rows: List[Row] = []
    for entry in view.findall("entry"):
        rows += _entry_rows(entry, ss, ROOT)
    return rows


def _view_attribute(element: Optional[ET.Element], ss: StateSystem, base: int) -> int:
    if element is None:
        return INVALID
    if element.get("reference", "relative") != "relative" or list(element):
        raise Unsupported("view attribute reference or sub-attributes")
    kind = element.get("type")
    if kind == "self":
        return base
    if kind == "constant":
        return ss.opt_quark_relative(base, element.get("value", ""))  # one name, "/" included
    raise Unsupported(f"view attribute type {kind}")


def _entry_rows(entry: ET.Element, ss: StateSystem, base: int) -> List[Row]:
    path = entry.get("path", "")
    if "$" in path or entry.get("analysisId"):
        raise Unsupported("view entry placeholders or analysisId")
    if entry.find("id") is not None or entry.find("parent") is not None:
        raise Unsupported("view entry id/parent")
    quarks = [base]
    for part in path.replace("*", "(.*)").split("/"):
        regex = re.compile(part, re.M | re.S)  # StateSystem.getSubAttributes's flags
        quarks = [c for q in quarks for c in ss.sub_attributes(q) if regex.fullmatch(ss.names[c])]
    rows = []
    for quark in quarks:
        display = _view_attribute(entry.find("display"), ss, quark)
        if display == INVALID:
            continue  # TC drops the entry and its children
        name_quark = _view_attribute(entry.find("name"), ss, quark)
        name = ss.first_value(name_quark) if name_quark != INVALID else None
        children = [
            row for child in entry.findall("entry") for row in _entry_rows(child, ss, quark)
        ]
        rows.append(
            Row(
                path=ss.full_path(quark),
                name=java_string(name) if name is not None else ss.names[quark],
                states=ss.intervals(display),
                children=children,
            )
        )
    return rows
