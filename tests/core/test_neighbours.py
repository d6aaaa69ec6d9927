"""The program's neighbours, traced as they run: a fork from a thread, signals a
thread blocks, sub-interpreters. Each program runs with a real LTTng session and
its trace is read back; each must behave exactly as untraced.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.tracing import DEFAULT_BACKEND, Tracer, check_balanced, untraced

BACKENDS = sorted({DEFAULT_BACKEND, "setprofile"})
SHIM = {"PINSIGHT_TRACE_PYTHON": "TRACING"}  # the .pth shim activates at start-up

FORK_FROM_THREAD = """
import os, threading, warnings
warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads, 3.12+

def child_work():
    return 42

def forker():
    pid = os.fork()
    if pid == 0:
        print("child", os.getpid(), child_work(), flush=True)
        return  # the child's only Python thread ends here: so must the child
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status), flush=True)

t = threading.Thread(target=forker)
t.start()
t.join()
print("parent done", flush=True)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_child_forked_from_a_thread_ends_when_its_thread_returns(
    tracer: Tracer, tmp_path: Path, backend: str
) -> None:
    # The child's control thread and LTTng-UST's listeners used to keep it
    # alive for ever, and the parent waited for it.
    run = tracer.run(
        FORK_FROM_THREAD,
        activate=None,
        env={**SHIM, "PINSIGHT_PYTHON_BACKEND": backend},
        timeout=60,
    )
    plain = untraced(FORK_FROM_THREAD, tmp_path)
    assert run.stderr == plain.stderr == ""
    lines = run.stdout.splitlines()
    assert lines[-2:] == ["child exit 0", "parent done"], run.stdout
    child_pid = int(lines[0].split()[1])
    child = [e for e in run.trace.events if e.ctx["vpid"] == child_pid]
    assert [e.fields["qualname"] for e in child if e.short == "function_begin"].count(
        "child_work"
    ) == 1
    parent = [e for e in run.trace.events if e.ctx["vpid"] != child_pid]
    assert "child_work" not in {e.fields.get("qualname") for e in parent}
    check_balanced(run.trace, allow_open=True)


SIGNAL_BLOCKED = """
import os, signal, threading
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
os.kill(os.getpid(), signal.SIGUSR2)  # default action: end the process
print("pending:", signal.SIGUSR2 in signal.sigpending(), flush=True)
signal.signal(signal.SIGUSR2, signal.SIG_IGN)
"""


def test_a_signal_the_program_blocks_stays_pending(tracer: Tracer, tmp_path: Path) -> None:
    # Untraced, the only thread blocks it: it waits, pending. Our control thread
    # must not take it (SIGUSR2's default action would end the process).
    run = tracer.run(SIGNAL_BLOCKED, activate=None, env=SHIM, timeout=60, check=False)
    plain = untraced(SIGNAL_BLOCKED, tmp_path)
    assert (run.returncode, run.stdout, run.stderr) == (0, "pending: True\n", "")
    assert (plain.returncode, plain.stdout) == (0, "pending: True\n")
    assert run.trace.named("process_info")


# _interpreters (3.13), _xxsubinterpreters (3.8-3.12): the program's own code
# in a sub-interpreter, and pinsight_python imported there explicitly.
SUBINTERPRETER = """
import sys
try:
    import _interpreters as interpreters
except ImportError:
    import _xxsubinterpreters as interpreters

def in_main(n):
    return n + 1

SUB = '''
def in_sub(n):
    return n * 2
print("sub", in_sub(21), flush=True)
import pinsight_python
status = pinsight_python.status()
print("sub status", status["interpreter"], status["active"], flush=True)
try:
    pinsight_python.activate()
except pinsight_python.ActivationError as e:
    print("sub activate:", e, flush=True)
'''
interp = interpreters.create()
if hasattr(interpreters, "exec"):
    assert interpreters.exec(interp, SUB) is None
else:
    interpreters.run_string(interp, SUB)
interpreters.destroy(interp)
import pinsight_python
status = pinsight_python.status()
print("main", in_main(1), status["interpreter"], status["active"], flush=True)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_subinterpreters_run_untraced_without_a_word(
    tracer: Tracer, tmp_path: Path, backend: str
) -> None:
    # 3.12+ printed a traceback from the .pth line in every sub-interpreter;
    # 3.11's setprofile backend deadlocked loading the extension there.
    run = tracer.run(
        SUBINTERPRETER,
        activate=None,
        env={**SHIM, "PINSIGHT_PYTHON_BACKEND": backend},
        timeout=60,
    )
    assert run.stderr == ""
    assert run.stdout.splitlines() == [
        "sub 42",
        "sub status sub False",
        "sub activate: sub-interpreters are not traced "
        "(pinsight-python traces the main interpreter only)",
        "main 2 main True",
    ]
    begun = run.trace.functions()
    assert begun["in_main"] == 1
    assert "in_sub" not in begun
    assert {e.fields["backend"] for e in run.trace.named("process_info")} == {backend}
    check_balanced(run.trace, allow_open=True)



# 3.14+: concurrent.interpreters and InterpreterPoolExecutor run the main
# interpreter's traced functions in sub-interpreters. Interpreter.exec(function)
# takes only code without state of its own (CPython counts a co_extra annotation as
# such state): a function traced in the main interpreter first must still go.
INTERPRETER_POOL = """
from concurrent import interpreters
from concurrent.futures import InterpreterPoolExecutor

def script():
    x = 6 * 7

def square(n):
    return n * n

def in_main(n):
    return n + 1

script()
print(in_main(1), square(3), flush=True)
interp = interpreters.create()
interp.exec(script)
print("call", interp.call(square, 4), flush=True)
with InterpreterPoolExecutor(max_workers=2) as pool:
    print("pool", sorted(pool.map(square, range(20))), flush=True)
interp.close()
print(in_main(2), flush=True)
"""


@pytest.mark.skipif(sys.version_info < (3, 14), reason="concurrent.interpreters is 3.14's")
def test_interpreter_pool_runs_as_untraced(tracer: Tracer, tmp_path: Path) -> None:
    run = tracer.run(INTERPRETER_POOL, activate=None, env=SHIM, timeout=120)
    plain = untraced(INTERPRETER_POOL, tmp_path)
    assert (run.returncode, run.stdout, run.stderr) == (plain.returncode, plain.stdout, "")
    assert run.stdout.splitlines()[-1] == "3"
    # The main interpreter's calls only, each exactly once.
    begun = run.trace.functions()
    assert (begun["in_main"], begun["square"], begun["script"]) == (2, 1, 1)
    check_balanced(run.trace, allow_open=True)


THREADING_FIRST_FROM_A_THREAD = """
import _thread, sys
print("threading imported:", "threading" in sys.modules, flush=True)
done = _thread.allocate_lock()
done.acquire()

def importer():
    import threading
    print("main thread is main:", threading.main_thread().ident != _thread.get_ident())
    done.release()

_thread.start_new_thread(importer, ())
done.acquire()
"""


def test_activation_imports_no_threading(tracer: Tracer, tmp_path: Path) -> None:
    # CPython's bpo-1596321 case: the program imports threading first from
    # another thread. Activation importing it beforehand changed what it saw.
    run = tracer.run(THREADING_FIRST_FROM_A_THREAD, activate=None, env=SHIM, timeout=60)
    plain = untraced(THREADING_FIRST_FROM_A_THREAD, tmp_path)
    assert run.stdout == plain.stdout
    assert run.stdout.startswith("threading imported: False\n")
    assert run.trace.functions()["importer"] == 1
