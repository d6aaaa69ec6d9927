"""Test support, the one module of helpers the test files share (no test file imports
another): run Python code under a real LTTng session, read the trace back, run the
CLI; and, one section each, what several files use: asyncio's program of named tasks,
`trace` as a test runs it, the batched payload's busy and dying programs, the committed
unit traces, Trace Compass's analyses replayed (tc_replay.py, the replay engine), every
view of one trace, the native domains beside ours, damage made to traces (and the
references to read them against). Shared fixtures are tests/conftest.py's.

Traces are read with babeltrace2 (Debian's python3-bt2, through bt2_dump.py run
by /usr/bin/python3), never with a parser of our own.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from pinsight_python.activation import settings
from pinsight_python.recording import lttng
from tests import tc_replay
from tests.tc_replay import Frame

HERE = Path(__file__).resolve().parent
NATIVE = HERE / "native"  # the C and C++ sources tests build
SYSTEM_PYTHON = "/usr/bin/python3"  # the interpreter python3-bt2 binds
# PInsight's real libpinsight.so, built by scripts/setup.sh; PINSIGHT_LIB names another.
PINSIGHT_LIB = Path(
    os.environ.get("PINSIGHT_LIB") or HERE.parent / "build" / "pinsight" / "libpinsight.so"
)

# The backend activate() picks on this interpreter. CPython's profile hook
# (setprofile) reports only builtin functions and methods as native calls:
# not calls to types, NumPy ufuncs and dispatchers, Cython or pybind11 functions.
DEFAULT_BACKEND = "sys.monitoring" if sys.version_info >= (3, 12) else "setprofile"
SETPROFILE = DEFAULT_BACKEND == "setprofile"
# The variables that steer tracing (docs/activation.md): every ENV_* name that
# settings.py defines, so a new one is scrubbed from the tests' children the day it
# exists, and PYTHONSTARTUP (activate.py's hook). A stray shell variable must not
# change a test's result.
OWN_VARIABLES = (
    *sorted(
        value for name, value in vars(settings).items()
        if name.startswith("ENV_") and isinstance(value, str)
    ),
    "PYTHONSTARTUP",
)
# `pinsight-python` on this interpreter.
CLI = (sys.executable, "-m", "pinsight_python.cli")


def clean_env(*drop: str, **extra: str) -> Dict[str, str]:
    """This process's environment without any variable of ours (OWN_VARIABLES and
    every other PINSIGHT_* one: PInsight's own switches) nor those in `drop`,
    plus `extra`: what a child that must start untouched by the caller's shell
    gets."""
    env = {
        k: v for k, v in os.environ.items()
        if k not in OWN_VARIABLES and not k.startswith("PINSIGHT") and k not in drop
    }
    env.update(extra)
    return env


# The variables a prefix of another LTTng sets (scripts/sid-prefix.sh lttng, its env.sh,
# and scripts/with-lttng.sh's daemon): without them, a program gets the machine's LTTng.
OTHER_LTTNG_VARIABLES = (
    "LTTNG_RUNDIR", "LTTNG_UST_APP_PATH", "LTTNG_CONSUMERD64_BIN", "LTTNG_CONSUMERD64_LIBDIR",
    "BABELTRACE_PLUGIN_PATH", "LIBBABELTRACE2_PLUGIN_PROVIDER_DIR", "PINSIGHT_LTTNG_PREFIX",
)


def system_lttng_env(env: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """`env` (default: this process's) without another LTTng's prefix: what a program
    of the machine's own LTTng and babeltrace2 (Debian 12's python3-bt2 above all)
    must run with, whatever LTTng the tests run against."""
    env = dict(os.environ if env is None else env)
    prefix = env.get("PINSIGHT_LTTNG_PREFIX")
    for name in OTHER_LTTNG_VARIABLES:
        env.pop(name, None)
    if prefix:
        for name in ("PATH", "LD_LIBRARY_PATH"):
            kept = [p for p in env.get(name, "").split(":") if p and not p.startswith(prefix)]
            if kept:
                env[name] = ":".join(kept)
            else:
                env.pop(name, None)
    return env


def proc_status(pid: int, field: str) -> str:
    """The first value of `field` (e.g. "Uid", "TracerPid") in /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return line.split()[1]
    raise AssertionError(f"/proc/{pid}/status has no {field}")


def wait_for(condition: Callable[[], bool], timeout: float = 30.0,
             what: str = "the condition", poll: float = 0.01) -> None:
    """Polls `condition` until it holds; fails the test naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(poll)


def session_exists(name: str) -> bool:
    """Whether the session daemon lists an LTTng session of that name."""
    listing = subprocess.run(["lttng", "list"], capture_output=True, text=True, check=False)
    return re.search(rf"\b{re.escape(name)}\b", listing.stdout) is not None


def foreign_sessions() -> List[str]:
    """The sessions of this user's session daemon that neither the tests nor `trace`
    made (by name): one that enables our provider without a process tracker records
    every traced process of the user, the tests' too (its streams' descriptors open in
    each, their events in its trace). Empty when no daemon answers."""
    try:
        names = lttng.list_sessions()
    except lttng.LttngError:
        return []
    # The tests' sessions and `trace`'s runs are named by lttng.unique_session_name.
    return [name for name in names if lttng.session_name_owner(name) is None]


def report_json(*args: str | os.PathLike[str]) -> Dict[str, Any]:
    """`pinsight-python report ARGS... --json`, run in this process, parsed; fails
    the test with its standard error if it exits non-zero."""
    from pinsight_python import cli as cli_module

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_module.main(["report", *map(str, args), "--json"])
    assert code == 0, f"pinsight-python report {' '.join(map(str, args))}:\n{err.getvalue()}"
    report: Dict[str, Any] = json.loads(out.getvalue())
    return report


@dataclass
class Event:
    name: str
    ts: int
    fields: Dict[str, Any]
    ctx: Dict[str, Any]
    # The file of a frame, native-call or generator_end event as a CTF reader
    # finds it (read_trace): its own filename / caller_filename field in traces
    # of earlier versions, else the code_info its code_id had when it was written.
    file: Optional[str] = None

    @property
    def short(self) -> str:
        return self.name.split(":", 1)[1]


@dataclass
class Trace:
    path: Path
    events: List[Event]
    discarded: int

    def named(self, short: str) -> List[Event]:
        return [e for e in self.events if e.short == short]

    @property
    def counted(self) -> List[Event]:
        """The events the reader counts: all but the names (code_info, callable_info)."""
        return [e for e in self.events if e.short not in ("code_info", "callable_info")]

    def functions(self, kind: str = "function_begin") -> collections.Counter[str]:
        return collections.Counter(e.fields["qualname"] for e in self.named(kind))

    def by_thread(self) -> Dict[Tuple[int, int], List[Event]]:
        out: Dict[Tuple[int, int], List[Event]] = collections.defaultdict(list)
        for e in self.events:
            out[(e.ctx.get("vpid", 0), e.ctx.get("vtid", 0))].append(e)
        return out


def read_trace(path: Path) -> Trace:
    if not any(Path(path).rglob("metadata")):
        return Trace(path, [], 0)  # the session recorded nothing
    proc = subprocess.run(
        [SYSTEM_PYTHON, str(HERE / "bt2_dump.py"), str(path)],
        env=system_lttng_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"babeltrace2 could not read {path}:\n{proc.stderr}")
    events = []
    discarded = 0
    files: Dict[Tuple[Any, int], str] = {}  # (vpid, code_id): the file code_info named
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        if "discarded" in rec:
            discarded = rec["discarded"]
            continue
        event = Event(rec["name"], rec["ts"], rec["fields"], rec["ctx"])
        fields = event.fields
        if event.short == "code_info":
            files[(event.ctx.get("vpid"), fields["code_id"])] = fields["filename"]
        elif event.short in FILE_NAMED_BY_CODE:
            # The full payload names the file in code_info, once per code object
            # and naming epoch; earlier versions wrote it in every event.
            own = fields.get("filename") or fields.get("caller_filename")
            event.file = own or files.get((event.ctx.get("vpid"), fields["code_id"]))
        events.append(event)
    return Trace(path, events, discarded)


# The full payload's events whose file is code_info's (Event.file).
FILE_NAMED_BY_CODE = frozenset(
    {"function_begin", "function_end", "c_call_begin", "c_call_end", "generator_end"}
)


@contextlib.contextmanager
def isolated_session(out: Path, **session_args: Any) -> Iterator[Optional[Callable[[], None]]]:
    """A started session that records only the processes run with the yielded
    preexec_fn (None when not root).

    LTTng records every traced process of the user: test runs on one machine
    would see each other's programs. As root, each run gets a group id of its
    own and the session tracks only that group (lttng track --vgid).
    """
    with isolated(out, **session_args) as (_, run_as):
        yield run_as


def fresh_group() -> Tuple[Optional[int], Optional[Callable[[], None]]]:
    """(a group id of its own, the preexec_fn that runs a child in it), both None when
    not root: a session made with track_vgid=gid records only the processes run with
    that preexec_fn (and their children), whatever else of the user runs beside it."""
    if os.geteuid() != 0:
        return None, None
    gid = random.randrange(200_000, 2**31 - 1)

    def run_as() -> None:
        os.setgid(gid)

    return gid, run_as


@contextlib.contextmanager
def isolated(
    out: Path, **session_args: Any
) -> Iterator[Tuple[lttng.Session, Optional[Callable[[], None]]]]:
    """isolated_session, with the session itself (for record_snapshot)."""
    gid, run_as = fresh_group()
    session = lttng.Session(out, track_vgid=gid, **session_args)
    session.create()
    try:
        session.start()
        yield session, run_as
    finally:
        session.destroy()


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    trace: Trace


@dataclass
class Tracer:
    """Runs code in a fresh interpreter inside a uniquely named LTTng session."""

    tmp_path: Path
    counter: int = 0
    env: Dict[str, str] = field(default_factory=dict)

    def run(
        self,
        code: str,
        *,
        activate: Optional[str] = "pinsight_python.activate()",
        events: Iterable[str] = (f"{lttng.PROVIDER}:*",),
        contexts: Iterable[str] = lttng.CONTEXTS,
        args: Sequence[str] = (),
        env: Optional[Dict[str, str]] = None,
        argv_prefix: Sequence[str] = (),
        python: str = sys.executable,
        timeout: float = 240,
        check: bool = True,
    ) -> Run:
        """Write `code` to a script and run it traced.

        A prologue imports pinsight_python and runs `activate` before the
        script's code; with activate=None the script (or argv_prefix) activates.
        """
        self.counter += 1
        script = self.tmp_path / f"prog{self.counter}.py"
        body = textwrap.dedent(code)
        body = f"import pinsight_python\n{activate or 'pass'}\n" + body
        script.write_text(body)
        out = self.tmp_path / f"trace{self.counter}"
        full_env = dict(os.environ)
        full_env.update(self.env)
        if env:
            full_env.update(env)
        with isolated_session(out, events=events, contexts=contexts) as run_as:
            proc = subprocess.run(
                [python, *argv_prefix, str(script), *args],
                capture_output=True,
                text=True,
                env=full_env,
                cwd=self.tmp_path,
                timeout=timeout,
                check=False,
                preexec_fn=run_as,
            )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"traced program exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                f"stderr:\n{proc.stderr}"
            )
        return Run(proc.returncode, proc.stdout, proc.stderr, read_trace(out))


def cli(*args: str) -> str:
    """`pinsight-python ARGS...` on this interpreter: its standard output; fails
    the test with its standard error if it exits non-zero."""
    proc = subprocess.run([*CLI, *args],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"pinsight-python {' '.join(args)}:\n{proc.stderr}"
    return proc.stdout


def cli_process(*args: str, cwd: Optional[Path] = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`pinsight-python ARGS...` on this interpreter, in an environment clean of ours:
    its status and both outputs, whatever it exits with."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd,
                          env=clean_env(), timeout=timeout, check=False)


def untraced(
    code: str, tmp_path: Path, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "untraced.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run(
        [python, str(script)], capture_output=True, text=True, cwd=tmp_path, check=False
    )


def check_balanced(trace: Trace, allow_open: bool = False) -> None:
    """Per thread, begins and ends nest like a stack and every stack empties.

    function_*, c_call_* and import_* share one stack: a native call is a leaf
    frame of its caller, and Python frames it calls back into nest inside it; an
    import encloses what the module runs.
    """
    for key, events in trace.by_thread().items():
        stack: List[Tuple[str, str]] = []
        for e in events:
            s = e.short
            if s == "function_begin":
                stack.append(("function", e.fields["qualname"]))
            elif s == "c_call_begin":
                stack.append(("c_call", e.fields["callee_name"]))
            elif s == "import_begin":
                stack.append(("import", e.fields["module"]))
            elif s == "import_end":
                assert stack, f"thread {key}: import_end {e.fields['module']} with empty stack"
                top = stack.pop()
                assert top == ("import", e.fields["module"]), (
                    f"thread {key}: import_end {e.fields['module']} closes {top}"
                )
            elif s == "function_end":
                assert stack, f"thread {key}: function_end {e.fields['qualname']} with empty stack"
                top = stack.pop()
                assert top == ("function", e.fields["qualname"]), (
                    f"thread {key}: function_end {e.fields['qualname']} closes {top}"
                )
            elif s == "c_call_end":
                assert stack, f"thread {key}: c_call_end {e.fields['callee_name']} with empty stack"
                top = stack.pop()
                assert top == ("c_call", e.fields["callee_name"]), (
                    f"thread {key}: c_call_end {e.fields['callee_name']} closes {top}"
                )
        if not allow_open:
            assert not stack, f"thread {key}: frames left open: {stack[-5:]}"


# ---------------------------- asyncio: named tasks, a gather, a cancel, awaits, work in a thread
# (tests/integration/test_asyncio.py checks report's tasks against the program's own clocks,
# test_perfetto_export.py the export's task tracks against report's.)
# Three named tasks of a TaskGroup computing very different amounts between sleeps,
# a gather of two unnamed ones, a cancelled task, a task awaiting another, a task two
# tasks await, and work handed to a thread with asyncio.to_thread.
ASYNCIO_PROGRAM = """
import asyncio, json, sys, time

truth = {}

def spin(seconds):
    # CPU work: the loop thread's own clock says how much.
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1
    return x

def in_thread(seconds):
    c0 = time.thread_time()
    spin(seconds)
    truth["thread_cpu"] = time.thread_time() - c0

class Step:
    # Times the code of one step: from the moment it runs to the next await.
    def __init__(self):
        self.name = asyncio.current_task().get_name()
        self.t = truth.setdefault(self.name, {"cpu": 0.0, "wall": 0.0, "steps": 0})
    def __enter__(self):
        self.c0, self.w0 = time.thread_time(), time.perf_counter()
        return self
    def __exit__(self, *exc):
        self.t["cpu"] += time.thread_time() - self.c0
        self.t["wall"] += time.perf_counter() - self.w0
        self.t["steps"] += 1
        if exc[0] is not None or self.last:
            self.t["done"] = time.perf_counter()
    last = False

def created(name):
    truth.setdefault(name, {"cpu": 0.0, "wall": 0.0, "steps": 0})["created"] = time.perf_counter()

async def compute(rounds, work, pause=0.02):
    step = Step()
    for i in range(rounds):
        with step:
            spin(work)
        await asyncio.sleep(pause)
    step.last = True
    with step:
        return step.name

async def blocked():
    step = Step()
    with step:
        pass
    try:
        await asyncio.sleep(60)
    finally:  # cancelled: its last step runs this, and ends with CancelledError
        step.last = True
        with step:
            pass

async def waiter(other):
    step = Step()
    with step:
        spin(0.01)
    result = await other
    step.last = True
    with step:
        return result

async def offload():
    step = Step()
    with step:
        pass
    await asyncio.to_thread(in_thread, 0.08)
    step.last = True
    with step:
        return None

async def main():
    # The executor's first use imports and starts its thread, in the step that makes
    # it: done here, so that the offloading task's step is its own submit alone.
    await asyncio.to_thread(int)
    async with asyncio.TaskGroup() as tg:
        for name, rounds, work in (("alpha", 5, 0.06), ("beta", 4, 0.004), ("gamma", 5, 0.06)):
            created(name)
            tg.create_task(compute(rounds, work), name=name)
    await asyncio.gather(compute(3, 0.01), compute(2, 0.02))
    created("victim")
    victim = asyncio.create_task(blocked(), name="victim")
    await asyncio.sleep(0.01)
    victim.cancel()
    try:
        await victim
    except asyncio.CancelledError:
        pass
    created("target")
    target = asyncio.create_task(compute(3, 0.02, 0.03), name="target")
    created("waiter")
    await asyncio.create_task(waiter(target), name="waiter")
    created("shared")
    shared = asyncio.create_task(compute(2, 0.01, 0.05), name="shared")
    for name in ("first", "second"):
        created(name)
    await asyncio.gather(asyncio.create_task(waiter(shared), name="first"),
                         asyncio.create_task(waiter(shared), name="second"))
    created("offload")
    await asyncio.create_task(offload(), name="offload")

if sys.argv[1:] == ["uvloop"]:
    import uvloop
    uvloop.run(main())  # its task's coroutine is a wrapper that awaits main
else:
    asyncio.run(main())
json.dump(truth, sys.stdout)
"""


def asyncio_tasks(report: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """report --json's tasks of its one process's one event loop, by name (each name once)."""
    (proc,) = report["processes"]
    section = proc["tasks"]
    assert section is not None, "no task section"
    (loop,) = section["loops"]
    assert loop["thread"].startswith("main thread"), loop["thread"]
    by_name: Dict[str, Dict[str, Any]] = {}
    for task in loop["tasks"]:
        assert task["name"] not in by_name, f"two tasks named {task['name']}"
        by_name[task["name"]] = task
    return by_name


# ------------------------------------------------------- `pinsight-python trace` as a test runs it


def events_of(trace: Trace, pid: int) -> Trace:
    return Trace(trace.path, [e for e in trace.events if e.ctx["vpid"] == pid], trace.discarded)


def begins(trace: Trace, qualname: str) -> int:
    return sum(1 for e in trace.named("function_begin") if e.fields["qualname"] == qualname)


def write(tmp_path: Path, name: str, code: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(code))
    return path


def trace_report(stderr: str) -> Tuple[Path, str]:
    m = re.search(r"trace written to (\S+) \(LTTng session (\S+), now destroyed\)", stderr)
    assert m, stderr
    return Path(m.group(1)), m.group(2)


# Open MPI as root, 4 ranks on 2 cores, shared memory only, no remote launcher:
MPI_ENV = {
    # mpirun refuses to run as root without both.
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    # Shared memory between the ranks of this node; UCX, OFI and openib are not
    # probed (they print warnings or take seconds where such hardware is found).
    "OMPI_MCA_pml": "ob1",
    "OMPI_MCA_btl": "self,vader",
    # Containers often forbid the cross-memory attach (ptrace) vader uses by default.
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    # Local launch only: no ssh needed on PATH.
    "OMPI_MCA_plm_rsh_agent": "",
}


# ----------------- The batched payload: a program its writer thread keeps busy, one killed mid-run
KILLED = """
import os, signal, sys, time
def before(i):
    return i * 2
def after(i):
    return i + 1
def deep(n, how):
    if n:
        return deep(n - 1, how)
    for i in range(10):
        after(i)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "term":
        os.kill(os.getpid(), signal.SIGTERM)
    else:
        os.abort()
for i in range(100):
    before(i)
# Idle: the control thread writes this thread's block (before() and the sleep's call);
# 1.5 s, not its 0.2 s + 0.1 s: a loaded machine can run the control thread late.
time.sleep(1.5)
deep(5, sys.argv[1])
"""


def run_dying(tmp_path: Path, how: str) -> Trace:
    out = tmp_path / f"trace-{how}"
    script = tmp_path / "dying.py"
    script.write_text("import pinsight_python\npinsight_python.activate(payload='batched')\n"
                      + textwrap.dedent(KILLED))
    with isolated_session(out) as run_as:
        proc = subprocess.run([sys.executable, str(script), how], capture_output=True,
                              text=True, timeout=120, check=False, preexec_fn=run_as)
        assert proc.returncode < 0, (proc.returncode, proc.stderr)
    return read_trace(out)


LOSSY = """
import sys, threading, time, pinsight_python
pinsight_python.activate(payload="batched")
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
# The threads start, and end, while LTTng has room: their first and last blocks
# are kept, so every loss is between two blocks read, and counted.
started, done = threading.Barrier(3), threading.Barrier(3)
def work():
    started.wait()
    for _ in range(6):
        fib(18)
    done.wait()
    time.sleep(1.5)  # the consumer's 0.2 s read timer makes room, even on a loaded machine
before = pinsight_python.status()["events_emitted"]
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(pinsight_python.status()["events_emitted"] - before)
"""
WRITER_PROGRAM = """
import threading
from pinsight_python import _pinsight_python as core
pinsight_python.activate(payload="batched")
writer = core._block_writer_tid()
calls = [0, 0, 0]

def leaf(i, slot):
    calls[slot] += 1
    return i

def pair(i):  # a generator_end record per instance, among the thread's others
    yield i

def work(slot):
    for i in range(150000):
        leaf(i, slot)
        if i % 500 == 0:
            sum(pair(i))

threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2)]
for t in threads:
    t.start()
work(0)
for t in threads:
    t.join()
named = open(f"/proc/self/task/{writer}/comm").read().strip() if writer else ""
print(writer, named == open("/proc/self/comm").read().strip(), sum(calls))
"""


# ---------------- The small traces committed under tests/unit/traces (scripts/make_unit_traces.py)
TRACES = HERE / "unit" / "traces"
PROGRAM_CALLS = {"main": 1, "fib": 25, "work": 2, "fails": 1}


def program_functions(report: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    [proc] = report["processes"]
    return {
        f["qualname"]: f for f in proc["functions"]
        if f["kind"] == "python" and str(f["filename"]).endswith("unit_program.py")
    }


def native_calls(report: Dict[str, Any]) -> Dict[str, int]:
    [proc] = report["processes"]
    return {f["name"]: f["calls"] for f in proc["functions"] if f["kind"] == "native"}


# --------------------------------- Trace Compass's analyses (tracecompass/), replayed by tc_replay
REPO = HERE.parent
TRACECOMPASS = REPO / "tracecompass"
# shared/ sits beside the repository, locally and in CI.
XSD = REPO.parent / "shared" / "tracecompass-xsd" / "xmlDefinition.xsd"
OUR_PROVIDER = lttng.PROVIDER
CALLSTACK_XML = TRACECOMPASS / "pinsight_python_callstack.xml"
CROSSDOMAIN_XML = TRACECOMPASS / "pinsight_python_crossdomain.xml"
CALLSTACK_ID = "pinsight.python.tracecompass.callstack"
CROSSDOMAIN_ID = "pinsight.python.tracecompass.crossdomain.callstack"
THREADS_VIEW_ID = "pinsight.python.tracecompass.threads.timeGraphView"
CROSSDOMAIN_VIEW_ID = "pinsight.python.tracecompass.crossdomain.timeGraphView"


def xml_files() -> List[Path]:
    files = sorted(TRACECOMPASS.glob("*.xml"))
    assert files, f"no analyses in {TRACECOMPASS}"
    return files


def replay(
    path: Path, callstack_id: str, events: Sequence[Any]
) -> Tuple[tc_replay.AnalysisFile, tc_replay.Replay]:
    analysis = tc_replay.AnalysisFile(path)
    return analysis, analysis.replay(callstack_id, events)


def thread_key(event: Any) -> Tuple[str, str]:
    return (str(event.ctx["vpid"]), str(event.ctx["vtid"]))


def frame_name(event: Any) -> str:
    """The name the analyses give a frame: qualname, callee, or "import <module>"."""
    fields = event.fields
    if "module" in fields:
        return f"import {fields['module']}"
    return fields["qualname"] if "qualname" in fields else fields["callee_name"]


def reference_frames(events: Sequence[Any]) -> Dict[Tuple[str, str], List[Frame]]:
    """Frames straight from the events, as a stack per thread: what the XML must build.

    A frame ends one nanosecond before its end event, as TC's intervals do; a
    frame that begins and ends at one timestamp leaves no interval in TC.
    """
    stacks: Dict[Tuple[str, str], List[Tuple[str, int]]] = collections.defaultdict(list)
    frames: Dict[Tuple[str, str], List[Frame]] = collections.defaultdict(list)
    for event in events:
        kind = event.name.split(":", 1)[1]
        key = thread_key(event)
        if kind in ("function_begin", "c_call_begin", "import_begin"):
            stacks[key].append((frame_name(event), event.ts))
        elif kind in ("function_end", "c_call_end", "import_end"):
            name, start = stacks[key].pop()
            if start < event.ts:
                frames[key].append(Frame(len(stacks[key]) + 1, name, start, event.ts - 1))
    return {k: sorted(v, key=lambda f: (f.start, f.depth)) for k, v in frames.items()}


def frame_paths(frames: Sequence[Frame]) -> List[Tuple[str, ...]]:
    """Each frame with its callers, outermost first."""
    paths: List[Tuple[str, ...]] = []
    open_frames: List[Frame] = []
    for frame in frames:  # by start time, then depth
        open_frames = [f for f in open_frames if f.depth < frame.depth and f.end >= frame.start]
        open_frames.append(frame)
        paths.append(tuple(str(f.name) for f in open_frames))
    return paths


def assert_clean(result: tc_replay.Replay) -> None:
    assert not result.diagnostics.missing_fields, result.diagnostics.missing_fields
    assert not result.diagnostics.dropped_changes, result.diagnostics.dropped_changes
    assert not result.ss.empty_pops, result.ss.empty_pops[:5]


def rows_by_path(view: ET.Element, ss: tc_replay.StateSystem) -> Dict[str, tc_replay.Row]:
    return {row.path: row for top in tc_replay.view_rows(view, ss) for row in top.walk()}


def running_reference(events: Sequence[Any], key: Tuple[str, str]) -> List[Tuple[int, str]]:
    """(time, function on top or "idle") whenever a thread's top frame changes."""
    out: List[Tuple[int, str]] = []
    stack: List[str] = []
    for event in events:
        if thread_key(event) != key:
            continue
        kind = event.name.split(":", 1)[1]
        if kind in ("function_begin", "c_call_begin", "import_begin"):
            stack.append(frame_name(event))
        elif kind in ("function_end", "c_call_end", "import_end"):
            stack.pop()
        elif kind != "thread_start":
            continue
        state = stack[-1] if stack else "idle"
        if out and out[-1][0] == event.ts:
            out[-1] = (event.ts, state)  # TC keeps the last change at one timestamp
        elif not out or out[-1][1] != state:
            out.append((event.ts, state))
    return out


# ----------------------------------------------- Every view of one trace, compared across payloads
ANALYSES = [
    (CALLSTACK_XML, "pinsight.python.tracecompass.callstack"),
    (CROSSDOMAIN_XML, "pinsight.python.tracecompass.crossdomain.callstack"),
]
# Deterministic: the same calls in the same order on every run (a raw thread and
# a lock, not threading's Python-level handshakes, whose waits depend on timing).
MIXED_WORKLOAD = """
import _thread, math

def leaf(x):
    return math.sqrt(x) + len([x])

def numbers(n):
    for i in range(n):
        yield leaf(i)

def fails():
    raise ValueError("unwound")

def parse(text):
    try:
        return int(text)
    except ValueError:
        return -1

class Box:
    def __init__(self, v):
        self.v = v
    def total(self):
        return sum(numbers(self.v))

def worker(done):
    Box(5).total()
    done.release()

def main():
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(worker, (done,))
    for i in range(20):
        Box(i % 4).total()
        parse("x" if i % 3 else str(i))
    try:
        fails()
    except ValueError:
        pass
    sorted([3, 1, 2], key=leaf)
    done.acquire()

main()
"""
_TIME_KEYS = {"begin_ns", "end_ns", "duration_ns", "total_ns", "self_ns", "trace", "trace_dirs",
              "wall_ns", "running_ns", "mean_wall_ns", "ts_ns", "offset_ns"}
_ID_KEYS = {"vpid", "vtid", "pid", "label"}


def normalized(value: Any) -> Any:
    """A report without times and process/thread ids; lists in a canonical order."""
    if isinstance(value, dict):
        return {
            k: normalized(v) for k, v in value.items() if k not in _TIME_KEYS | _ID_KEYS
        }
    if isinstance(value, list):
        items = [normalized(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, str):
        return re.sub(r"prog\d+\.py", "prog.py", value)  # each run's own script
    return value


def folded_stacks(text: str) -> List[str]:
    """The stacks of `flamegraph --folded`, without weights and with ids masked."""
    stacks = []
    for line in text.splitlines():
        parts = line.rpartition(" ")[0].split(";")
        parts[:2] = [re.sub(r"\d+", "N", p) for p in parts[:2]]
        stacks.append(";".join(parts))
    return sorted(stacks)


def chrome_frames(path: Path) -> List[List[Tuple[str, str, str]]]:
    """Per thread: its frame events (begin/end or complete) with names and arguments,
    in time order."""
    data = json.loads(path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    threads: Dict[Tuple[Any, Any], List[Tuple[str, str, str]]] = collections.defaultdict(list)
    for e in sorted(events, key=lambda e: e.get("ts", 0)):  # stable: file order at equal ts
        if e.get("ph") in ("B", "E", "X"):
            args = json.dumps(e.get("args", {}), sort_keys=True)
            threads[(e["pid"], e["tid"])].append((e["ph"], e.get("name", ""), args))
    assert threads, f"{path}: no frames"
    return sorted(threads.values())


def replayed_stacks(
    events: Sequence[Event], path: Path, callstack_id: str, whole: bool = True
) -> List[List[Any]]:
    """Frames (depth, name) per thread; `whole`: the trace has every begin."""
    analysis = tc_replay.AnalysisFile(path)
    result = analysis.replay(callstack_id, events)
    assert not whole or not result.ss.empty_pops, result.ss.empty_pops[:5]
    assert not result.diagnostics.missing_fields, result.diagnostics.missing_fields
    frames = tc_replay.callstack_frames(analysis.callstacks[callstack_id], result.ss)
    return sorted([(f.depth, str(f.name)) for f in fs] for fs in frames.values())


# ------------ Native domains beside ours: PInsight's OpenMP through libpinsight.so, and a stand-in
PINSIGHT_LIKE = NATIVE / "pinsight_like"
TEAM = 2  # OMP_NUM_THREADS of every run
# One file drives both, as with PInsight: each reads its own sections.
OPENMP_CONFIG = """\
[OpenMP.default]
    trace_mode = TRACING
[Python.default]
    trace_mode = TRACING
"""


def compile_native(cmd: Sequence[str]) -> None:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stderr}")


def openmp_env(tmp_path: Path, **extra: str) -> Dict[str, str]:
    config = tmp_path / "pinsight_trace_config.txt"
    config.write_text(OPENMP_CONFIG)
    env = clean_env("LD_PRELOAD", "OMP_TOOL_LIBRARIES")
    env.update(OMP_NUM_THREADS=str(TEAM), PINSIGHT_TRACE_CONFIG_FILE=str(config))
    # A busy session daemon must not make the program start before LTTng-UST
    # has its enablers (its default wait is 3 s): the first events would be lost.
    env.update(LTTNG_UST_REGISTER_TIMEOUT="30000")
    env.update(extra)
    return env


CALLS = 40
STANDIN_WORKLOAD = textwrap.dedent(f"""
    import ctypes, os
    like = ctypes.CDLL(os.environ["STANDIN"])
    like.pinsight_like_kernel.restype = ctypes.c_double
    def step(i):
        return like.pinsight_like_kernel(5000 + i)
    def main(n):
        total = 0.0
        for i in range(n):
            total += step(i)
        return total
    print(os.getpid(), main({CALLS}), flush=True)
""")


def native_report(out: Path, pid: int) -> Dict[str, Any]:
    """Our own reader's report of the process `pid` in the trace `out`."""
    from pinsight_python.reading.analysis import ReadFilter
    from pinsight_python.reading.analysis import read_trace as read_with_reader
    from pinsight_python.reading.report import build_report

    return build_report(read_with_reader(out, filters=ReadFilter(pids=(pid,))), top=0)


def native_rows(report: Dict[str, Any], domain: str, name: str) -> Dict[Optional[str], int]:
    """count per caller (None: no Python caller) of the regions `domain` `name`."""
    rows: Dict[Optional[str], int] = {}
    for row in report["native"]:
        if (row["domain"], row["name"]) == (domain, name):
            caller = row["caller"]["qualname"] if row["caller"] else None
            rows[caller] = rows.get(caller, 0) + row["count"]
            assert row["total_ns"] > 0
            # Above 1 when the regions ran on several threads at once.
            assert row["share_of_caller"] is None or row["share_of_caller"] > 0, row
    return rows


def assert_openmp_regions_under_their_call(report: Dict[str, Any]) -> str:
    """The OpenMP workload's CALLS parallel regions under the call that ran them,
    and the workers' implicit tasks too, on threads that never ran Python: joined
    to the call by their parallel region. (libpinsight may miss one worker begin.)
    Returns the caller."""
    caller = "step"  # the Python function; under sys.monitoring, via ctypes.openmp_region
    assert native_rows(report, "openmp", "parallel") == {caller: CALLS}
    tasks = native_rows(report, "openmp", "implicit_task")
    assert set(tasks) == {caller}, tasks
    assert CALLS * TEAM - 1 <= tasks[caller] <= CALLS * TEAM, tasks
    return caller


def build_openmp_kernel(out: Path) -> Path:
    """openmp_region.c with clang -fopenmp (LLVM's libomp: OMPT)."""
    cc = os.environ.get("PINSIGHT_OMP_CC", "clang")
    if shutil.which(cc) is None:
        raise AssertionError(
            f"{cc!r} is missing: PInsight's OpenMP tracing needs "
            "clang and LLVM's libomp (Debian: apt-get install clang libomp-dev)"
        )
    resource = subprocess.run(
        [cc, "-print-resource-dir"], capture_output=True, text=True, check=False
    ).stdout.strip()
    rpath = []
    if resource and (Path(resource).parents[1] / "libomp.so").exists():
        rpath = [f"-Wl,-rpath,{Path(resource).parents[1]}"]
    lib = out / "libopenmp_region.so"
    compile_native(
        [
            cc,
            "-O2",
            "-fPIC",
            "-shared",
            "-fopenmp",
            str(PINSIGHT_LIKE / "openmp_region.c"),
            "-o",
            str(lib),
            *rpath,
        ]
    )
    return lib


def trace_openmp_workload(
    tmp_path: Path, env: Dict[str, str], *options: str
) -> Tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "cli-trace"
    script = tmp_path / "app.py"
    script.write_text(STANDIN_WORKLOAD.replace("pinsight_like_kernel", "openmp_region"))
    proc = subprocess.run(
        [sys.executable, "-m", "pinsight_python.cli", "trace", "--no-summary", "-o", str(out),
         *options, "--", sys.executable, str(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240, check=False,
    )
    return proc, out


OMP = "pinsight_test_omp"
OMP_THREADS = 2
OMP_PROGRAM = """
import os
import sys
import threading
print(os.getpid(), flush=True)
sys.path.insert(0, {kernel_dir!r})
import omp_kernel

def simulate(steps):
    total = 0.0
    for _ in range(steps):
        total += omp_kernel.saxpy(200_000, 2.0)
    return total

def analyse():
    return omp_kernel.dot(110_000)

def background():
    return omp_kernel.saxpy(60_000, 3.0)

print(simulate(3))
print(analyse())
t = threading.Thread(target=background)
t.start()
t.join()
"""


# --------------------------- Damage made to real traces, and the references to read them against
# (tests/unit/test_damaged.py, tests/integration/test_damaged.py): what a crashed job, a full
# disk or a dropped relay leave. Packets are found through LTTng's own index of the intact
# trace, not through the reader: a reference is the intact trace with whole packets taken
# out of a stream file (the bytes of the others, as they were), which babeltrace2 reads as
# it is.

INDEX_HEADER = struct.Struct(">IIII")  # magic, major, minor, entry size
INDEX_MAGIC = 0xC1F1DCC1
METADATA_MAGIC = 0x75D11D57


@dataclass(frozen=True)
class IndexedPacket:
    offset: int  # bytes
    size: int  # bytes
    content_bits: int

    @property
    def end(self) -> int:
        return self.offset + self.size


def ctf_trace_dir(trace: Path) -> Path:
    """The one CTF trace directory (holding `metadata`) under `trace`."""
    [metadata] = list(Path(trace).rglob("metadata"))
    return metadata.parent


def indexed_packets(stream: Path) -> List[IndexedPacket]:
    """The packets of a stream file, from its LTTng index."""
    data = (stream.parent / "index" / f"{stream.name}.idx").read_bytes()
    magic, _, _, entry = INDEX_HEADER.unpack_from(data)
    assert magic == INDEX_MAGIC, stream
    out = []
    for at in range(INDEX_HEADER.size, len(data) - entry + 1, entry):
        offset, packet_bits, content_bits = struct.unpack_from(">QQQ", data, at)
        out.append(IndexedPacket(offset, packet_bits // 8, content_bits))
    assert sum(p.size for p in out) == stream.stat().st_size, stream
    return out


def copy_trace_dir(trace_dir: Path, to: Path) -> Path:
    """A copy of a CTF trace directory to damage."""
    shutil.copytree(trace_dir, to)
    return to


def stream_files(trace_dir: Path) -> List[Path]:
    return sorted(p for p in trace_dir.iterdir() if p.is_file() and p.name != "metadata")


def cut_file(stream: Path, size: int) -> None:
    """The file as a crash leaves it: its first `size` bytes (its index as it was)."""
    with open(stream, "r+b") as f:
        f.truncate(size)


def garble(path: Path, offset: int, data: bytes) -> None:
    """Bytes overwritten in place (a bad sector, a torn write)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def without_packets(stream: Path, dropped: Iterable[int]) -> None:
    """The reference: the stream file without the given packets (by index), whole
    packets otherwise; its index goes (babeltrace2 indexes the file itself)."""
    gone = set(dropped)
    kept = [p for i, p in enumerate(indexed_packets(stream)) if i not in gone]
    data = stream.read_bytes()
    stream.write_bytes(b"".join(data[p.offset:p.end] for p in kept))
    (stream.parent / "index" / f"{stream.name}.idx").unlink()
    if not kept:
        stream.unlink()


def metadata_text_size(trace_dir: Path) -> int:
    """How many bytes of text the metadata holds (packetized as LTTng writes it)."""
    data = (trace_dir / "metadata").read_bytes()
    total, offset = 0, 0
    while offset + 37 <= len(data):
        assert struct.unpack_from("<I", data, offset)[0] == METADATA_MAGIC
        content, size = struct.unpack_from("<II", data, offset + 24)
        total += content // 8 - 37
        offset += size // 8
    return total


def metadata_text(trace_dir: Path) -> str:
    data = (trace_dir / "metadata").read_bytes()
    text, offset = b"", 0
    while offset + 37 <= len(data):
        content, size = struct.unpack_from("<II", data, offset + 24)
        text += data[offset + 37:offset + content // 8]
        offset += size // 8
    return text.decode()


def cut_metadata_text(trace_dir: Path, keep: int) -> None:
    """The metadata file cut inside its packet holding text byte `keep`: the file ends
    there, as a crash while the consumer wrote it leaves it."""
    data = (trace_dir / "metadata").read_bytes()
    offset, seen = 0, 0
    while offset + 37 <= len(data):
        content, size = struct.unpack_from("<II", data, offset + 24)
        text = content // 8 - 37
        if seen + text > keep:
            cut_file(trace_dir / "metadata", offset + 37 + keep - seen)
            return
        seen += text
        offset += size // 8
    raise AssertionError(f"the metadata holds {seen} bytes of text, not {keep}")


def reader_counts(path: Path) -> Dict[str, Any]:
    """What the reader read of a trace, to compare a damaged trace with its reference:
    events in all and by name, and per thread its events and each function's calls."""
    from pinsight_python.reading.analysis import read_trace as read_with_the_reader

    raw = read_with_the_reader(path, progress="never").raw
    threads = {}
    for proc in raw.processes:
        for thread in proc.threads:
            calls = {raw.symbols[f.symbol].qualname: f.calls for f in thread.functions if f.calls}
            threads[(proc.vpid, thread.vtid)] = (thread.events, calls)
    return {"events": raw.events, "event_counts": dict(raw.event_counts), "threads": threads}
