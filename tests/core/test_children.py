"""Child processes: multiprocessing (fork, spawn, forkserver), bare os.fork(),
subprocess and os.exec*.

Each program prints the pids it made; a trace may also hold other traced processes
of this user that ran meanwhile, so every check selects the program's own vpids.
Per process, the trace must hold exactly the calls the program made, and every
thread's begins and ends must nest and close.
"""

from __future__ import annotations

import collections
import json
import signal
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Tuple

import pytest

from tests.tracing import Trace, Tracer, untraced

ON = {"PINSIGHT_TRACE_PYTHON": "TRACING"}
EXIT_CALL = "posix._exit"
# A hang fails with every thread's stack on stderr, not with a blind timeout. An
# alarm, not faulthandler.dump_traceback_later: its watchdog thread deadlocks a
# forked child at exit, and would count as a thread of the program's own.
WATCHDOG = """import faulthandler, signal
faulthandler.register(signal.SIGALRM, all_threads=True, chain=True)
signal.alarm(150)
"""


def own(trace: Trace, vpids: Iterable[int]) -> Trace:
    keep = set(vpids)
    return Trace(trace.path, [e for e in trace.events if e.ctx["vpid"] in keep], trace.discarded)


def calls_per_process(trace: Trace, qualname: str, kind: str) -> Dict[int, int]:
    out: Dict[int, int] = collections.Counter()
    for e in trace.named(kind):
        if e.fields["qualname"] == qualname:
            out[e.ctx["vpid"]] += 1
    return dict(out)


Frame = Tuple[str, str]


def open_frames(trace: Trace, vpid: int) -> Dict[int, List[Frame]]:
    """Per thread of vpid: the frames still open at its last event, after checking
    that every end closes the innermost open begin."""
    out: Dict[int, List[Frame]] = {}
    for (pid, tid), events in trace.by_thread().items():
        if pid != vpid:
            continue
        stack: List[Frame] = []
        for e in events:
            kind, _, edge = e.short.rpartition("_")
            if kind not in ("function", "c_call") or edge not in ("begin", "end"):
                continue
            name = e.fields["qualname"] if kind == "function" else e.fields["callee_name"]
            if edge == "begin":
                stack.append((kind, name))
            else:
                assert stack and stack[-1] == (kind, name), (
                    f"process {pid} thread {tid}: {e.short} {name} closes {stack[-1:]}"
                )
                stack.pop()
        out[tid] = stack
    assert out, f"no events from process {vpid}"
    return out


def assert_process_balanced(trace: Trace, vpid: int, main_left_open: Sequence[Frame] = ()) -> None:
    """Every thread of vpid closed what it opened; its main thread may leave
    main_left_open: a process ending in os._exit() or exec never returns from
    the frames that made that call."""
    stacks = open_frames(trace, vpid)
    expected = {tid: (list(main_left_open) if tid == vpid else []) for tid in stacks}
    assert stacks == expected


EXITED = [("c_call", EXIT_CALL)]


# ---------------------------------------------------------------------------- multiprocessing

POOL_PROGRAM = WATCHDOG + """
import json, multiprocessing as mp, os, sys

def work(x):
    return os.getpid(), x * x

def main(method):
    ctx = mp.get_context(method)
    pool = ctx.Pool(3)
    results = pool.map(work, range(24), chunksize=1)
    # close + join: the workers finish their loop and exit on their own.
    pool.close()
    pool.join()
    print(json.dumps({"parent": os.getpid(), "results": results}))

if __name__ == "__main__":
    main(sys.argv[1])
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_pool_workers_are_traced(tracer: Tracer, method: str) -> None:
    run = tracer.run(POOL_PROGRAM, activate=None, env=ON, args=[method])
    out = json.loads(run.stdout)
    parent = out["parent"]
    results = out["results"]
    assert [r[1] for r in results] == [x * x for x in range(24)]
    per_worker = collections.Counter(pid for pid, _ in results)
    assert parent not in per_worker
    workers = set(per_worker)

    trace = own(run.trace, workers | {parent})
    assert trace.discarded == 0
    # Exactly one begin and one end per call, under the worker's own vpid.
    assert calls_per_process(trace, "work", "function_begin") == dict(per_worker)
    assert calls_per_process(trace, "work", "function_end") == dict(per_worker)
    # The parent's trace is undisturbed: complete, balanced, no worker events.
    assert_process_balanced(trace, parent)
    assert len([e for e in trace.named("process_info") if e.ctx["vpid"] == parent]) == 1
    for pid in workers:
        # fork and forkserver children end in os._exit; spawn children return.
        assert_process_balanced(trace, pid, EXITED if method != "spawn" else ())


FORK_ONLY_ACTIVATED_IN_CODE = WATCHDOG + """
import json, multiprocessing as mp, os

def work(x):
    return os.getpid()

if __name__ == "__main__":
    # close + join, not the context manager: terminate() has hang races of its own.
    pool = mp.get_context("fork").Pool(2)
    pids = pool.map(work, range(10), chunksize=1)
    pool.close()
    pool.join()
    print(json.dumps({"parent": os.getpid(), "pids": pids}))
"""


def test_fork_children_of_activate_call_are_traced(tracer: Tracer) -> None:
    # No environment: only pinsight_python.activate() in the program.
    run = tracer.run(FORK_ONLY_ACTIVATED_IN_CODE)
    out = json.loads(run.stdout)
    per_worker = collections.Counter(out["pids"])
    trace = own(run.trace, {*per_worker, out["parent"]})
    assert calls_per_process(trace, "work", "function_begin") == dict(per_worker)
    assert calls_per_process(trace, "work", "function_end") == dict(per_worker)
    assert_process_balanced(trace, out["parent"])


# ---------------------------------------------------------------------------- os.fork

BARE_FORK_PROGRAM = WATCHDOG + """
import json, os, sys

def work(n):
    return n + 1

def child(calls, how):
    for i in range(calls):
        work(i)
    if how == "os._exit":
        os._exit(0)
    sys.exit(0)  # unwinds frames the parent entered: their ends must not show here

def spawn_children():
    pids = {}
    for calls, how in ((3, "os._exit"), (5, "sys.exit"), (7, "os._exit")):
        pid = os.fork()
        if pid == 0:
            child(calls, how)
        pids[pid] = [calls, how]
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
    return pids

def main():
    pids = spawn_children()
    for i in range(2):
        work(i)
    print(json.dumps({"parent": os.getpid(), "children": pids}))

main()
"""


def test_bare_fork_children_have_their_own_balanced_trace(tracer: Tracer) -> None:
    run = tracer.run(BARE_FORK_PROGRAM)
    out = json.loads(run.stdout)
    parent = out["parent"]
    children = {int(pid): (calls, how) for pid, (calls, how) in out["children"].items()}
    trace = own(run.trace, {parent, *children})
    expected = {pid: calls for pid, (calls, _) in children.items()}
    expected[parent] = 2
    assert calls_per_process(trace, "work", "function_begin") == expected
    assert calls_per_process(trace, "work", "function_end") == expected
    assert calls_per_process(trace, "child", "function_begin") == dict.fromkeys(children, 1)
    # The parent's frames (main, spawn_children) and its os.fork call end in the
    # parent only.
    assert calls_per_process(trace, "spawn_children", "function_end") == {parent: 1}
    fork_ends = collections.Counter(
        e.ctx["vpid"] for e in trace.named("c_call_end") if e.fields["callee_name"] == "posix.fork"
    )
    assert fork_ends == {parent: 3}
    assert_process_balanced(trace, parent)
    for pid, (_, how) in children.items():
        # os._exit() is called from child(), which never returns.
        left = [("function", "child"), *EXITED] if how == "os._exit" else []
        assert_process_balanced(trace, pid, left)


@pytest.mark.parametrize("payload", ["full", "batched"])
def test_fork_in_main_prints_nothing_more_than_untraced(
    tracer: Tracer, tmp_path: Path, payload: str
) -> None:
    # CPython 3.12+ warns when os.fork() runs with other threads; LTTng-UST's and
    # our own threads (the control thread; batched, the block writer, named as the
    # process) must not make a traced program print that warning.
    code = """
import os
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print("done")
"""
    plain = untraced(code, tmp_path)
    run = tracer.run(code, activate=None, env={**ON, "PINSIGHT_PYTHON_PAYLOAD": payload})
    assert run.stderr == plain.stderr
    assert (run.returncode, run.stdout) == (plain.returncode, plain.stdout)


# ---------------------------------------------------------------------------- killed children

KILLED_PROGRAM = WATCHDOG + """
import json, os, signal, sys, time

def spin(n):
    return n

def marker(n):
    return n

def main(children):
    ended_by = {}
    for k in range(children):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            for i in range(200):
                spin(i)
            os.write(w, b"x")
            while True:  # tracing as fast as it can when the signal comes
                spin(0)
        os.close(w)
        os.read(r, 1)
        os.close(r)
        time.sleep(0.0005 * (k % 4))
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        ended_by[pid] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1
    for i in range(50):
        marker(i)
    print(json.dumps({"parent": os.getpid(), "ended_by": ended_by,
                      "default": signal.getsignal(signal.SIGTERM) is signal.SIG_DFL}))

main(int(sys.argv[1]))
"""


def test_children_killed_while_tracing_lose_nothing(tracer: Tracer) -> None:
    # The buffers are shared by every process of the user: a child killed half-way
    # through an event would leave its sub-buffer incomplete, and every later
    # event on that CPU, the parent's markers included, would be lost. SIGTERM
    # waits for the event (multiprocessing's terminate() sends it).
    children = 12
    run = tracer.run(KILLED_PROGRAM, args=[str(children)])
    out = json.loads(run.stdout)
    parent = out["parent"]
    ended_by = {int(pid): signo for pid, signo in out["ended_by"].items()}
    # Ended by the signal, as untraced; Python sees the default action it left.
    assert ended_by == dict.fromkeys(ended_by, signal.SIGTERM)
    assert out["default"] is True
    trace = own(run.trace, {parent, *ended_by})
    assert trace.discarded == 0
    assert calls_per_process(trace, "marker", "function_begin") == {parent: 50}
    assert calls_per_process(trace, "marker", "function_end") == {parent: 50}
    assert_process_balanced(trace, parent)
    # Every child's calls before it said it was ready, and its own ones after.
    spins = calls_per_process(trace, "spin", "function_begin")
    short = {pid: spins.get(pid, 0) for pid in ended_by if spins.get(pid, 0) < 200}
    assert not short, f"children with fewer than their 200 calls: {short}"


# ---------------------------------------------------------------------------- subprocess, exec

CHILD_SCRIPT = """
import json, os, sys

def leaf(n):
    return n * 2

for i in range(int(sys.argv[1])):
    leaf(i)
print(json.dumps({"child": os.getpid()}))
"""

SUBPROCESS_PROGRAM = """
import json, os, subprocess, sys

def run_children(script):
    outs = []
    for n in (4, 6):
        outs.append(json.loads(subprocess.run(
            [sys.executable, script, str(n)], capture_output=True, text=True, check=True
        ).stdout))
    # Not Python: runs as without tracing.
    echo = subprocess.run(["echo", "plain"], capture_output=True, text=True, check=True).stdout
    return outs, echo

outs, echo = run_children(sys.argv[1])
print(json.dumps({"parent": os.getpid(), "children": [o["child"] for o in outs], "echo": echo}))
"""


def _write_child(tmp_path: Path) -> Path:
    path = tmp_path / "child.py"
    path.write_text(CHILD_SCRIPT)
    return path


def test_subprocess_python_children_inherit_tracing(tracer: Tracer, tmp_path: Path) -> None:
    child = _write_child(tmp_path)
    # python -m pinsight_python exports the settings to the environment.
    run = tracer.run(
        SUBPROCESS_PROGRAM,
        activate=None,
        argv_prefix=["-m", "pinsight_python", "--events", "function"],
        args=[str(child)],
    )
    out = json.loads(run.stdout)
    assert out["echo"] == "plain\n"
    first, second = out["children"]
    trace = own(run.trace, {out["parent"], first, second})
    assert calls_per_process(trace, "leaf", "function_begin") == {first: 4, second: 6}
    assert calls_per_process(trace, "leaf", "function_end") == {first: 4, second: 6}
    # --events function reached the children too.
    assert not trace.named("c_call_begin")
    for pid in (out["parent"], first, second):
        assert_process_balanced(trace, pid)
    infos = {e.ctx["vpid"]: e.fields["argv"] for e in trace.named("process_info")}
    assert set(infos) == {out["parent"], first, second}


EXEC_PROGRAM = """
import os, sys

def before_exec(n):
    return n

print(os.getpid(), flush=True)
for i in range(3):
    before_exec(i)
os.execv(sys.executable, [sys.executable, sys.argv[1], "5"])
"""


def test_exec_into_python_keeps_tracing(tracer: Tracer, tmp_path: Path) -> None:
    child = _write_child(tmp_path)
    run = tracer.run(EXEC_PROGRAM, activate=None, env=ON, args=[str(child)])
    first_line, second_line = run.stdout.splitlines()
    pid = int(first_line)
    assert json.loads(second_line) == {"child": pid}  # same process, new image
    trace = own(run.trace, {pid})
    assert calls_per_process(trace, "before_exec", "function_begin") == {pid: 3}
    assert calls_per_process(trace, "leaf", "function_begin") == {pid: 5}
    assert calls_per_process(trace, "leaf", "function_end") == {pid: 5}
    # Each image activated once. The old image never returns from its module
    # code nor from the exec call; the new one closes everything.
    infos = [i for i, e in enumerate(trace.events) if e.short == "process_info"]
    assert len(infos) == 2
    old = Trace(trace.path, trace.events[: infos[1]], 0)
    new = Trace(trace.path, trace.events[infos[1] :], 0)
    assert open_frames(old, pid) == {pid: [("function", "<module>"), ("c_call", "posix.execv")]}
    assert_process_balanced(new, pid)


def test_children_untraced_without_environment(tracer: Tracer, tmp_path: Path) -> None:
    # activate() alone traces this interpreter only: a subprocess child is not
    # traced unless the environment asks for it.
    child = _write_child(tmp_path)
    code = f"""
import json, os, subprocess, sys
out = subprocess.run([sys.executable, {str(child)!r}, "3"], capture_output=True, text=True)
print(json.dumps({{"parent": os.getpid(), "child": json.loads(out.stdout)["child"]}}))
"""
    clean = {k: "" for k in ("PINSIGHT_PYTHON", "PINSIGHT_TRACE_PYTHON", "PYTHONSTARTUP")}
    run = tracer.run(code, env=clean)
    out = json.loads(run.stdout)
    assert not [e for e in run.trace.events if e.ctx["vpid"] == out["child"]]
    assert [e for e in run.trace.events if e.ctx["vpid"] == out["parent"]]

