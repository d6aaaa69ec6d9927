"""Activation without changing the program: the .pth shim and its environment,
activate.py (PYTHONSTARTUP), ``python -m pinsight_python`` and
``pinsight-python trace`` / ``startup-file``.

Traced programs must behave exactly as untraced ones: the same stdout, stderr,
exit status and exceptions. Each traced run happens in a real, uniquely named
LTTng session; other traced processes of this user may write into it too, so
checks select the program's own processes.
"""

from __future__ import annotations

import collections
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest

import pinsight_python
from pinsight_python.activation import startup as _startup
from tests.tracing import (
    Trace,
    begins,
    check_balanced,
    clean_env,
    events_of,
    isolated_session,
    read_trace,
    session_exists,
    trace_report,
    write,
)

PY = sys.executable
ACTIVATE_PY = _startup.startup_file()


class Ran:
    """A finished command: its pid (the traced process is our direct child)."""

    def __init__(self, pid: int, returncode: int, stdout: str, stderr: str) -> None:
        self.pid = pid
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def run_plain(
    cmd: Sequence[str], cwd: Path, env: Optional[Dict[str, str]] = None, stdin: str = "",
    preexec_fn: Optional[Callable[[], None]] = None,
) -> Ran:
    with subprocess.Popen(
        list(cmd),
        cwd=cwd,
        preexec_fn=preexec_fn,  # noqa: PLW1509 (a setgid only, before exec)
        env=env if env is not None else clean_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        stdout, stderr = proc.communicate(stdin, timeout=240)
    return Ran(proc.pid, proc.returncode, stdout, stderr)


_sessions = 0


def run_traced(
    cmd: Sequence[str], cwd: Path, env: Optional[Dict[str, str]] = None, stdin: str = ""
) -> Tuple[Ran, Trace]:
    """Run cmd inside a fresh LTTng session that records it alone (other programs of
    the user, the test runner included, stay out); the trace is read back afterwards."""
    global _sessions
    _sessions += 1
    out = cwd / f"session-trace-{_sessions}"
    with isolated_session(out) as run_as:
        ran = run_plain(cmd, cwd, env, stdin, run_as)
    return ran, read_trace(out)


# A program that shows what it sees, and whose calls are counted in the trace.
PROBE = """
import json, os, sys

def marker(n):
    return n + 1

for i in range(7):
    marker(i)
import pinsight_python
s = pinsight_python.status()
print(json.dumps({"pid": os.getpid(), "active": s["active"], "mode": s["mode"],
                  "events": s["events"], "backend": s["backend"]}))
"""


def probe(proc: Ran) -> Dict[str, object]:
    assert proc.returncode == 0, proc.stderr
    result: Dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


# ---------------------------------------------------------------------------- the .pth shim


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"PINSIGHT_TRACE_PYTHON": "OFF"},
        {"PINSIGHT_TRACE_PYTHON": ""},
        {"PINSIGHT_PYTHON": "0", "PINSIGHT_TRACE_PYTHON": "TRACING"},
        {"PYTHONSTARTUP": "/nonexistent/other_startup.py"},
    ],
)
def test_nothing_is_imported_when_nothing_asks(tmp_path: Path, extra: Dict[str, str]) -> None:
    code = (
        "import sys; print(sorted(m for m in sys.modules"
        " if m.split('.')[0] == 'pinsight_python'))"
    )
    proc = run_plain([PY, "-c", code], tmp_path, clean_env(**extra))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "[]\n", "")


@pytest.mark.parametrize("mode", ["TRACING", "MONITORING", "STANDBY", "tracing"])
def test_pinsight_trace_python_activates_in_that_mode(tmp_path: Path, mode: str) -> None:
    script = write(tmp_path, "probe.py", PROBE)
    proc, trace = run_traced([PY, str(script)], tmp_path, clean_env(PINSIGHT_TRACE_PYTHON=mode))
    info = probe(proc)
    assert info["active"] is True
    assert info["mode"] == mode.upper()
    own = events_of(trace, int(info["pid"]))  # type: ignore[call-overload]
    assert len(own.named("process_info")) == 1
    if mode.upper() == "TRACING":
        # From the interpreter's start: the script's module code and every call.
        assert begins(own, "marker") == 7
        assert begins(own, "<module>") >= 1
        check_balanced(own)
    else:
        assert not own.named("function_begin")
    assert proc.stderr == ""


def test_pinsight_python_switch_and_event_and_backend_variables(tmp_path: Path) -> None:
    script = write(tmp_path, "probe.py", PROBE)
    backend = "sys.monitoring" if sys.version_info >= (3, 12) else "setprofile"
    env = clean_env(
        PINSIGHT_PYTHON="1", PINSIGHT_PYTHON_EVENTS="function", PINSIGHT_PYTHON_BACKEND=backend
    )
    proc, trace = run_traced([PY, str(script)], tmp_path, env)
    info = probe(proc)
    assert info["active"] is True
    assert info["mode"] == "TRACING"  # the configuration's default
    assert info["events"] == ["function"]
    assert info["backend"] == backend
    own = events_of(trace, int(info["pid"]))  # type: ignore[call-overload]
    assert begins(own, "marker") == 7
    assert not own.named("c_call_begin")
    check_balanced(own)


def test_config_file_variable_is_honoured(tmp_path: Path) -> None:
    config = write(tmp_path, "quiet.txt", "[Python]\ntrace_mode = MONITORING\n")
    script = write(tmp_path, "probe.py", PROBE)
    env = clean_env(PINSIGHT_PYTHON="1", PINSIGHT_TRACE_CONFIG_FILE=str(config))
    info = probe(run_plain([PY, str(script)], tmp_path, env))
    assert (info["active"], info["mode"]) == (True, "MONITORING")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"PINSIGHT_TRACE_PYTHON": "TRACNG"}, "unknown trace mode 'TRACNG'"),
        ({"PINSIGHT_PYTHON": "yes"}, "PINSIGHT_PYTHON: expected 1 or 0"),
        ({"PINSIGHT_PYTHON": "1", "PINSIGHT_PYTHON_EVENTS": "calls"}, "unknown event 'calls'"),
        ({"PINSIGHT_PYTHON": "1", "PINSIGHT_TRACE_CONFIG_FILE": "/nonexistent.txt"}, "nonexistent"),
    ],
)
def test_bad_variables_give_one_line_and_the_program_runs(
    tmp_path: Path, extra: Dict[str, str], message: str
) -> None:
    script = write(tmp_path, "prog.py", "import sys\nprint('ran', sys.argv[1:])\nsys.exit(4)\n")
    plain = run_plain([PY, str(script), "x"], tmp_path)
    proc = run_plain([PY, str(script), "x"], tmp_path, clean_env(**extra))
    assert (proc.returncode, proc.stdout) == (plain.returncode, plain.stdout)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pinsight-python: ") and message in lines[0]
    assert lines[0].endswith("the program runs untraced")


# ---------------------------------------------------------------------------- PYTHONSTARTUP


@pytest.mark.parametrize("how", ["script", "module", "command"])
def test_pythonstartup_activates_scripts_modules_and_commands(tmp_path: Path, how: str) -> None:
    write(tmp_path, "probe.py", PROBE)
    cmd = {
        "script": [PY, "probe.py"],
        "module": [PY, "-m", "probe"],
        "command": [PY, "-c", "exec(open('probe.py').read())"],
    }[how]
    proc, trace = run_traced(cmd, tmp_path, clean_env(PYTHONSTARTUP=ACTIVATE_PY))
    info = probe(proc)
    assert info["active"] is True
    own = events_of(trace, int(info["pid"]))  # type: ignore[call-overload]
    assert begins(own, "marker") == 7
    assert len(own.named("process_info")) == 1
    check_balanced(own)


def test_a_copy_of_activate_py_works_too(tmp_path: Path) -> None:
    copy = tmp_path / "my_pinsight_activate.py"
    copy.write_text(Path(ACTIVATE_PY).read_text())
    write(tmp_path, "probe.py", PROBE)
    info = probe(run_plain([PY, "probe.py"], tmp_path, clean_env(PYTHONSTARTUP=str(copy))))
    assert info["active"] is True


INTERACTIVE_INPUT = """\
names = sorted(k for k in globals() if not k.startswith('__'))
import os, pinsight_python
print('RESULT', os.getpid(), pinsight_python.status()['active'], names)
"""


@pytest.mark.parametrize("shim", [True, False], ids=["with-shim", "without-shim"])
def test_interactive_session_activates_once(tmp_path: Path, shim: bool) -> None:
    startup = ACTIVATE_PY
    if not shim:
        # A copy under a name the shim's filter ignores (it looks for *activate.py):
        # CPython still runs it in an interactive session, and it activates alone.
        copy = tmp_path / "pinsight_startup.py"
        copy.write_text(Path(ACTIVATE_PY).read_text())
        startup = str(copy)
    env = clean_env(PYTHONSTARTUP=startup)
    proc, trace = run_traced([PY, "-i"], tmp_path, env, stdin=INTERACTIVE_INPUT)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "RESULT" in ln)
    _, pid, active, names = line.split(" ", 3)
    assert active == "True"
    # The startup file leaves nothing in the session's namespace.
    assert names == "[]"
    assert len(events_of(trace, int(pid)).named("process_info")) == 1


def test_pythonstartup_is_ignored_under_dash_E_as_cpython_does(tmp_path: Path) -> None:
    write(tmp_path, "probe.py", PROBE)
    info = probe(run_plain([PY, "-E", "probe.py"], tmp_path, clean_env(PYTHONSTARTUP=ACTIVATE_PY)))
    assert info["active"] is False


def test_pinsight_python_0_also_silences_activate_py(tmp_path: Path) -> None:
    env = clean_env(PYTHONSTARTUP=ACTIVATE_PY, PINSIGHT_PYTHON="0")
    proc = run_plain([PY, "-i"], tmp_path, env, stdin=INTERACTIVE_INPUT)
    assert " False " in next(ln for ln in proc.stdout.splitlines() if "RESULT" in ln)


# ------------------------------------------------------------------ python -m pinsight_python

SHOW = """
import sys

def describe():
    g = globals()
    keys = sorted(k for k in g if k not in ("sys", "describe", "marker"))
    return {
        "keys": keys,
        "name": __name__,
        "file": g.get("__file__"),
        "spec": getattr(g.get("__spec__"), "name", None),
        "package": g.get("__package__"),
        "loader": type(g.get("__loader__")).__name__,
        "cached": g.get("__cached__"),
        "argv": sys.argv,
        "path0": sys.path[0],
        "main_is_module": sys.modules["__main__"].__dict__ is g,
    }

def marker():
    pass

marker()
print(describe())
"""

PROGRAMS: Dict[str, Dict[str, str]] = {
    "show": {"show.py": SHOW},
    "raises": {
        "raises.py": """
            def inner():
                try:
                    {}["key"]
                except KeyError as e:
                    raise ValueError("bad value") from e

            def outer():
                inner()

            print("before")
            outer()
        """
    },
    "exit_code": {"exit_code.py": "import sys\nprint('out')\nsys.exit(7)\n"},
    "exit_message": {"exit_message.py": "import sys\nsys.exit('fatal: stopping')\n"},
    "keyboard_interrupt": {"keyboard_interrupt.py": "def f():\n    raise KeyboardInterrupt\nf()\n"},
    "excepthook": {
        "excepthook.py": """
            import sys

            def hook(t, v, tb):
                depth = 0
                while tb:
                    depth, tb = depth + 1, tb.tb_next
                print("hook", t.__name__, v, depth, file=sys.stderr)

            sys.excepthook = hook

            def f():
                raise RuntimeError("x")

            f()
        """
    },
    "syntax_error": {"syntax_error.py": "x = (\n"},
    "warning": {
        "warning.py": "import warnings\nwarnings.warn('old', DeprecationWarning)\nprint('ok')\n"
    },
    "pkg_main": {
        "pkg/__init__.py": "",
        "pkg/helper.py": "def value():\n    return 42\n",
        "pkg/__main__.py": SHOW + "from .helper import value\nprint(value())\n",
    },
    "directory": {"appdir/__main__.py": SHOW},
    "spawn_pool": {
        "spawn_pool.py": """
            import multiprocessing as mp

            def square(x):
                return x * x

            if __name__ == "__main__":
                # close + join: the context manager's terminate() kills workers
                # wherever they are (test_trace_survives_commands_killed_mid_event).
                pool = mp.get_context("spawn").Pool(2)
                print(pool.map(square, range(6)))
                pool.close()
                pool.join()
        """
    },
}

# (program, the arguments after the interpreter)
INVOCATIONS = [
    ("show", ["show.py", "a", "--b"]),
    ("show", ["./show.py"]),
    ("raises", ["raises.py"]),
    ("exit_code", ["exit_code.py"]),
    ("exit_message", ["exit_message.py"]),
    ("keyboard_interrupt", ["keyboard_interrupt.py"]),
    ("excepthook", ["excepthook.py"]),
    ("syntax_error", ["syntax_error.py"]),
    ("warning", ["warning.py"]),
    ("pkg_main", ["-m", "pkg", "x", "-y"]),
    ("raises", ["-m", "raises"]),
    ("show", ["-c", "exec(open('show.py').read())", "arg"]),
    ("show", ["-c", "def f():\n    raise ValueError('in -c')\nf()"]),
    ("show", ["-c", "x = ("]),
    ("directory", ["appdir", "z"]),
    ("spawn_pool", ["spawn_pool.py"]),
    ("show", ["missing.py"]),
    ("show", ["-m", "missing_module"]),
]


@pytest.mark.parametrize(
    ("program", "args"), INVOCATIONS, ids=[" ".join(a)[:40] for _, a in INVOCATIONS]
)
def test_python_m_pinsight_python_behaves_as_python(
    tmp_path: Path, program: str, args: List[str]
) -> None:
    for name, code in PROGRAMS[program].items():
        write(tmp_path, name, code)
    plain = run_plain([PY, *args], tmp_path)
    traced, trace = run_traced([PY, "-m", "pinsight_python", *args], tmp_path)
    assert traced.stdout == plain.stdout
    assert traced.stderr == plain.stderr
    assert traced.returncode == plain.returncode
    if "missing" not in " ".join(args) and program != "syntax_error" and args[-1] != "x = (":
        # And it was traced: the program's own code is in the trace.
        own = events_of(trace, traced.pid)
        assert len(own.named("process_info")) == 1
        assert begins(own, "<module>") >= 1


def test_python_m_options_apply_and_reach_children(tmp_path: Path) -> None:
    child = write(tmp_path, "child.py", PROBE)
    parent = write(
        tmp_path,
        "parent.py",
        f"""
        import subprocess, sys
        exec(open({str(child)!r}).read())
        subprocess.run([sys.executable, {str(child)!r}], check=True)
        """,
    )
    # The environment asks for TRACING with both event kinds: the command line wins,
    # and the shim leaves `python -m pinsight_python` to its own options.
    env = clean_env(PINSIGHT_TRACE_PYTHON="TRACING")
    proc, trace = run_traced(
        [PY, "-m", "pinsight_python", "--events=function", "--mode", "tracing", str(parent)],
        tmp_path,
        env,
    )
    assert proc.returncode == 0, proc.stderr
    infos = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [i["events"] for i in infos] == [["function"], ["function"]]
    for info in infos:
        own = events_of(trace, info["pid"])
        assert begins(own, "marker") == 7
        assert not own.named("c_call_begin")
        check_balanced(own)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "one of the arguments script.py -m -c is required"),
        (["--frobnicate", "x.py"], "unrecognized arguments: --frobnicate"),
        (["-q", "x.py"], "unrecognized arguments: -q"),
        (["--events", "calls", "x.py"], "--events: unknown event 'calls'"),
        (["--mode", "FAST", "x.py"], "--mode: unknown trace mode 'FAST'"),
        (["--backend", "ptrace", "x.py"], "--backend: unknown backend 'ptrace'"),
        (["--config", "/nonexistent.txt", "x.py"], "no such configuration file"),
        (["--events"], "argument --events: expected one argument"),
        (["-m"], "argument -m: expected one argument"),
        (["-"], "standard input is not supported"),
    ],
)
def test_python_m_bad_arguments(tmp_path: Path, args: List[str], message: str) -> None:
    proc = run_plain([PY, "-m", "pinsight_python", *args], tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_python_m_bad_config_file_content(tmp_path: Path) -> None:
    config = write(tmp_path, "bad.txt", "[Python]\ntrace_mode = SOMETIMES\n")
    write(tmp_path, "x.py", "print('never')\n")
    proc = run_plain([PY, "-m", "pinsight_python", "--config", str(config), "x.py"], tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert "cannot start tracing" in proc.stderr and "SOMETIMES" in proc.stderr


def test_python_m_help(tmp_path: Path) -> None:
    proc = run_plain([PY, "-m", "pinsight_python", "--help"], tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: python -m pinsight_python")


# ---------------------------------------------------------------------------- pinsight-python trace

TRACE_CMD = [PY, "-m", "pinsight_python.cli"]

WORKLOAD = """
import json, os, subprocess, sys

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

print(fib(15))
if len(sys.argv) > 1:
    out = subprocess.run([sys.executable, __file__], capture_output=True, text=True)
    print("child", out.stdout.strip())
print(json.dumps({"pid": os.getpid()}), file=sys.stderr)
sys.exit(3)
"""
FIB_15_CALLS = 1973


def program_line(stderr: str) -> Dict[str, Any]:
    """WORKLOAD's own stderr line. `trace` may write before it: a session of another run
    whose trace process was killed (a test beside this one) is destroyed, and said so."""
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith('{"pid": ')]
    result: Dict[str, Any] = json.loads(line)
    return result


def test_trace_runs_the_command_and_keeps_the_trace(tmp_path: Path) -> None:
    script = write(tmp_path, "work.py", WORKLOAD)
    plain = run_plain([PY, str(script), "kids"], tmp_path)
    out = tmp_path / "t"
    proc = run_plain([*TRACE_CMD, "trace", "-o", str(out), "--", PY, str(script), "kids"], tmp_path)
    # The command's own output and exit status, untouched.
    assert (proc.returncode, proc.stdout) == (3, plain.stdout)
    assert proc.stdout == "610\nchild 610\n"
    first = program_line(proc.stderr)
    trace_dir, session = trace_report(proc.stderr)
    assert trace_dir == out
    assert not session_exists(session)
    # The summary, on stderr.
    assert re.search(r"events: [\d,]+ \(", proc.stderr)
    assert "discarded events: 0" in proc.stderr
    assert re.search(r"processes: \d+, threads: \d+", proc.stderr)
    # Other traced programs of this user may land in the session (it records them
    # all): fib leads the program's own processes, checked below through vpids.
    assert re.search(r"top functions by calls: .*\bfib \([\d,]+\)", proc.stderr)

    trace = read_trace(out)
    parent = events_of(trace, first["pid"])
    assert begins(parent, "fib") == FIB_15_CALLS
    check_balanced(parent)
    # The Python child inherited tracing through the environment.
    children = {e.ctx["vpid"] for e in trace.named("process_info")} - {first["pid"]}
    assert any(begins(events_of(trace, pid), "fib") == FIB_15_CALLS for pid in children)


def test_trace_options(tmp_path: Path) -> None:
    script = write(tmp_path, "work.py", WORKLOAD)
    out = tmp_path / "t"
    proc = run_plain(
        [*TRACE_CMD, "trace", "-o", str(out), "--events", "function", "--", PY, str(script)],
        tmp_path,
    )
    assert proc.returncode == 3
    pid = program_line(proc.stderr)["pid"]
    own = events_of(read_trace(out), pid)
    assert begins(own, "fib") == FIB_15_CALLS
    assert not own.named("c_call_begin")

    config = write(tmp_path, "monitor.txt", "[Python]\ntrace_mode = MONITORING\n")
    out2 = tmp_path / "t2"
    proc = run_plain(
        [*TRACE_CMD, "trace", "-o", str(out2), "--config", str(config), "--", PY, str(script)],
        tmp_path,
    )
    pid = program_line(proc.stderr)["pid"]
    own = events_of(read_trace(out2), pid)
    assert [e.fields["mode"] for e in own.named("mode_change")] == ["MONITORING"]
    assert not own.named("function_begin")

    out3 = tmp_path / "t3"
    proc = run_plain(
        [*TRACE_CMD, "trace", "-o", str(out3), "--mode", "STANDBY", "--no-summary", "--", PY,
         str(script)],
        tmp_path,
    )
    assert "events:" not in proc.stderr
    pid = program_line(proc.stderr)["pid"]
    own = events_of(read_trace(out3), pid)
    assert [e.fields["mode"] for e in own.named("mode_change")] == ["STANDBY"]


def test_trace_default_output_directory(tmp_path: Path) -> None:
    proc = run_plain([*TRACE_CMD, "trace", PY, "-c", "pass"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    trace_dir, _ = trace_report(proc.stderr)
    assert trace_dir.parent == tmp_path and trace_dir.name.startswith("pinsight-trace-")
    assert trace_dir.is_dir()


INTERRUPTIBLE = """
import os, signal, sys, time

def step():
    time.sleep(0.01)

# SIGTERM ends the program through Python, never in the middle of an event.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

try:
    step()  # at least one call is in the trace, however soon the signal comes
    print("ready", flush=True)
    while True:
        step()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    raise
"""


def _read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while needle not in data:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out waiting for {needle!r}; got {data!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            data += chunk
    return data


def test_ctrl_c_reaches_the_command_and_the_trace_is_kept(tmp_path: Path) -> None:
    script = write(tmp_path, "loop.py", INTERRUPTIBLE)
    out = tmp_path / "t"
    # A real terminal: Ctrl-C makes the terminal signal the foreground process group.
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child execs at once
        os.chdir(tmp_path)
        os.execve(TRACE_CMD[0], [*TRACE_CMD, "trace", "-o", str(out), "--", PY, str(script)],
                  clean_env())
    try:
        _read_until(fd, b"ready", 60)
        time.sleep(0.3)
        os.write(fd, b"\x03")
        output = _read_until(fd, b"now destroyed", 60)
        output += _read_until(fd, b"top functions", 60)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    text = output.decode(errors="replace")
    assert "interrupted" in text and "KeyboardInterrupt" in text
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGINT
    _, session = trace_report(text.replace("\r\n", "\n"))
    assert not session_exists(session)
    trace = read_trace(out)
    steps = collections.Counter(
        e.short for e in trace.events if e.fields.get("qualname") == "step"
    )
    assert steps["function_begin"] > 0
    assert steps["function_end"] == steps["function_begin"]


def test_sigterm_to_trace_alone_is_relayed_to_the_command(tmp_path: Path) -> None:
    script = write(tmp_path, "loop.py", INTERRUPTIBLE)
    out = tmp_path / "t"
    proc = subprocess.Popen(
        [*TRACE_CMD, "trace", "-o", str(out), "--", PY, str(script)],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)  # to the trace command only
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    _, session = trace_report(stderr)
    assert not session_exists(session)
    assert begins(read_trace(out), "step") > 0


BUSY = """
import signal

def f(n):
    return n if n < 2 else f(n - 1) + f(n - 2)

# SIGALRM's default action ends the process wherever it is: most of the time
# inside the tracer, often in the middle of writing an event.
signal.setitimer(signal.ITIMER_REAL, 0.1)
while True:
    f(20)
"""


def test_trace_survives_commands_killed_mid_event(tmp_path: Path) -> None:
    # A process killed while it writes an event leaves LTTng's per-user buffer with
    # a record that never completes; `trace` must still stop the session, keep the
    # trace and return the command's status.
    script = write(tmp_path, "busy.py", BUSY)
    for i in range(6):
        out = tmp_path / f"t{i}"
        cmd = [*TRACE_CMD, "trace", "-o", str(out), "--", PY, str(script)]
        # Its own process group: on a hang, the stuck lttng client goes too.
        with subprocess.Popen(
            cmd, cwd=tmp_path, env=clean_env(), stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        ) as proc:
            try:
                _, stderr = proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                pytest.fail(f"run {i}: pinsight-python trace hung after its command was killed")
        assert proc.returncode == 128 + signal.SIGALRM, stderr
        # The summary read the whole trace back (babeltrace2, streaming).
        assert re.search(r"top functions by calls: f \([\d,]+\)", stderr), stderr


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        ([], 2, "no command given"),
        (["--"], 2, "no command given"),
        (["--events", "calls", "--", "true"], 2, "--events: unknown event 'calls'"),
        (["--mode", "FAST", "--", "true"], 2, "--mode: unknown trace mode 'FAST'"),
        (["--config", "/nonexistent.txt", "--", "true"], 2, "no such configuration file"),
        (["--", "no-such-command-xyz"], 127, "no-such-command-xyz: command not found"),
        (["--", "./"], 126, "not an executable file"),
    ],
)
def test_trace_errors(tmp_path: Path, args: List[str], status: int, message: str) -> None:
    proc = run_plain([*TRACE_CMD, "trace", *args], tmp_path)
    assert proc.returncode == status
    assert proc.stdout == ""
    assert proc.stderr.count("error:") == 1 and message in proc.stderr, proc.stderr
    assert not list(tmp_path.glob("pinsight-trace-*"))  # no session was made


def test_trace_refuses_a_non_empty_output(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "old").write_text("x")
    proc = run_plain([*TRACE_CMD, "trace", "-o", "t", "--", "true"], tmp_path)
    assert proc.returncode == 2
    assert "exists and is not an empty directory" in proc.stderr


def test_trace_needs_no_lttng_command(tmp_path: Path) -> None:
    # A PATH holding only the command: no lttng client, no lttng-sessiond (a daemon
    # runs). trace talks to the daemon through liblttng-ctl, not the lttng command.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "true").symlink_to("/bin/true")
    env = clean_env(PATH=str(bindir))
    proc = run_plain([*TRACE_CMD, "trace", "-o", "t", "--", "true"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert "error" not in proc.stderr
    assert "trace written to" in proc.stderr


def test_startup_file_command(tmp_path: Path) -> None:
    proc = run_plain([*TRACE_CMD, "startup-file"], tmp_path)
    assert proc.returncode == 0
    path = Path(proc.stdout.strip())
    assert path == Path(ACTIVATE_PY) and path.is_file()
    assert path.parent == Path(pinsight_python.__file__).parent


TOGGLED_BY_SIGNALS = """
import os, signal, time
import pinsight_python

handled = []

def toggle(signo, frame):
    # Runs between two bytecodes of the loop below, often inside one of the calls.
    handled.append(signo)
    if len(handled) % 2:
        pinsight_python.deactivate()
    else:
        pinsight_python.activate()

signal.signal(signal.SIGUSR2, toggle)
open("ready", "w").close()
cycles = 0
deadline = time.monotonic() + 60
while not os.path.exists("stop") and time.monotonic() < deadline:
    pinsight_python.activate()
    pinsight_python.set_mode("MONITORING")
    pinsight_python.set_mode("TRACING")
    pinsight_python.deactivate()
    cycles += 1
pinsight_python.activate()
print("handled", len(handled) > SENT // 3, "active", pinsight_python.status()["active"], flush=True)
"""


def test_signal_handler_toggling_tracing_during_a_toggle_does_not_hang(tmp_path: Path) -> None:
    """A job script signals the program, whose handler switches tracing off and on
    while its main code does the same: a handler that ran inside activate() once
    waited for the lock its own thread held, for ever."""
    sent = 150
    write(tmp_path, "prog.py", TOGGLED_BY_SIGNALS.replace("SENT", str(sent)))
    job = write(tmp_path, "job.sh", f"""
{PY} prog.py &
pid=$!
until [ -e ready ]; do sleep 0.01; done
for i in $(seq {sent}); do kill -USR2 $pid; sleep 0.004; done
touch stop
wait $pid
echo status=$?
""")
    with subprocess.Popen(["bash", str(job)], cwd=tmp_path, env=clean_env(), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise AssertionError(f"the program hung\n{err[-3000:]}") from None
    assert out.splitlines() == ["handled True active True", "status=0"], err[-3000:]
    assert "Traceback" not in err and "failed" not in err, err[-3000:]
