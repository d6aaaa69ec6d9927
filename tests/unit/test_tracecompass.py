"""The Trace Compass analyses in tracecompass/*.xml: valid, meaningful, and right.

Three layers, because Trace Compass itself cannot run here:
1. structure: every file validates against the XSD Trace Compass validates with;
2. meaning: every event, field, enum label, location, defined value and id an
   analysis names exists, stacks follow Trace Compass's "CallStack" convention
   and every begin pops what it pushed;
3. behaviour: tests/tc_replay.py replays the analyses over a real trace of our
   tracer (and over synthetic PInsight events, PInsight not being built here)
   and the call stacks and view rows must match what the events say.

Layer 2 and the synthetic part of layer 3 are here and need the repository alone;
layer 1 (xmllint and the XSD in ../shared) and the real trace (LTTng, babeltrace2)
are tests/integration/test_tracecompass.py's, which uses the helpers below.
"""

from __future__ import annotations

import collections
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import pytest

from pinsight_python.recording import lttng
from tests import tc_replay
from tests.tc_replay import JInt
from tests.tracing import (
    CALLSTACK_ID,
    CALLSTACK_XML,
    CROSSDOMAIN_ID,
    CROSSDOMAIN_VIEW_ID,
    CROSSDOMAIN_XML,
    OUR_PROVIDER,
    REPO,
    TRACECOMPASS,
    Event,
    assert_clean,
    frame_paths,
    replay,
    rows_by_path,
    xml_files,
)

HEADER = REPO / "tracepoints" / "python_pinsight_lttng_ust.h"
README = TRACECOMPASS / "README.md"


# PInsight's events the cross-domain analysis handles, with the payload fields
# every PInsight build records (PINSIGHT_MPI / PINSIGHT_OPENMP builds add
# hostname, pid, mpirank, global_thread_num, ...: the analyses must not rely on
# those). Transcribed from passlab/pinsight at commit 98b1dbc22dc6:
# src/ompt_lttng_ust_tracepoint.h, src/pmpi_lttng_ust_tracepoint.h,
# src/cupti_lttng_ust_tracepoint.h. MPI per-call arguments (count, root, ...)
# are left out: the analyses read none of them.
OMPT_COMMON = {
    "global_thread_num",
    "omp_team_num",
    "omp_thread_num",
    "parallel_codeptr",
    "parallel_record_id",
}
OMPT_EVENTS: Dict[str, Set[str]] = {
    "parallel_begin": OMPT_COMMON | {"team_size", "flag", "parent_task_frame"},
    "parallel_end": OMPT_COMMON | {"flag"},
    "implicit_task_begin": OMPT_COMMON | {"team_size"},
    "implicit_task_end": OMPT_COMMON | {"team_size"},
    **{
        f"barrier_{kind}_sync_{edge}": OMPT_COMMON | {"kind", "sync_codeptr"}
        for kind in ("explicit", "implicit")
        for edge in ("begin", "end")
    },
}
PMPI_COMMON = {"hostname", "pid", "mpirank", "mpi_codeptr"}
MPI_FUNCTIONS = (
    "Init Init_thread Finalize Send Recv Isend Irecv Sendrecv Wait Waitall Barrier Reduce "
    "Allreduce Bcast Gather Allgather Scatter Alltoall Gatherv Scatterv Allgatherv Alltoallv "
    "Alltoallw Reduce_scatter Reduce_scatter_block Scan Exscan"
).split()
PMPI_EVENTS: Dict[str, Set[str]] = {
    f"MPI_{func}_{edge}": PMPI_COMMON | ({"return_value"} if edge == "end" else set())
    for func in MPI_FUNCTIONS
    for edge in ("begin", "end")
}
PMPI_EVENTS["MPI_Finalize_end"] = PMPI_COMMON | {"return_value"}
CUPTI_COMMON = {"devId", "correlationId", "cupti_timeStamp", "cuda_codeptr", "kernel_func"}
CUDA_MEMCPY_KINDS = {
    "cudaMemcpyHostToHost",
    "cudaMemcpyHostToDevice",
    "cudaMemcpyDeviceToHost",
    "cudaMemcpyDeviceToDevice",
    "cudaMemcpyDefault",
}
CUPTI_EVENTS: Dict[str, Set[str]] = {
    "cudaMemcpy_begin": CUPTI_COMMON | {"dst", "src", "count", "cudaMemcpyKind"},
    "cudaMemcpy_end": CUPTI_COMMON | {"return_val"},
    "cudaMemcpyAsync_begin": CUPTI_COMMON
    | {"dst", "src", "count", "cudaMemcpyKind", "contextId", "streamId"},
    "cudaMemcpyAsync_end": CUPTI_COMMON | {"return_val"},
    "cudaKernelLaunch_begin": CUPTI_COMMON
    | {"contextId", "streamId", "gridDimX", "gridDimY", "gridDimZ"}
    | {"blockDimX", "blockDimY", "blockDimZ"},
    "cudaKernelLaunch_end": set(CUPTI_COMMON),
    "cudaDeviceSync_begin": set(CUPTI_COMMON),
    "cudaDeviceSync_end": CUPTI_COMMON | {"return_val"},
    "cudaStreamSync_begin": CUPTI_COMMON | {"contextId", "streamId"},
    "cudaStreamSync_end": CUPTI_COMMON | {"return_val"},
    "cudaMalloc_begin": CUPTI_COMMON | {"size"},
    "cudaMalloc_end": CUPTI_COMMON | {"dev_ptr", "return_val"},
    "cudaFree_begin": CUPTI_COMMON | {"dev_ptr"},
    "cudaFree_end": CUPTI_COMMON | {"return_val"},
}
PINSIGHT_EVENTS: Dict[str, Set[str]] = {
    **{f"ompt_pinsight_lttng_ust:{k}": v for k, v in OMPT_EVENTS.items()},
    **{f"pmpi_pinsight_lttng_ust:{k}": v for k, v in PMPI_EVENTS.items()},
    **{f"cupti_pinsight_lttng_ust:{k}": v for k, v in CUPTI_EVENTS.items()},
}
PINSIGHT_ENUMS: Dict[Tuple[str, str], Set[str]] = {
    (f"cupti_pinsight_lttng_ust:{api}_begin", "cudaMemcpyKind"): CUDA_MEMCPY_KINDS
    for api in ("cudaMemcpy", "cudaMemcpyAsync")
}


# 1. Structure: tests/integration/test_tracecompass.py (xmllint, the XSD).


# ---------------------------------------------------------------------------
# 2. Meaning


@dataclass
class Provider:
    """Events of an LTTng-UST provider header: payload fields and enum labels."""

    events: Dict[str, Set[str]]
    enums: Dict[Tuple[str, str], Set[str]]


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def _macro_calls(text: str, macro: str) -> Iterator[List[str]]:
    """Top-level comma-separated arguments of each `macro(...)` in text."""
    for match in re.finditer(rf"\b{macro}\s*\(", text):
        depth, start, args = 1, match.end(), []
        pos = start
        while depth:
            char = text[pos]
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            if (char == "," and depth == 1) or depth == 0:
                args.append(text[start:pos].strip())
                start = pos + 1
            pos += 1
        yield args


def _fields(fields_macro: str) -> Tuple[Set[str], Dict[str, str]]:
    names, enums = set(), {}
    body = fields_macro[fields_macro.index("(") + 1 : fields_macro.rindex(")")]
    for kind, args_text in re.findall(r"lttng_ust_field_(\w+)\s*\(([^()]*)\)", body):
        args = [a.strip() for a in args_text.split(",")]
        name_index = {"string": 0, "integer": 1, "integer_hex": 1, "enum": 3, "float": 1,
                      "sequence": 1}
        assert kind in name_index, f"{HEADER.name}: field macro lttng_ust_field_{kind} not parsed"
        names.add(args[name_index[kind]])
        if kind == "enum":
            enums[args[3]] = args[1]
    return names, enums


def parse_provider_header(path: Path) -> Provider:
    text = _strip_comments(path.read_text())
    enum_labels = {
        args[1]: set(re.findall(r'lttng_ust_field_enum_value\(\s*"([^"]+)"', args[2]))
        for args in _macro_calls(text, "LTTNG_UST_TRACEPOINT_ENUM")
    }
    classes = {
        args[1]: _fields(args[3]) for args in _macro_calls(text, "LTTNG_UST_TRACEPOINT_EVENT_CLASS")
    }
    event_fields = {
        f"{args[0]}:{args[1]}": _fields(args[3])
        for args in _macro_calls(text, "LTTNG_UST_TRACEPOINT_EVENT")
    }
    for args in _macro_calls(text, "LTTNG_UST_TRACEPOINT_EVENT_INSTANCE"):
        event_fields[f"{args[2]}:{args[3]}"] = classes[args[1]]
    events = {name: names for name, (names, _) in event_fields.items()}
    enums = {
        (name, field): enum_labels[enum]
        for name, (_, by_field) in event_fields.items()
        for field, enum in by_field.items()
    }
    return Provider(events, enums)


OURS = parse_provider_header(HEADER)
KNOWN_EVENTS: Dict[str, Set[str]] = {**OURS.events, **PINSIGHT_EVENTS}
KNOWN_ENUMS: Dict[Tuple[str, str], Set[str]] = {**OURS.enums, **PINSIGHT_ENUMS}
# What our sessions record (pinsight_python.recording.lttng.CONTEXTS), as TC names it.
CONTEXT_FIELDS = {f"context._{ctx}" for ctx in lttng.CONTEXTS}


def test_header_parser_sees_the_whole_contract() -> None:
    assert set(OURS.events) == {
        f"{OUR_PROVIDER}:{name}"
        for name in (
            "function_begin function_end c_call_begin c_call_end "
            "compact_function_begin compact_function_end compact_c_call_begin "
            "compact_c_call_end code_info callable_info generator_end event_block "
            "process_info thread_start mode_change config_info lexgion_counts "
            "import_begin import_end "
            "alloc_sample free_sample gil_switch gil_released "
            "task_create task_name task_step task_await task_done task_handoff "
            "open_frame dump_marker"
        ).split()
    }
    assert OURS.events[f"{OUR_PROVIDER}:c_call_end"] >= {"callee_name", "caller_qualname"}
    assert OURS.enums[(f"{OUR_PROVIDER}:function_end", "transition")] >= {"return", "unwind"}
    assert OURS.enums[(f"{OUR_PROVIDER}:generator_end", "how")] == {"returned", "raised",
                                                                   "collected"}
    assert OURS.enums[(f"{OUR_PROVIDER}:task_done", "how")] == {"returned", "raised", "cancelled"}


@dataclass(frozen=True)
class FieldUse:
    field: str
    role: str  # "attribute", "value" or "condition"
    compared_to: Optional[str] = None  # the string constant a condition compares with


class AnalysisMeaning:
    """What one analysis file refers to, with locations inlined."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.root = ET.parse(path).getroot()
        self.file = tc_replay.AnalysisFile(path)

    def providers(self) -> List[ET.Element]:
        return list(self.root.iter("stateProvider"))

    @staticmethod
    def locations(provider: ET.Element) -> Dict[str, List[ET.Element]]:
        found: Dict[str, List[ET.Element]] = {}
        for location in provider.findall("location"):
            parts: List[ET.Element] = []
            for part in location.findall("stateAttribute"):
                if part.get("type") == "location":
                    name = part.get("value", "")
                    assert name in found, f"{location.get('id')} uses location {name} before it"
                    parts += found[name]
                else:
                    parts.append(part)
            found[location.get("id", "")] = parts
        return found

    @staticmethod
    def inline(parts: Sequence[ET.Element], locations: Dict[str, List[ET.Element]]) -> List:
        out: List[ET.Element] = []
        for part in parts:
            if part.get("type") == "location":
                assert part.get("value") in locations, f"undefined location {part.get('value')}"
                out += locations[part.get("value", "")]
            else:
                out.append(part)
        return out

    def field_uses(self, handler: ET.Element, locations: Dict[str, List]) -> List[FieldUse]:
        uses: List[FieldUse] = []
        for element in handler.iter():
            if element.tag == "condition":
                strings = [v.get("value") for v in element.findall("stateValue[@type='string']")]
                for field in element.findall("field"):
                    compared = strings[0] if strings else None
                    uses.append(FieldUse(field.get("name", ""), "condition", compared))
            parts = self.inline(element.findall("stateAttribute"), locations)
            uses += [
                FieldUse(p.get("value", ""), "attribute")
                for p in parts
                if p.get("type") == "eventField"
            ]
            if element.tag in ("stateValue", "futureTime") and element.get("type") == "eventField":
                uses.append(FieldUse(element.get("value", ""), "value"))
        return uses


ANALYSES = [AnalysisMeaning(p) for p in xml_files()]


def handlers() -> Iterator[Tuple[AnalysisMeaning, ET.Element, ET.Element]]:
    for analysis in ANALYSES:
        for provider in analysis.providers():
            for handler in provider.findall("eventHandler"):
                yield analysis, provider, handler


def test_every_handled_event_exists() -> None:
    for analysis, _, handler in handlers():
        name = handler.get("eventName", "")
        # No wildcards: an exact name is checkable, and a wildcard end handler
        # could pop a frame some unhandled begin never pushed.
        assert "*" not in name, f"{analysis.path.name}: wildcard handler {name}"
        assert name in KNOWN_EVENTS, f"{analysis.path.name}: unknown event {name}"


def test_every_field_exists_in_its_event() -> None:
    checked = 0
    for analysis, provider, handler in handlers():
        event = handler.get("eventName", "")
        for use in analysis.field_uses(handler, analysis.locations(provider)):
            checked += 1
            if use.field.startswith("context."):
                assert use.field in CONTEXT_FIELDS, (
                    f"{analysis.path.name}: {event} reads {use.field}, a context our "
                    f"sessions do not record ({sorted(CONTEXT_FIELDS)})"
                )
            else:
                assert use.field in KNOWN_EVENTS[event], (
                    f"{analysis.path.name}: {event} has no field {use.field}"
                )
    assert checked > 50


def test_enum_fields_are_only_compared_with_their_labels() -> None:
    # TC hands an enum field over as a (label, value) pair: fine to compare
    # with a label, not a state value or an attribute name.
    compared = 0
    for analysis, provider, handler in handlers():
        event = handler.get("eventName", "")
        for use in analysis.field_uses(handler, analysis.locations(provider)):
            labels = KNOWN_ENUMS.get((event, use.field))
            if labels is None:
                continue
            assert use.role == "condition", f"{analysis.path.name}: {event}.{use.field} as {use}"
            assert use.compared_to in labels, f"{analysis.path.name}: {event}: {use}"
            compared += 1
    assert compared >= 4  # the cudaMemcpyKind directions


def test_defined_values_and_locations_are_defined_and_used() -> None:
    for analysis in ANALYSES:
        for provider in analysis.providers():
            defined = {d.get("name") for d in provider.findall("definedValue")}
            text = ET.tostring(provider, encoding="unicode")
            used = set(re.findall(r'value="\$(\w+)"', text))
            assert used <= defined, f"{analysis.path.name}: undefined {used - defined}"
            assert defined <= used, f"{analysis.path.name}: unused {defined - used}"
            locations = analysis.locations(provider)  # asserts definition before use
            referenced = {
                e.get("value")
                for e in provider.iter("stateAttribute")
                if e.get("type") == "location"
            }
            assert referenced <= set(locations)
            assert set(locations) <= referenced, f"unused locations {set(locations) - referenced}"


def all_ids() -> Dict[str, str]:
    """Analysis and view ids across all files: TC registers them globally."""
    ids: Dict[str, str] = {}
    for analysis in ANALYSES:
        for tag in ("stateProvider", "callstack", "pattern", "timeGraphView", "xyView"):
            for element in analysis.root.iter(tag):
                key = element.get("id", "")
                assert key not in ids, f"id {key} defined twice"
                ids[key] = tag
    return ids


def test_ids_are_unique_and_views_show_defined_analyses() -> None:
    ids = all_ids()
    for analysis in ANALYSES:
        for view in analysis.root.iter("timeGraphView"):
            targets = [a.get("id") for a in view.findall("head/analysis")]
            assert targets, f"view {view.get('id')} names no analysis"
            for target in targets:
                assert ids.get(target) in ("callstack", "stateProvider"), target


def test_view_states_have_the_providers_numbers() -> None:
    # A view colors states by value: its definedValue must carry the number
    # the provider stores under the same name, and every int state a row can
    # show needs one.
    for analysis in ANALYSES:
        providers = {p.get("id"): p for p in analysis.root.iter("stateProvider")}
        callstacks = {c.get("id"): c.find("stateProvider") for c in analysis.root.iter("callstack")}
        for view in analysis.root.iter("timeGraphView"):
            target = view.find("head/analysis").get("id")
            provider = callstacks[target] if target in callstacks else providers[target]
            stored = {d.get("name"): d.get("value") for d in provider.findall("definedValue")}
            shown = {d.get("name"): d.get("value") for d in view.findall("definedValue")}
            for name, value in shown.items():
                assert stored.get(name, value) == value, f"{view.get('id')}: {name}"
            int_states = {
                v.get("value", "")[1:]
                for v in provider.iter("stateValue")
                if v.get("type") == "int" and v.get("value", "").startswith("$")
            }
            assert int_states <= set(shown), (
                f"{view.get('id')}: no color for {int_states - set(shown)}"
            )


def callstack_paths(callstack: ET.Element) -> List[Tuple[str, str, List[ET.Element]]]:
    """(handler event, stack action, inlined path) of every push and pop."""
    provider = callstack.find("stateProvider")
    locations = AnalysisMeaning.locations(provider)
    out = []
    for handler in provider.findall("eventHandler"):
        for change in handler.iter():
            value = change.find("stateValue")
            if value is None or value.get("stack") not in ("push", "pop"):
                continue
            path = AnalysisMeaning.inline(change.findall("stateAttribute"), locations)
            out.append((handler.get("eventName", ""), value.get("stack", ""), path))
    return out


def test_callstacks_follow_trace_compass_conventions() -> None:
    callstacks = [c for a in ANALYSES for c in a.root.iter("callstack")]
    assert {c.get("id") for c in callstacks} == {CALLSTACK_ID, CROSSDOMAIN_ID}
    for callstack in callstacks:
        group = callstack.find("callstackGroup")
        levels = [p for lvl in group.findall("level") for p in lvl.get("path", "").split("/")]
        pushes_to_callstack = 0
        for event, action, path in callstack_paths(callstack):
            stack_name = path[-1]
            assert stack_name.get("type") == "constant", f"{event}: stack named by {stack_name}"
            if stack_name.get("value") != tc_replay.CALL_STACK:
                continue  # a helper stack (PythonStack, OpenMPStack): not the call stack
            pushes_to_callstack += action == "push"
            # The levels must lead to the stack: constants equal, "*" one part.
            prefix = path[:-1]
            assert len(prefix) == len(levels), f"{event}: stack path depth"
            for part, level in zip(prefix, levels):
                if level == "*":
                    assert part.get("type") == "eventField", f"{event}: {level} vs {part.attrib}"
                else:
                    assert part.attrib == {"type": "constant", "value": level}, event
        assert pushes_to_callstack >= 2, (
            f"{callstack.get('id')}: nothing pushed onto an attribute named "
            f"{tc_replay.CALL_STACK!r}, the name Trace Compass finds call stacks by"
        )
        # The thread level's "*" is the vtid: TC reads thread ids from those names.
        thread = group.find("thread")
        assert thread is not None and thread.get("type") == "name"
        level_parts = [lvl.get("path", "").split("/") for lvl in group.findall("level")]
        star = sum(len(p) for p in level_parts[: int(thread.get("level", "0")) + 1]) - 1
        for event, _, path in callstack_paths(callstack):
            if path[-1].get("value") == tc_replay.CALL_STACK:
                assert path[star].attrib == {"type": "eventField", "value": "context._vtid"}, event


def test_every_begin_pops_what_it_pushed() -> None:
    for analysis in ANALYSES:
        for callstack in analysis.root.iter("callstack"):
            balance: Dict[Tuple[str, str], int] = collections.Counter()
            for event, action, path in callstack_paths(callstack):
                stack = "/".join(p.get("value", "") for p in path)
                base, _, edge = event.rpartition("_")
                assert (edge, action) in (("begin", "push"), ("end", "pop")), (
                    f"{analysis.path.name}: {event} does {action}"
                )
                balance[(base, stack)] += 1 if action == "push" else -1
            unbalanced = {k: v for k, v in balance.items() if v}
            assert not unbalanced, f"{analysis.path.name}: {unbalanced}"


def test_views_show_attributes_the_provider_writes() -> None:
    for analysis in ANALYSES:
        written: Set[str] = set()
        for provider in analysis.providers():
            for change in provider.iter():
                written |= {
                    p.get("value", "")
                    for p in change.findall("stateAttribute")
                    if p.get("type") == "constant"
                }
            written |= {
                p.get("value", "")
                for loc in provider.findall("location")
                for p in loc.findall("stateAttribute")
                if p.get("type") == "constant"
            }
        for view in analysis.root.iter("timeGraphView"):
            for entry in view.iter("entry"):
                for part in entry.get("path", "").split("/"):
                    assert part == "*" or part in written, f"{view.get('id')}: path {part}"
                for tag in ("display", "name"):
                    ref = entry.find(tag)
                    if ref is not None and ref.get("type") == "constant":
                        assert ref.get("value") in written, f"{view.get('id')}: {tag} {ref.attrib}"


def test_readme_documents_every_analysis_and_view() -> None:
    readme = README.read_text()
    ids = all_ids()
    for analysis in ANALYSES:
        assert analysis.path.name in readme, f"README does not name {analysis.path.name}"
        labels = [c.find("stateProvider/head/label") for c in analysis.root.iter("callstack")]
        labels += [v.find("head/label") for v in analysis.root.iter("timeGraphView")]
        for label in labels:
            assert label.get("value") in readme, f"README misses {label.get('value')}"
    mentioned = set(re.findall(r"`(pinsight\.python\.tracecompass\.[\w.]+)`", readme))
    assert mentioned, "README names no ids"
    assert mentioned <= set(ids), f"README names unknown ids {mentioned - set(ids)}"


# ---------------------------------------------------------------------------
# 3. Behaviour


# -- cross-domain, synthetic: PInsight is not built here, so its events are
# made from the PINSIGHT_EVENTS table (every field filled in), interleaved
# with ours the way the runtimes order them on a thread.


class SyntheticTrace:
    def __init__(self) -> None:
        self.events: List[Event] = []
        self.ts = 1_000

    def emit(self, name: str, vtid: int, **fields: Any) -> None:
        self.ts += 100
        known = KNOWN_EVENTS[name]
        assert set(fields) <= known, f"{name}: no field {set(fields) - known}"
        payload: Dict[str, Any] = {f: 0 for f in known}
        payload.update(fields)
        ctx = {"vpid": 4242, "vtid": vtid, "procname": "python3"}
        self.events.append(Event(name, self.ts, payload, ctx))

    def py(self, kind: str, name: str, vtid: int = 4242) -> None:
        if kind.startswith("function"):
            self.emit(f"{OUR_PROVIDER}:{kind}", vtid, qualname=name, lineno=3)
        else:
            self.emit(f"{OUR_PROVIDER}:{kind}", vtid, callee_name=name, caller_lineno=4)

    def pinsight(self, provider: str, name: str, vtid: int = 4242, **fields: Any) -> None:
        self.emit(f"{provider}_pinsight_lttng_ust:{name}", vtid, **fields)


MAIN, WORKER = 4242, 4243


def crossdomain_program() -> SyntheticTrace:
    trace = SyntheticTrace()
    trace.emit(
        f"{OUR_PROVIDER}:process_info",
        MAIN,
        pid=4242,
        mpi_rank=1,
        mpi_size=4,
        hostname="node07",
        argv="python3 app.py",
    )
    trace.emit(f"{OUR_PROVIDER}:thread_start", MAIN, python_thread_id=0)
    trace.py("function_begin", "main")
    trace.py("function_begin", "step")
    # step calls a native kernel that opens an OpenMP parallel region.
    trace.py("c_call_begin", "run_parallel")
    trace.pinsight("ompt", "parallel_begin")
    trace.pinsight("ompt", "implicit_task_begin")
    trace.pinsight("ompt", "implicit_task_begin", WORKER)
    trace.pinsight("ompt", "barrier_implicit_sync_begin")
    trace.pinsight("ompt", "barrier_implicit_sync_begin", WORKER)
    # The runtime ends the worker's implicit task inside its barrier.
    trace.pinsight("ompt", "implicit_task_end", WORKER)
    trace.pinsight("ompt", "barrier_implicit_sync_end", WORKER)
    trace.pinsight("ompt", "barrier_implicit_sync_end")
    trace.pinsight("ompt", "implicit_task_end")
    trace.pinsight("ompt", "parallel_end")
    trace.py("c_call_end", "run_parallel")
    trace.py("function_end", "step")
    # An MPI collective from mpi4py, then CUDA work from a native call.
    trace.py("function_begin", "exchange")
    trace.py("c_call_begin", "Comm.Allreduce")
    trace.pinsight("pmpi", "MPI_Allreduce_begin")
    trace.pinsight("pmpi", "MPI_Allreduce_end")
    trace.py("c_call_end", "Comm.Allreduce")
    trace.py("c_call_begin", "gpu_step")
    trace.pinsight("cupti", "cudaMemcpy_begin", cudaMemcpyKind="cudaMemcpyHostToDevice")
    trace.pinsight("cupti", "cudaMemcpy_end")
    trace.pinsight("cupti", "cudaKernelLaunch_begin", kernel_func="saxpy_kernel")
    trace.pinsight("cupti", "cudaKernelLaunch_end", kernel_func="saxpy_kernel")
    trace.py("c_call_end", "gpu_step")
    trace.py("function_end", "exchange")
    trace.py("function_end", "main")
    return trace


def test_crossdomain_stack_shows_which_python_call_opened_what() -> None:
    trace = crossdomain_program()
    analysis, result = replay(CROSSDOMAIN_XML, CROSSDOMAIN_ID, trace.events)
    assert_clean(result)
    callstack = analysis.callstacks[CROSSDOMAIN_ID]
    frames = tc_replay.callstack_frames(callstack, result.ss)
    assert tc_replay.open_stacks(callstack, result.ss) == {("4242", "4242"): 0, ("4242", "4243"): 0}
    main_paths = frame_paths(frames[("4242", "4242")])
    region = ("main", "step", "run_parallel", "omp parallel", "omp implicit task")
    assert (*region, "omp implicit barrier") in main_paths
    assert ("main", "exchange", "Comm.Allreduce", "MPI_Allreduce") in main_paths
    assert ("main", "exchange", "gpu_step", "cudaMemcpy") in main_paths
    assert ("main", "exchange", "gpu_step", "cudaKernelLaunch", "saxpy_kernel") in main_paths
    # The worker's frames nest by count, not by name, across the runtime's order.
    worker = frames[("4242", "4243")]
    assert [(f.depth, f.name) for f in worker] == [
        (1, "omp implicit task"),
        (2, "omp implicit barrier"),
    ]

    # The Python-only analysis ignores PInsight's events and keeps Python's frames.
    python_only, python_result = replay(CALLSTACK_XML, CALLSTACK_ID, trace.events)
    assert_clean(python_result)
    python_frames = tc_replay.callstack_frames(
        python_only.callstacks[CALLSTACK_ID], python_result.ss
    )
    cross_python = [
        f
        for f in frames[("4242", "4242")]
        if f.name in {"main", "step", "run_parallel", "exchange", "Comm.Allreduce", "gpu_step"}
    ]
    assert python_frames[("4242", "4242")] == cross_python


GIL_VIEW_ID = "pinsight.python.tracecompass.gil.timeGraphView"


def test_gil_view_follows_the_holder() -> None:
    """events = gil: a thread holds the GIL from its own gil event until another
    thread's of its process."""
    trace = SyntheticTrace()
    trace.emit(f"{OUR_PROVIDER}:process_info", MAIN, pid=4242, argv="python3 app.py")
    trace.emit(f"{OUR_PROVIDER}:thread_start", MAIN, python_thread_id=0)
    trace.emit(f"{OUR_PROVIDER}:thread_start", WORKER, python_thread_id=1)
    trace.py("function_begin", "main")
    trace.py("function_begin", "work", WORKER)
    trace.emit(f"{OUR_PROVIDER}:gil_switch", MAIN, python_thread_id=0, previous_thread_id=1,
               wait_ns=50)
    main_holds = trace.ts
    trace.emit(f"{OUR_PROVIDER}:gil_switch", WORKER, python_thread_id=1, previous_thread_id=0,
               wait_ns=70)
    worker_holds = trace.ts
    trace.emit(f"{OUR_PROVIDER}:gil_released", MAIN, python_thread_id=0, released_ns=40,
               wait_ns=10, source="save_restore")
    main_again = trace.ts
    trace.py("function_end", "work", WORKER)
    trace.py("function_end", "main")
    analysis, result = replay(CALLSTACK_XML, CALLSTACK_ID, trace.events)
    assert_clean(result)
    rows = rows_by_path(analysis.views[GIL_VIEW_ID], result.ss)
    main = rows["Processes/4242/Threads/4242"]
    worker = rows["Processes/4242/Threads/4243"]
    assert main.name == "Python thread 0 (tid 4242)"
    assert [(s.start, s.value) for s in main.states] == [
        (main_holds, "holding"), (worker_holds, "not holding"), (main_again, "holding")]
    assert [(s.start, s.value) for s in worker.states] == [
        (worker_holds, "holding"), (main_again, "not holding")]


def test_crossdomain_view_rows_per_thread() -> None:
    trace = crossdomain_program()
    analysis, result = replay(CROSSDOMAIN_XML, CROSSDOMAIN_ID, trace.events)
    rows = rows_by_path(analysis.views[CROSSDOMAIN_VIEW_ID], result.ss)
    values = {
        d.get("name"): JInt(int(d.get("value", "")))
        for d in analysis.views[CROSSDOMAIN_VIEW_ID].findall("definedValue")
        if d.get("value", "").isdigit()
    }
    assert rows["Processes/4242"].name == "rank 1/4, pid 4242, node07"
    main = "Processes/4242/Threads/4242"
    assert rows[main].name == "Python thread 0 (tid 4242)"
    assert [s.value for s in rows[f"{main}/OpenMP"].states] == [
        values["OMP_STATE_IN_PARALLEL"],
        values["OMP_STATE_IN_IMPLICIT_TASK"],
        values["OMP_STATE_IN_SYNC"],
        values["OMP_STATE_IN_IMPLICIT_TASK"],
        values["OMP_STATE_IN_PARALLEL"],
    ]
    assert [s.value for s in rows[f"{main}/MPI"].states] == [
        values["MPI_STATE_IN_COLLECTIVE_Allreduce"]
    ]
    assert [s.value for s in rows[f"{main}/CUDA"].states] == [
        values["CUDA_STATE_CUDA_MEMCPY_H2D"],
        values["CUDA_STATE_CUDA_KERNEL_EXE"],
    ]
    python_states = [s.value for s in rows[f"{main}/Python"].states]
    assert python_states[:4] == ["idle", "main", "step", "run_parallel"]
    assert python_states[-1] == "idle"
    # The OpenMP worker has no Python row, yet its row is shown.
    worker = "Processes/4242/Threads/4243"
    assert worker in rows and f"{worker}/Python" not in rows
    assert rows[worker].name == "4243"  # no thread_start: TC falls back to the attribute name
    assert len(rows[f"{worker}/OpenMP"].states) >= 2


# -- the replayer itself, on the Trace Compass behaviours the analyses lean on


def test_replayer_follows_trace_compass_stack_and_type_rules() -> None:
    ss = tc_replay.StateSystem()
    ss.start_time = 0
    stack = ss.quark_relative_and_add(tc_replay.ROOT, "CallStack")
    ss.pop(5, stack)  # an empty pop is ignored, as TC does at trace start
    ss.push(10, "a", stack)
    ss.push(20, "b", stack)
    assert ss.stack_top(stack) == "b" and ss.ongoing[stack] == 2
    assert ss.pop(30, stack) == "b"
    assert ss.stack_top(stack) == "a"
    ss.pop(40, stack)
    assert ss.ongoing[stack] is None  # TC stores null, not 0, for an empty stack
    ss.close(50)
    depth_one = ss.quark("CallStack", "1")
    assert ss.intervals(depth_one) == [tc_replay.Interval(10, 39, "a")]
    assert ss.empty_pops == [(5, "CallStack")]
    row = ss.quark_relative_and_add(tc_replay.ROOT, "row")
    ss.modify(60, JInt(1), row)
    with pytest.raises(tc_replay.StateValueTypeError):
        ss.modify(70, tc_replay.JLong(2), row)  # Integer then Long: TC throws
    assert tc_replay.eval_script("'pid ' + p + ', ' + a", {"p": tc_replay.JLong(7), "a": "x"}) == (
        "pid 7, x"
    )
    with pytest.raises(tc_replay.Unsupported):
        tc_replay.eval_script("p.substring(1)", {"p": "x"})
