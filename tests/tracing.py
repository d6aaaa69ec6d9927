"""Test support: run Python code under a real LTTng session, read the trace back.

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
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from pinsight_python.activation import settings
from pinsight_python.recording import lttng

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
