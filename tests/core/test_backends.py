"""Both backends give the same events with the same meaning (issue 6).

This file is also the smoke test run on the oldest supported CPython (3.8):
it needs nothing beyond the package, pytest and LTTng.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Tuple

import pytest

from tests.tracing import DEFAULT_BACKEND, SETPROFILE, Run, Tracer, check_balanced

BACKENDS = ["setprofile"] if SETPROFILE else ["sys.monitoring", "setprofile"]

# Only builtin functions and methods are called from the program's own
# functions: CPython's profile hook reports no other native callables.
PROGRAM = """
import math, threading

class Model:
    def __init__(self, scale):
        self.scale = scale

    def step(self, x):
        return math.sqrt(x) * self.scale

def counter(n):
    i = 0
    while i < n:
        yield i
        i += 1

def delegate():
    yield from counter(2)

BOOM = ValueError("boom")  # raising a class would call it: a native call only one backend sees

def raises():
    raise BOOM

def outer():
    def inner():
        raises()
    try:
        inner()
    except ValueError:
        return math.floor(2.5)

def work():
    total = sum(delegate())
    g = counter(3)
    next(g)
    try:
        g.throw(KeyError)
    except KeyError:
        pass
    return Model(2.0).step(4.0) + outer() + total

print(work())
t = threading.Thread(target=work)
t.start()
t.join()
"""

Step = Tuple[str, str, str]


def work_steps() -> List[Step]:
    fb, fe, cb, ce = "function_begin", "function_end", "c_call_begin", "c_call_end"
    return [
        (fb, "work", "start"),
        (cb, "sum", "call"),
        (fb, "delegate", "start"),
        (fb, "counter", "start"),
        (fe, "counter", "yield"),
        (fe, "delegate", "yield"),
        (fb, "delegate", "resume"),
        (fb, "counter", "resume"),
        (fe, "counter", "yield"),
        (fe, "delegate", "yield"),
        (fb, "delegate", "resume"),
        (fb, "counter", "resume"),
        (fe, "counter", "return"),
        (fe, "delegate", "return"),
        (ce, "sum", "return"),
        (cb, "next", "call"),
        (fb, "counter", "start"),
        (fe, "counter", "yield"),
        (ce, "next", "return"),
        (cb, "generator.throw", "call"),
        (fb, "counter", "throw"),
        (fe, "counter", "unwind"),
        (ce, "generator.throw", "raise"),
        (fb, "Model.__init__", "start"),
        (fe, "Model.__init__", "return"),
        (fb, "Model.step", "start"),
        (cb, "math.sqrt", "call"),
        (ce, "math.sqrt", "return"),
        (fe, "Model.step", "return"),
        (fb, "outer", "start"),
        (fb, "outer.<locals>.inner", "start"),
        (fb, "raises", "start"),
        (fe, "raises", "unwind"),
        (fe, "outer.<locals>.inner", "unwind"),
        (cb, "math.floor", "call"),
        (ce, "math.floor", "return"),
        (fe, "outer", "return"),
        (fe, "work", "return"),
    ]


def program_steps(run: Run, script_name: str) -> dict[int, List[Step]]:
    """Per python_thread_id, the events of the program's own code."""
    out: dict[int, List[Step]] = {}
    for e in run.trace.events:
        f = e.fields
        if e.short.startswith("function_"):
            if not (e.file or "").endswith(script_name):
                continue
            name = f["qualname"]
        elif e.short.startswith("c_call_"):
            if not (e.file or "").endswith(script_name):
                continue
            name = f["callee_name"]
        else:
            continue
        out.setdefault(f["python_thread_id"], []).append((e.short, name, f["transition"]))
    return out


def run_program(tracer: Tracer, backend: Optional[str]) -> Run:
    activate = "pinsight_python.activate()"
    if backend:
        activate = f"pinsight_python.activate(backend={backend!r})"
    run = tracer.run(PROGRAM, activate=activate)
    assert run.stdout == "7.0\n"
    assert run.stderr == ""
    check_balanced(run.trace)
    assert run.trace.discarded == 0
    return run


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_events_on_every_backend(tracer: Tracer, backend: str) -> None:
    run = run_program(tracer, backend)
    (info,) = run.trace.named("process_info")
    assert info.fields["backend"] == backend
    steps = program_steps(run, f"prog{tracer.counter}.py")
    # Module-level set-up (class bodies, __build_class__) comes first.
    main = steps[0][steps[0].index(("function_begin", "work", "start")) :]
    assert main == [
        *work_steps(),
        ("c_call_begin", "print", "call"),
        ("c_call_end", "print", "return"),
    ]
    assert steps[1] == work_steps()
    assert sorted(steps) == [0, 1]


def test_auto_backend_follows_the_interpreter(tracer: Tracer) -> None:
    run = tracer.run(
        "import pinsight_python as p\nprint(p.status()['backend'])",
    )
    assert run.stdout == f"{DEFAULT_BACKEND}\n"
    (info,) = run.trace.named("process_info")
    assert info.fields["backend"] == DEFAULT_BACKEND
    assert info.fields["python_version"] == "{}.{}.{}".format(*sys.version_info[:3])


THREADS_PROGRAM = """
import threading, pinsight_python

def before():
    return 1

def during():
    return 2

def after():
    return 3

go, done, stop = threading.Event(), threading.Event(), threading.Event()

def worker():
    before()
    go.wait()
    during()
    done.set()
    stop.wait()
    after()

t = threading.Thread(target=worker)
t.start()
pinsight_python.activate(backend={backend!r})
late = threading.Thread(target=during)
late.start()
late.join()
go.set()
done.wait()
pinsight_python.deactivate()
stop.set()
t.join()
after()
print(pinsight_python.status()["active"])
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_running_before_activate_and_started_after(tracer: Tracer, backend: str) -> None:
    run = tracer.run(THREADS_PROGRAM.format(backend=backend), activate=None)
    assert run.stdout == "False\n"
    begins = [
        (e.fields["qualname"], e.fields["python_thread_id"])
        for e in run.trace.named("function_begin")
        if e.fields["qualname"] in ("before", "during", "after")
    ]
    # The running thread's call after activate() is traced, the new thread's
    # too; nothing after deactivate() on any thread.
    assert [name for name, _ in begins] == ["during", "during"]
    assert sorted(tid for _, tid in begins) == [1, 2]
    check_balanced(run.trace, allow_open=True)


def test_setprofile_refuses_to_replace_another_profiler(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import sys
        sys.setprofile(lambda frame, event, arg: None)
        try:
            pinsight_python.activate(backend="setprofile")
        except pinsight_python.ActivationError as e:
            message = str(e)
        sys.setprofile(None)
        print(message)
        pinsight_python.activate(backend="setprofile")
        print(pinsight_python.status()["backend"])
        """,
        activate=None,
    )
    assert run.stdout.splitlines() == [
        "another profiler (sys.setprofile) is active on this thread; stop it first, or use "
        "backend='sys.monitoring' on CPython 3.12+",
        "setprofile",
    ]
