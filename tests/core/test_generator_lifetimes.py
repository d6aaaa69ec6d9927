"""Per-code state never outlives its code object, and generators stay exact.

Two crashes were found in real programs: records of generators that died while
suspended kept pointing at per-code state freed with its code object (CPython's
test_generators, test_asyncgen), and any other co_extra user (a PEP 523 frame
evaluator, a JIT's cache) made CPython hand our free function an empty slot.
The same stale records unbalanced capped traces (sympy's assumption
generators). These tests run those situations for real, traced in an LTTng
session; the sanitizer stage of scripts/test.sh runs them under AddressSanitizer,
where any recurrence of a use-after-free is a failure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from tests.tracing import SETPROFILE, Trace, Tracer, check_balanced, cli

BACKENDS = ["setprofile"] if SETPROFILE else ["sys.monitoring", "setprofile"]
MODES = ["STANDBY", "MONITORING", "TRACING"]

# Another co_extra user, as a PEP 523 evaluator or a JIT would be: it requests
# its own index (after ours) and sets only its slot on code objects, some of
# which carry ours too. CPython sizes every extra array for all the indexes
# requested so far, and calls every registered free function for each slot of
# a dying code object: ours with NULL wherever only the neighbour set its slot.
# The observing neighbour's free function is a ctypes callback: Python code,
# which cannot run during the interpreter's finalization (where code objects
# still die), so that program ends with os._exit once it has printed; the
# neighbour with C's free() as its free function ends normally.
NEIGHBOUR = """
import ctypes
import gc
import json
import os
import sys

FREEFUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
OBSERVE = {observe}
freed = []

@FREEFUNC
def observed_free(value):
    freed.append(value)

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
api = ctypes.pythonapi
if sys.version_info >= (3, 12):
    request = api.PyUnstable_Eval_RequestCodeExtraIndex
    set_extra = api.PyUnstable_Code_SetExtra
else:
    request, set_extra = api._PyEval_RequestCodeExtraIndex, api._PyCode_SetExtra
request.restype = ctypes.c_ssize_t
set_extra.argtypes = [ctypes.py_object, ctypes.c_ssize_t, ctypes.c_void_p]
set_extra.restype = ctypes.c_int
if OBSERVE:
    request.argtypes = [FREEFUNC]
    index = request(observed_free)
else:
    request.argtypes = [ctypes.c_void_p]
    index = request(ctypes.cast(libc.free, ctypes.c_void_p).value)

def make(i):
    namespace = {{}}
    exec(f"def f{{i}}():\\n    return {{i}}\\n", namespace)
    return namespace[f"f{{i}}"]

for i in range(60):
    function = make(i)
    if i % 2:
        function()  # ours is set too (but in STANDBY)
    value = i + 1 if OBSERVE else libc.malloc(16)
    assert set_extra(function.__code__, index, value) == 0
    del function
    gc.collect()
if OBSERVE:
    print(json.dumps(sorted(value for value in freed if value)), flush=True)
    os._exit(0)
print("done")
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_neighbouring_co_extra_user(tmp_path: Path, backend: str, mode: str) -> None:
    tracer = Tracer(tmp_path)
    activate = f"pinsight_python.activate(mode={mode!r}, backend={backend!r})"
    observed = tracer.run(NEIGHBOUR.format(observe=True), activate=activate)
    # Its free function saw each of its slots once.
    assert json.loads(observed.stdout) == list(range(1, 61))
    # With a C free function the program also ends normally, code objects
    # dying during finalization included.
    plain = tracer.run(NEIGHBOUR.format(observe=False), activate=activate)
    assert plain.stdout == "done\n"
    for run in (observed, plain):
        assert "internal error" not in run.stderr


# Code objects made at run time, generators suspended inside them, then the code
# and the generators dropped together and collected: the next round's code
# objects, frames and generators reuse the same addresses. Any record of a dead
# generator left behind is read after its per-code state was freed.
REUSED_ADDRESSES = """
import gc
import threading

from pinsight_python import _pinsight_python_testing as hooks

SOURCE = '''
def gen(n):
    for i in range(n):
        yield i

def guarded(n):
    try:
        yield n
    finally:
        pass

async def coro(step):
    await step
    await step

class Step:
    def __await__(self):
        yield
'''

def one_round(i, drop_in_cycle):
    namespace = {}
    exec(compile(SOURCE, f"<round {i}>", "exec"), namespace)
    gens = [namespace["gen"](5) for _ in range(8)] + [namespace["guarded"](i) for _ in range(4)]
    for g in gens:
        next(g)                          # suspended at a yield
    gens[0].close()
    list(gens[1])                        # exhausted
    coroutine = namespace["coro"](namespace["Step"]())
    coroutine.send(None)                 # suspended at an await
    if drop_in_cycle:
        gens.append(gens)                # a cycle: only the collector frees them
    del namespace, gens, coroutine       # code objects and suspended generators die
    gc.collect()

for i in range(150):
    one_round(i, drop_in_cycle=i % 3 == 0)

# One resumed on another thread, then dropped there.
namespace = {}
exec(compile(SOURCE, "<threaded>", "exec"), namespace)
g = namespace["gen"](3)
next(g)
def resume():
    global g
    next(g)
    del g
t = threading.Thread(target=resume)
t.start()
t.join()
del namespace
gc.collect()
print(hooks._debug_generator_entries())
"""


@pytest.mark.parametrize("cap", [None, 3])
def test_generators_dead_at_reused_addresses(tmp_path: Path, cap: int) -> None:
    tracer = Tracer(tmp_path)
    env = {}
    if cap is not None:
        config = tmp_path / "cap.txt"
        config.write_text(f"[Lexgion(Python).default]\n    max_num_traces = {cap}\n")
        env["PINSIGHT_TRACE_CONFIG_FILE"] = str(config)
    run = tracer.run(REUSED_ADDRESSES, env=env)
    assert "internal error" not in run.stderr
    assert run.stdout.split() == ["0"], "entries of dead generators were kept"
    check_balanced(run.trace)
    assert run.trace.functions()["gen"] > 0


# The soup of issue 22: every generator and coroutine lifetime, under caps and
# rates. The program counts the starts of each function on each thread; the
# trace must hold exactly the instances rate control allows, each with all its
# segments, and balance on every thread.
SOUP = """
import gc
import json
import threading
from collections import Counter

starts = Counter()

def exhausted():
    starts["exhausted", threading.get_ident()] += 1
    yield 1
    yield 2

def dropped():
    starts["dropped", threading.get_ident()] += 1
    while True:
        yield

def closed():
    starts["closed", threading.get_ident()] += 1
    yield

def thrown():
    starts["thrown", threading.get_ident()] += 1
    try:
        yield 1
    except ValueError:
        yield 2

def cyclic(box):
    starts["cyclic", threading.get_ident()] += 1
    yield

def nested(depth):
    starts["nested", threading.get_ident()] += 1
    yield depth
    if depth:
        for _ in nested(depth - 1):   # other instances resume while this one runs
            pass
    yield -depth

def never_started():
    starts["never_started", threading.get_ident()] += 1
    yield

class Step:
    def __await__(self):
        yield

async def awaited():
    starts["awaited", threading.get_ident()] += 1
    await Step()
    await Step()

def drive(coroutine):
    try:
        while True:
            coroutine.send(None)
    except StopIteration:
        pass

def one_round():
    list(exhausted())
    g = dropped(); next(g); next(g); del g
    g = closed(); next(g); g.close()
    g = thrown(); next(g); g.throw(ValueError); del g
    box = []; g = cyclic(box); box.append(g); next(g); del g, box
    list(nested(3))
    never_started()
    drive(awaited())
    any(x > 2 for x in range(10))
    starts["one_round.<locals>.<genexpr>", threading.get_ident()] += 1

for _ in range(12):
    one_round()
gc.collect()

# Started here, resumed and finished on another thread.
handover = [exhausted() for _ in range(6)]
for g in handover:
    next(g)
def finish():
    for g in handover:
        list(g)
worker = threading.Thread(target=finish)
worker.start()
worker.join()
t = threading.Thread(target=lambda: [one_round() for _ in range(5)])
t.start()
t.join()
main = threading.main_thread().ident
print(json.dumps([[name, ident == main, n] for (name, ident), n in starts.items()]))
"""

# CPython 3.12 and 3.13 close a generator suspended outside any handler without
# running it; before and since (3.14), close() throws GeneratorExit in (a traced
# segment that raises).
CLOSE_RUNS_NOTHING = (3, 12) <= sys.version_info < (3, 14)

# Segments (begin/end pairs) of one traced instance of each soup function.
SEGMENTS = {
    "exhausted": 3,  # start, resume, resume
    "dropped": 2,  # start, resume; then collected while suspended
    "closed": 1 if CLOSE_RUNS_NOTHING else 2,  # explicit close()
    "thrown": 2,  # start, throw
    "cyclic": 1,
    "nested": 3,  # start, resume (runs the inner ones), resume
    "awaited": 3,
    "one_round.<locals>.<genexpr>": 4,  # any() stops at x == 3: start and three resumes
}


# How each soup instance ends (generator_end's how): collected while suspended
# for those dropped, a generator expression any() stopped included.
ENDED = {
    "exhausted": "returned",
    "dropped": "collected",
    "closed": "collected" if CLOSE_RUNS_NOTHING else "raised",
    "thrown": "collected",  # its finalizer's segment runs after the entry is gone
    "cyclic": "collected",
    "nested": "returned",
    "awaited": "returned",
    "one_round.<locals>.<genexpr>": "collected",
}


def allowed(starts: int, cap: int, rate: int) -> int:
    # The 0-based executions rate-1, 2*rate-1, ... are traced, `cap` of them.
    return min(cap, starts // rate) if cap >= 0 else starts // rate


def segments_by_thread(trace: Trace, qualname: str) -> Dict[bool, List[str]]:
    """Transitions of qualname's begins, keyed by 'on the main thread'."""
    main_tid = trace.named("process_info")[0].ctx["vtid"]
    out: Dict[bool, List[str]] = {True: [], False: []}
    for e in trace.named("function_begin"):
        if e.fields["qualname"] == qualname:
            out[e.ctx["vtid"] == main_tid].append(e.fields["transition"])
    return out


@pytest.mark.parametrize(
    ("cap", "rate"), [(1, 1), (2, 1), (3, 1), (100, 1), (-1, 2), (-1, 10), (4, 3)]
)
def test_generator_soup_is_exact_under_rate_control(tmp_path: Path, cap: int, rate: int) -> None:
    config = tmp_path / "rate.txt"
    config.write_text(
        f"[Lexgion(Python).default]\n    max_num_traces = {cap}\n    tracing_rate = {rate}\n"
    )
    run = Tracer(tmp_path).run(SOUP, env={"PINSIGHT_TRACE_CONFIG_FILE": str(config)})
    check_balanced(run.trace)
    counted = json.loads(run.stdout)
    per_thread: Dict[str, Dict[bool, int]] = {}
    for name, on_main, n in counted:
        per_thread.setdefault(name, {True: 0, False: 0})[on_main] += n
    assert "never_started" not in per_thread
    assert run.trace.functions()["never_started"] == 0
    for name, segments in SEGMENTS.items():
        seen = segments_by_thread(run.trace, name)
        for on_main in (True, False):
            # Counters are per thread; of the two workers only the last one
            # starts anything (five rounds), the other resumes.
            expected_starts = allowed(per_thread[name][on_main], cap, rate)
            assert seen[on_main].count("start") == expected_starts, (name, on_main, seen)
        if name != "exhausted":
            for on_main in (True, False):
                assert len(seen[on_main]) == segments * seen[on_main].count("start"), (
                    name,
                    on_main,
                    seen[on_main],
                )
    # The handed-over instances: every traced one is resumed on the worker.
    exhausted = segments_by_thread(run.trace, "exhausted")
    traced_main = exhausted[True].count("start")
    total = len(exhausted[True]) + len(exhausted[False])
    assert total == 3 * (traced_main + exhausted[False].count("start")), exhausted
    # Every traced instance has exactly one generator_end (its lifetime), with
    # all its segments, however it ended; untraced instances have none.
    for name, segments in SEGMENTS.items():
        seen = segments_by_thread(run.trace, name)
        ends = [e.fields for e in run.trace.named("generator_end") if e.fields["qualname"] == name]
        assert len(ends) == seen[True].count("start") + seen[False].count("start"), (name, ends)
        assert {e["segments"] for e in ends} <= {segments}, (name, ends)
        assert {e["how"] for e in ends} <= {ENDED[name]}, (name, ends)
        assert all(e["lifetime_ns"] > 0 for e in ends), (name, ends)


def test_capped_nested_generator_keeps_its_segments(tmp_path: Path) -> None:
    """Issue 22, point 2: once the cap is reached, instances of the same code
    resuming inside a traced one must not silence the traced one's resumes."""
    config = tmp_path / "cap.txt"
    config.write_text("[Lexgion(Python).default]\n    max_num_traces = 1\n")
    run = Tracer(tmp_path).run(
        """
        def nested(depth):
            yield depth
            if depth:
                for _ in nested(depth - 1):
                    pass
            yield -depth

        for _ in range(3):
            list(nested(4))
        """,
        env={"PINSIGHT_TRACE_CONFIG_FILE": str(config)},
    )
    check_balanced(run.trace)
    seen = [
        e.fields["transition"]
        for e in run.trace.named("function_begin")
        if e.fields["qualname"] == "nested"
    ]
    assert seen == ["start", "resume", "resume"]


# Issue 22, point 8: a generator's wall time, first start to final end, beside
# the time its segments ran. Each instance is timed inside the program around
# its whole life; its consumer sleeps between resumptions.
WALL = """
import asyncio
import json
import threading
import time

def ticks(n):
    for i in range(n):
        yield i

def consume(n, pause):
    t0 = time.perf_counter_ns()
    for _ in ticks(n):
        time.sleep(pause)
    return time.perf_counter_ns() - t0

async def waits(pause):
    await asyncio.sleep(pause)
    await asyncio.sleep(pause)

walls = {"ticks": [consume(4, 0.03), consume(2, 0.03)]}
t0 = time.perf_counter_ns()
asyncio.run(waits(0.04))
walls["waits"] = [time.perf_counter_ns() - t0]
# Started here, finished on another thread after a pause: timed from just before its
# first start to just after its final end, on the worker (the worker's exit and the
# join, which took over 5 ms on a loaded machine, are not the instance's life).
g = ticks(3)
ended = []
t0 = time.perf_counter_ns()
next(g)
worker = threading.Thread(
    target=lambda: (time.sleep(0.05), list(g), ended.append(time.perf_counter_ns())))
worker.start()
worker.join()
walls["handed_over"] = [ended[0] - t0]
print(json.dumps(walls))
"""


@pytest.mark.parametrize("payload", ["full", "compact", "batched"])
def test_generator_wall_time_is_first_start_to_final_end(tmp_path: Path, payload: str) -> None:
    run = Tracer(tmp_path).run(WALL, env={"PINSIGHT_PYTHON_PAYLOAD": payload})
    check_balanced(run.trace)
    measured = json.loads(run.stdout)
    report = json.loads(cli("report", "--json", "--top", "0", str(run.trace.path)))
    [proc] = report["processes"]
    rows = {row["qualname"]: row for row in proc["generators"]}
    ticks, waits = rows["ticks"], rows["waits"]
    # ticks: three instances; each consumer's time encloses its instance's life
    # and exceeds it only by the consumer's own last steps.
    assert ticks["instances_started"] == ticks["instances_finished"] == 3
    assert ticks["segments"] == 5 + 3 + 4
    inside = sum(measured["ticks"]) + measured["handed_over"][0]
    # 15 ms of slack for preemption in the few microseconds between a clock read and
    # the event beside it: under the shortest pause (30 ms), which a lost suspension adds.
    assert inside - 15_000_000 <= ticks["wall_ns"] <= inside, (ticks, measured)
    # Suspended through every pause its consumer slept (at least 4 + 2 of 30 ms, 50 ms
    # on the worker): none of them counts as running, however long it took.
    assert ticks["running_ns"] <= ticks["wall_ns"] - 230_000_000, ticks
    assert ticks["mean_wall_ns"] == ticks["wall_ns"] // 3
    # The coroutine lives for both sleeps, and runs for almost none of it.
    assert waits["instances_finished"] == 1
    assert 80_000_000 <= waits["wall_ns"] <= measured["waits"][0], (waits, measured)
    # Suspended through both sleeps (at least 40 ms each), which a suspension counted
    # as running would add whole.
    assert waits["running_ns"] <= waits["wall_ns"] - 80_000_000, waits
    # The function rows carry the same, and other functions none.
    functions = {row["qualname"]: row for row in proc["functions"]}
    assert functions["ticks"]["wall_ns"] == ticks["wall_ns"]
    assert functions["consume"]["wall_ns"] is None
    text = cli("report", str(run.trace.path))
    assert "Generators and coroutines, first start to final end" in text
    svg = tmp_path / "flame.svg"
    cli("flamegraph", str(run.trace.path), "--min-width", "0", "-o", str(svg))
    assert "generator: 3 instances finished, wall (first start to final end)" in svg.read_text()
