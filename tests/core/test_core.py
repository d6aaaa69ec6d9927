"""The core tracer against ground truth: real LTTng sessions, traces read with babeltrace2."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pinsight_python.recording import lttng
from tests.tracing import DEFAULT_BACKEND, SETPROFILE, Tracer, check_balanced, untraced


def begins(run, names):
    counts = run.trace.functions("function_begin")
    return {n: counts.get(n, 0) for n in names}


def test_plain_calls_methods_closures_lambdas_decorators(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import functools

        def plain(x):
            return x + 1

        class K:
            def method(self, x):
                return plain(x)

            @staticmethod
            def static(x):
                return x

            @classmethod
            def cls(cls, x):
                return x

        def make_closure(k):
            def closure(x):
                return x * k
            return closure

        def deco(fn):
            @functools.wraps(fn)
            def wrapper(*a):
                return fn(*a)
            return wrapper

        @deco
        def decorated(x):
            return x

        square = lambda x: x * x
        k = K()
        c = make_closure(3)
        total = 0
        for i in range(10):
            total += plain(i) + k.method(i) + K.static(i) + K.cls(i)
            total += c(i) + decorated(i) + square(i)
        print(total)
        """
    )
    assert run.stdout.strip() == str(sum(
        (i + 1) + (i + 1) + i + i + 3 * i + i + i * i for i in range(10)
    ))
    counts = begins(run, ["plain", "K.method", "K.static", "K.cls", "make_closure",
                          "make_closure.<locals>.closure", "deco.<locals>.wrapper",
                          "decorated", "<lambda>", "deco"])
    assert counts == {
        "plain": 20, "K.method": 10, "K.static": 10, "K.cls": 10, "make_closure": 1,
        "make_closure.<locals>.closure": 10, "deco.<locals>.wrapper": 10, "decorated": 10,
        "<lambda>": 10, "deco": 1,
    }
    ends = run.trace.functions("function_end")
    assert ends["plain"] == 20
    check_balanced(run.trace)
    # The program's own first function (its `import functools` may run the import
    # machinery first: pinsight_python's start no longer imports functools for it).
    first = next(e for e in run.trace.named("function_begin") if e.fields["qualname"] == "plain")
    # The file is named once per code object, by the code_info written before
    # the code object's first event; the event keeps its qualname and line.
    assert "filename" not in first.fields
    [named] = [e for e in run.trace.events[:run.trace.events.index(first)]
               if e.short == "code_info" and e.fields["code_id"] == first.fields["code_id"]]
    assert named.fields["qualname"] == first.fields["qualname"]
    assert named.fields["lineno"] == first.fields["lineno"]
    assert named.fields["filename"].endswith(".py") and first.file == named.fields["filename"]
    assert first.fields["transition"] == "start"
    assert first.fields["python_thread_id"] == 0
    assert first.fields["lineno"] > 0


def test_deep_recursion(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import sys
        sys.setrecursionlimit(10000)
        def down(n):
            return 0 if n == 0 else 1 + down(n - 1)
        print(down(2500))
        """
    )
    assert run.stdout.strip() == "2500"
    assert run.trace.functions()["down"] == 2501
    assert run.trace.functions("function_end")["down"] == 2501
    check_balanced(run.trace)


def test_thousands_of_functions_created_at_run_time(tracer: Tracer) -> None:
    run = tracer.run(
        """
        fns = []
        for i in range(5000):
            ns = {}
            exec(f"def gen_{i}(x):\\n    return x + {i}", ns)
            fns.append(ns[f"gen_{i}"])
        print(sum(f(1) for f in fns))
        del fns
        """
    )
    assert run.stdout.strip() == str(sum(1 + i for i in range(5000)))
    counts = run.trace.functions()
    assert all(counts[f"gen_{i}"] == 1 for i in range(5000))
    assert sum(counts[f"gen_{i}"] for i in range(5000)) == 5000
    check_balanced(run.trace)


def test_exceptions_at_several_depths(tracer: Tracer) -> None:
    run = tracer.run(
        """
        def level3(n):
            if n % 2:
                raise KeyError(n)
            return n

        def level2(n):
            return level3(n)

        def level1(n):
            try:
                return level2(n)
            except KeyError:
                return -1

        print([level1(i) for i in range(6)])
        try:
            level2(1)
        except KeyError as e:
            print("caught", e)
        """
    )
    assert run.stdout.splitlines() == ["[0, -1, 2, -1, 4, -1]", "caught 1"]
    ends = collections.Counter(
        (e.fields["qualname"], e.fields["transition"]) for e in run.trace.named("function_end")
    )
    assert ends[("level3", "unwind")] == 4
    assert ends[("level3", "return")] == 3
    assert ends[("level2", "unwind")] == 4
    assert ends[("level2", "return")] == 3
    assert ends[("level1", "return")] == 6
    check_balanced(run.trace)


def test_generators(tracer: Tracer) -> None:
    run = tracer.run(
        """
        def counter(n):
            for i in range(n):
                yield i

        def echo():
            received = []
            try:
                while True:
                    received.append((yield len(received)))
            except ValueError:
                yield "thrown"
            finally:
                pass

        print(sum(counter(5)))              # exhausted
        g = counter(100)
        print(next(g), next(g)); g.close()  # closed early
        e = echo()
        next(e); print(e.send("a"), e.send("b"))
        print(e.throw(ValueError))          # throw(), caught inside
        e.close()
        """
    )
    assert run.stdout.splitlines() == ["10", "0 1", "1 2", "thrown"]
    frames = [e for e in run.trace.events if e.short.startswith("function_")
              and e.fields["qualname"] in ("counter", "echo")]
    by = collections.Counter(
        (e.short, e.fields["qualname"], e.fields["transition"]) for e in frames
    )
    # counter(5): start + 5 resumes; 5 yields + 1 return. counter(100): start + 1 resume,
    # 2 yields; on 3.12 and 3.13 its close() runs no code (nothing to clean up), so no
    # more events; before and since (3.14: sys.monitoring sees PY_THROW and PY_UNWIND
    # with any tool), close() throws GeneratorExit into the frame (throw + unwind).
    closed_by_throw = 0 if (3, 12) <= sys.version_info < (3, 14) else 1
    assert by[("function_begin", "counter", "start")] == 2
    assert by[("function_begin", "counter", "resume")] == 6
    assert by[("function_begin", "counter", "throw")] == closed_by_throw
    assert by[("function_end", "counter", "yield")] == 7
    assert by[("function_end", "counter", "return")] == 1
    assert by[("function_end", "counter", "unwind")] == closed_by_throw
    # echo: start, 2 resumes by send, throw (caught, yields "thrown"), close (throw + unwind)
    assert by[("function_begin", "echo", "start")] == 1
    assert by[("function_begin", "echo", "resume")] == 2
    assert by[("function_begin", "echo", "throw")] == 2
    assert by[("function_end", "echo", "yield")] == 4
    assert by[("function_end", "echo", "unwind")] == 1
    check_balanced(run.trace)


def test_asyncio(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import asyncio

        async def leaf(i):
            await asyncio.sleep(0)
            return i

        async def branch(i):
            return await leaf(i) + await leaf(i)

        async def main():
            return sum(await asyncio.gather(*(branch(i) for i in range(5))))

        print(asyncio.run(main()))
        """
    )
    assert run.stdout.strip() == "20"
    starts = collections.Counter(
        e.fields["qualname"] for e in run.trace.named("function_begin")
        if e.fields["transition"] == "start"
    )
    assert starts["leaf"] == 10
    assert starts["branch"] == 5
    assert starts["main"] == 1
    check_balanced(run.trace)


def test_thread_pool(tracer: Tracer) -> None:
    run = tracer.run(
        """
        from concurrent.futures import ThreadPoolExecutor
        import threading

        def work(i):
            return sum(inner(j) for j in range(10))

        def inner(j):
            return j

        with ThreadPoolExecutor(max_workers=4) as pool:
            print(sum(pool.map(work, range(40))))
        """
    )
    assert run.stdout.strip() == str(40 * 45)
    assert run.trace.functions()["work"] == 40
    assert run.trace.functions()["inner"] == 400
    check_balanced(run.trace)
    work_threads = {e.ctx["vtid"] for e in run.trace.named("function_begin")
                    if e.fields["qualname"] == "work"}
    assert 1 <= len(work_threads) <= 4
    ids = {e.ctx["vtid"]: e.fields["python_thread_id"] for e in run.trace.named("function_begin")}
    main_tid = run.trace.named("process_info")[0].ctx["vtid"]
    assert ids.get(main_tid, 0) == 0
    assert sorted(set(ids.values())) == list(range(len(set(ids.values()))))
    starts = run.trace.named("thread_start")
    assert [e.fields["python_thread_id"] for e in starts] == list(range(len(starts)))


def test_native_calls_named_and_raising(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import math
        def caller():
            out = []
            out.append(math.sqrt(16.0))
            out.append(len(out))
            try:
                int("not a number")
            except ValueError:
                out.append("raised")
            d = dict(a=1)
            return out, sorted(d)
        print(caller())
        """
    )
    assert run.stdout.strip() == "([4.0, 1, 'raised'], ['a'])"
    calls = [e for e in run.trace.named("c_call_begin") if e.fields["caller_qualname"] == "caller"]
    names = [e.fields["callee_name"] for e in calls]
    # CALL fires once the arguments are evaluated: the inner call first.
    if SETPROFILE:  # calls to types (int, dict) are not reported by the profile hook
        assert names == ["math.sqrt", "list.append", "len", "list.append", "list.append",
                         "sorted"]
    else:
        assert names == ["math.sqrt", "list.append", "len", "list.append", "int",
                         "list.append", "dict", "sorted"]
    ends = [e for e in run.trace.named("c_call_end") if e.fields["caller_qualname"] == "caller"]
    outcome = {e.fields["callee_name"]: e.fields["transition"] for e in ends}
    assert outcome.get("int") == (None if SETPROFILE else "raise")
    assert outcome["math.sqrt"] == "return"
    assert all("<unknown>" not in n for n in names)
    sqrt = next(e for e in calls if e.fields["callee_name"] == "math.sqrt")
    assert sqrt.fields["caller_lineno"] == 7  # line 5 of the body, after the 2-line prologue
    check_balanced(run.trace)


def test_nameless_callable_instances_named_by_their_type(tracer: Tracer) -> None:
    """Callable objects with no name of their own (operator.itemgetter, many C
    extensions' objects) are named by their type, from a per-type cache: each call
    used to look up __qualname__ and __name__ and fail twice."""
    run = tracer.run(
        """
        import operator
        first = operator.itemgetter(0)
        def caller():
            out = []
            for i in range(3):
                out.append(first((i, 0)))
            out.append(operator.attrgetter("real")(5))
            return out
        print(caller())
        """
    )
    assert run.stdout.strip() == "[0, 1, 2, 5]"
    names = [e.fields["callee_name"] for e in run.trace.named("c_call_begin")
             if e.fields["caller_qualname"] == "caller"]
    if not SETPROFILE:  # the profile hook reports builtin functions only
        assert names.count("operator.itemgetter") == 3, names
        assert names.count("operator.attrgetter") == 2, names  # the type, then its instance
    check_balanced(run.trace)


def test_numpy_callee_names(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import numpy as np
        def compute():
            a = np.ones(4)
            return float(np.dot(a, a)) + float(np.add(a, a).sum())
        print(compute())
        """
    )
    assert run.stdout.strip() == "12.0"
    names = [e.fields["callee_name"] for e in run.trace.named("c_call_begin")
             if e.fields["caller_qualname"] == "compute"]
    # The profile hook does not report ufuncs and array-function dispatchers.
    assert ("numpy.dot" in names) is not SETPROFILE
    assert ("numpy.add" in names) is not SETPROFILE
    assert "numpy.ndarray.sum" in names
    check_balanced(run.trace)


def test_output_exceptions_and_exit_code_unchanged(tracer: Tracer, tmp_path: Path) -> None:
    program = """
        import sys
        def fail(n):
            if n == 0:
                raise RuntimeError("boom")
            return fail(n - 1)
        print("before")
        sys.stdout.flush()
        fail(3)
        """
    plain = untraced(program, tmp_path)
    run = tracer.run(program, check=False)
    assert run.returncode == plain.returncode == 1
    assert run.stdout == plain.stdout == "before\n"
    assert run.stderr.replace(str(tmp_path / "prog1.py"), "X").splitlines()[-1] == \
        "RuntimeError: boom"
    assert "RuntimeError: boom" in plain.stderr
    exit_run = tracer.run("import sys\nprint('x')\nsys.exit(7)\n", check=False)
    assert exit_run.returncode == 7 and exit_run.stdout == "x\n"


def test_contexts_and_event_selection(tracer: Tracer) -> None:
    code = """
        import math
        def f():
            return math.floor(2.5)
        for _ in range(3):
            f()
        """
    run = tracer.run(code)
    ev = run.trace.named("function_begin")[0]
    # The contexts the analyses need, no more (each is paid on every event);
    # the process name is in process_info.
    assert set(ev.ctx) == {"vpid", "vtid"}
    (info,) = run.trace.named("process_info")
    assert info.fields["procname"].startswith("python")
    only = tracer.run(code, events=[f"{lttng.PROVIDER}:function_*"])
    assert {e.short for e in only.trace.events} == {"function_begin", "function_end"}
    assert only.trace.functions()["f"] == 3


def test_activate_events_argument(tracer: Tracer) -> None:
    code = """
        import math
        def f():
            return math.floor(2.5)
        f()
        """
    only_c = tracer.run(code, activate="pinsight_python.activate(events=['c_call'])")
    shorts = {e.short for e in only_c.trace.events}
    assert "c_call_begin" in shorts and "function_begin" not in shorts
    only_f = tracer.run(code, activate="pinsight_python.activate(events=('function',))")
    shorts = {e.short for e in only_f.trace.events}
    assert "function_begin" in shorts and "c_call_begin" not in shorts


def test_activate_deactivate_idempotent_and_status(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import json
        pinsight_python.activate()
        def f():
            return 1
        f()
        s = pinsight_python.status()
        pinsight_python.deactivate()
        pinsight_python.deactivate()
        f()
        print(json.dumps(s))
        print(pinsight_python.status()["active"])
        """
    )
    import json

    lines = run.stdout.splitlines()
    status = json.loads(lines[0])
    assert status["active"] is True
    assert status["backend"] == DEFAULT_BACKEND
    assert status["mode"] == "TRACING"
    assert status["tool_id"] == (-1 if SETPROFILE else 4)
    assert status["events"] == ["function", "c_call"]
    assert status["events_emitted"] >= 2
    assert status["code_objects_seen"] >= 1
    assert lines[1] == "False"
    assert run.trace.functions()["f"] == 1


@pytest.mark.skipif(SETPROFILE, reason="sys.monitoring tool ids exist from CPython 3.12")
def test_tool_ids_of_others_are_respected(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import sys
        import pinsight_python
        mon = sys.monitoring
        mon.use_tool_id(4, "someone-else")
        pinsight_python.activate()
        print(pinsight_python.status()["tool_id"], mon.get_tool(4))
        pinsight_python.deactivate()
        for i in range(6):
            if mon.get_tool(i) is None:
                mon.use_tool_id(i, f"other{i}")
        try:
            pinsight_python.activate()
        except pinsight_python.ActivationError as e:
            print("error:", e)
        """,
        activate=None,
    )
    first, second = run.stdout.splitlines()
    assert first == "3 someone-else"
    assert second.startswith("error: no free sys.monitoring tool id")


def test_cprofile_alongside(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import cProfile, pstats, io
        def g(n):
            return n * 2
        prof = cProfile.Profile()
        prof.enable()
        total = sum(g(i) for i in range(50))
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).print_stats("g")
        print(total, "50    " in out.getvalue() or " 50 " in out.getvalue())
        """
    )
    assert run.stdout.strip() == "2450 True"
    # A thread has one profile function: cProfile's replaces ours, for good
    # (the call that enabled it never gets its end).
    assert run.trace.functions()["g"] == (0 if SETPROFILE else 50)
    check_balanced(run.trace, allow_open=SETPROFILE)


def test_runs_untouched_without_lttng_ust(tmp_path: Path) -> None:
    # Hide liblttng-ust for real in a private mount namespace: the one this interpreter
    # loads (the machine's, or another LTTng's on LD_LIBRARY_PATH).
    lib = subprocess.run(
        [sys.executable, "-c", "import ctypes; ctypes.CDLL('liblttng-ust.so.1'); print(next("
         "ln.split()[-1] for ln in open('/proc/self/maps') if '/liblttng-ust.so' in ln))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert lib, "liblttng-ust.so.1 not found"
    script = tmp_path / "p.py"
    script.write_text(textwrap.dedent(
        """
        import pinsight_python
        pinsight_python.activate()
        def f(x):
            return x * 2
        print(f(21), pinsight_python.status()["lttng_available"])
        """
    ))
    proc = subprocess.run(
        ["unshare", "--mount", "sh", "-c",
         f"mount --bind /dev/null {lib} && exec {sys.executable} {script}"],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42 False"
    assert "LTTng-UST is unavailable" in proc.stderr
    assert proc.stderr.count("LTTng-UST is unavailable") == 1
