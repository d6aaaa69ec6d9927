"""attach never harms its target (issue 30): whatever fails, the program runs on with
its own output and exit status, and no interrupted system call surfaces as an error.

The targets sleep in short system calls, the shapes a ptrace stop can break: a loop of
time.sleep(0.002) (clock_nanosleep or select), a blocking read of a pipe, select.
Each failure is forced at each step of our injector (its test hooks), or made real
(a full pending-call queue, a refused ptrace, a target that exits, a killed attach).
gdb is never run: a gdb on PATH that records its calls would fail the tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, Iterator, List, Sequence, Tuple

import pytest

from pinsight_python.recording import elf_symbols, injection
from pinsight_python.recording import target as attach_target
from tests.tracing import CLI, clean_env, proc_status, read_trace, wait_for

# From 3.14 attach goes through sys.remote_exec (PEP 768), not our injector: the tests
# of the injector's stages and of its pending call run on 3.8-3.13 (and the injector
# itself on pyenv's 3.8-3.13 from any venv, test_injector_on_every_interpreter).
REMOTE_EXEC = sys.version_info >= attach_target.REMOTE_EXEC
injector_only = pytest.mark.skipif(
    REMOTE_EXEC, reason="3.14+ attaches through sys.remote_exec, not the injector"
)
KINDS = ("sleep", "read", "select")
STAGES = ("seized", "data-page", "code-page", "stack-written")

TARGET = textwrap.dedent(
    """
    import os, select, sys, threading, time

    kind, stop = sys.argv[1], sys.argv[2]
    r, w = os.pipe()

    def feed():  # a byte every 2 ms, then "!" once the test says stop
        while not os.path.exists(stop):
            time.sleep(0.002)
            os.write(w, b"x")
        os.write(w, b"!")

    loops = 0
    if kind != "sleep":
        threading.Thread(target=feed, daemon=True).start()
    print("ready", flush=True)
    if kind == "sleep":
        while not os.path.exists(stop):
            time.sleep(0.002)
            loops += 1
    elif kind == "read":
        while os.read(r, 1) != b"!":
            loops += 1
    else:
        while True:
            ready, _, _ = select.select([r], [], [], 0.002)
            if ready and os.read(r, 1) == b"!":
                break
            loops += 1
    print(kind, "looped:", loops > 0,
          "modules:", sorted(m for m in sys.modules if m.startswith("pinsight_python")))
    sys.exit(7)
    """
)


@pytest.fixture
def no_gdb(tmp_path: Path) -> Iterator[Dict[str, str]]:
    """An environment whose PATH has a gdb that records being run, and fails."""
    bin_dir = tmp_path / "poisoned-bin"
    bin_dir.mkdir()
    calls = tmp_path / "gdb-calls"
    gdb = bin_dir / "gdb"
    gdb.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexit 1\n")
    gdb.chmod(0o755)
    yield clean_env(PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert not calls.exists(), f"gdb was run: {calls.read_text()}"


class Target:
    """A program sleeping in short system calls until its stop file appears."""

    def __init__(self, tmp: Path, kind: str, python: Sequence[str] = (sys.executable,)) -> None:
        script = tmp / "target.py"
        script.write_text(TARGET)
        self.kind = kind
        self.stop_file = tmp / f"stop-{kind}-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [*python, str(script), kind, str(self.stop_file)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "ready\n"
        time.sleep(0.1)  # in its loop

    @property
    def pid(self) -> int:
        return self.proc.pid

    def finish(self, imported: bool = False) -> None:
        """It ends as an untouched run would (or with pinsight_python imported)."""
        self.stop_file.touch()
        out, err = self.proc.communicate(timeout=60)
        modules = "['pinsight_python', " if imported else "[]"
        # Activated outside a session, tracing says once that nothing records it.
        ours = [ln for ln in err.splitlines() if "but no LTTng session records" not in ln]
        assert (self.proc.returncode, ours) == (7, []), (self.proc.returncode, err)
        assert out.startswith(f"{self.kind} looped: True modules: {modules}"), out


def attach(
    *args: str, env: Dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "attach", *args], capture_output=True, text=True, timeout=timeout, env=env,
        check=False,
    )


def tracer_of(pid: int) -> int:
    return int(proc_status(pid, "TracerPid"))


@pytest.mark.parametrize("kind", KINDS)
def test_attach_and_detach_without_gdb(tmp_path: Path, kind: str, no_gdb: Dict[str, str]) -> None:
    target = Target(tmp_path, kind)
    try:
        # The README's example: record a plain running program for a while.
        res = attach(str(target.pid), "-o", str(tmp_path / "trace"), "--duration", "1",
                     "--no-summary", env=no_gdb)
        assert res.returncode == 0, res.stderr
        trace = read_trace(tmp_path / "trace")
        assert {e.ctx["vpid"] for e in trace.events} == {target.pid}
        assert trace.named("c_call_begin"), "no native call (time.sleep, os.read) recorded"
        for _ in range(2):  # the code page of the first injection serves the next ones
            on = attach(str(target.pid), env=no_gdb)
            assert on.returncode == 0, on.stderr
            off = subprocess.run([*CLI, "detach", str(target.pid)], capture_output=True,
                                 text=True, env=no_gdb, check=False, timeout=120)
            assert off.returncode == 0, off.stderr
        maps = [line.split() for line in Path(f"/proc/{target.pid}/maps").read_text().splitlines()]
        code_pages = [m for m in maps if len(m) == 5 and m[1] == "r-xp" and m[4] == "0"]
        # sys.remote_exec maps nothing into the target.
        assert len(code_pages) == (0 if REMOTE_EXEC else 1), code_pages
    finally:
        target.finish(imported=True)


@injector_only
@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_forced_failure_leaves_the_target_as_it_was(
    tmp_path: Path, kind: str, stage: str, no_gdb: Dict[str, str]
) -> None:
    target = Target(tmp_path, kind)
    try:
        res = attach(str(target.pid), env={**no_gdb, "PINSIGHT_PYTHON_INJECT_FAIL": stage})
        assert res.returncode == 1, res.stderr
        assert f"could not inject: stopped at stage {stage}" in res.stderr, res.stderr
        assert tracer_of(target.pid) == 0
        time.sleep(0.2)  # the target goes on sleeping in its system calls meanwhile
    finally:
        target.finish()


@injector_only
@pytest.mark.parametrize("stage", ("seized", "data-page", "stack-written"))
def test_killed_attach_leaves_the_target_as_it_was(
    tmp_path: Path, stage: str, no_gdb: Dict[str, str]
) -> None:
    """SIGKILL to attach while the injector holds the target: the injector notices and
    lets it go unchanged; SIGKILL to the injector itself: the kernel lets it go, and
    nothing of ours was left half-way in its registers."""
    for victim in ("attach", "injector"):
        target = Target(tmp_path, "sleep")
        pid = target.pid
        try:
            recorder = subprocess.Popen(
                [*CLI, "attach", str(target.pid)],
                env={**no_gdb, "PINSIGHT_PYTHON_INJECT_PAUSE": f"{stage}:20"},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            wait_for(lambda: tracer_of(pid) != 0)  # noqa: B023 (called at once)
            injector = tracer_of(pid)
            time.sleep(0.3)  # at the paused stage
            os.kill(recorder.pid if victim == "attach" else injector, signal.SIGKILL)
            recorder.wait(timeout=30)
            wait_for(lambda: tracer_of(pid) == 0, timeout=10)  # noqa: B023
            time.sleep(0.2)
        finally:
            target.finish()
@injector_only
def test_full_pending_call_queue(tmp_path: Path, no_gdb: Dict[str, str]) -> None:
    """CPython's pending-call queue is full: Py_AddPendingCall says so, attach says so,
    and the program's own pending calls all run, in order, when its main thread can."""
    script = tmp_path / "full.py"
    script.write_text(textwrap.dedent("""
        import ctypes, sys, threading, time
        CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
        ran = []
        callback = CALLBACK(lambda arg: ran.append(arg) or 0)
        add = ctypes.pythonapi.Py_AddPendingCall
        add.argtypes, add.restype = [CALLBACK, ctypes.c_void_p], ctypes.c_int
        queued = []
        def fill():
            # Once the main thread is blocked in its read, which runs no pending call.
            main = "/proc/self/task/%d/syscall" % threading.main_thread().native_id
            while not open(main).read().startswith("0 "):
                time.sleep(0.01)
            while add(callback, len(queued) + 1) == 0:
                queued.append(len(queued) + 1)
            print("full", flush=True)
        threading.Thread(target=fill).start()
        sys.stdin.readline()
        sys.stdout.write("ran in order: %s %s\\n" % (ran == queued, len(ran) > 0))
        print(sorted(m for m in sys.modules if m.startswith("pinsight_python")))
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "full\n"
        res = attach(str(proc.pid), "--timeout", "2", env=no_gdb)
        assert res.returncode == 1, res.stderr
        assert "queue is full" in res.stderr, res.stderr
    finally:
        out, _ = proc.communicate("go\n", timeout=60)
    assert (out, proc.returncode) == ("ran in order: True True\n[]\n", 0)


def test_refused_ptrace(tmp_path: Path) -> None:
    """The kernel refuses ptrace (a process that made itself non-dumpable, another
    user's): the injector says so and has touched nothing."""
    script = tmp_path / "undumpable.py"
    script.write_text(textwrap.dedent("""
        import ctypes, select, sys, time
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
        print("ready", flush=True)
        # Until the test is done (a fixed 0.2 s could end before a loaded machine ran
        # the injector, which then found no process instead of being refused).
        while not select.select([sys.stdin], [], [], 0)[0]:
            time.sleep(0.002)
        print("done")
        sys.exit(3)
    """))
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    proc = subprocess.Popen([*as_nobody, "/usr/bin/python3", "-c", script.read_text()],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=clean_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        res = subprocess.run(
            [*as_nobody, "--inh-caps=-all", str(injection.injector_path()), str(proc.pid),
             "1", "1", "1", "0x0000000000000000"],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert res.returncode == 1 and res.stdout.startswith("error: "), res
        assert "not permitted" in res.stdout or "Operation not permitted" in res.stdout, res
    finally:
        out, _ = proc.communicate("go\n", timeout=60)
    assert (out, proc.returncode) == ("done\n", 3)
@injector_only
def test_target_that_exits_meanwhile(tmp_path: Path, no_gdb: Dict[str, str]) -> None:
    script = tmp_path / "leaving.py"
    script.write_text(textwrap.dedent("""
        import os, threading, time
        print("ready", flush=True)
        threading.Timer(0.5, lambda: os._exit(5)).start()
        while True:
            time.sleep(0.002)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=clean_env())
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    res = attach(str(proc.pid), env={**no_gdb, "PINSIGHT_PYTHON_INJECT_PAUSE": "seized:2"})
    proc.communicate(timeout=30)
    assert proc.returncode == 5
    assert res.returncode == 1, res.stderr
    assert f"process {proc.pid}" in res.stderr and "Traceback" not in res.stderr, res.stderr


def interpreters() -> List[Tuple[str, str]]:
    """Every interpreter the injector serves here: pyenv's 3.8 to 3.13 (shared
    libpython, PIE) and Debian's (static libpython, not PIE)."""
    root = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv"))
    found = []
    for minor in range(8, 14):
        paths = sorted(root.glob(f"versions/3.{minor}.*/bin/python3.{minor}"))
        if not paths:
            pytest.fail(f"no CPython 3.{minor} in pyenv: the machine's interpreters changed")
        found.append((f"3.{minor}", str(paths[-1])))
    found.append(("debian", "/usr/bin/python3"))
    return found


@pytest.mark.skipif(not REMOTE_EXEC, reason="sys.remote_exec exists from 3.14")
def test_remote_debug_disabled_leaves_the_target_as_it_was(
    tmp_path: Path, no_gdb: Dict[str, str]
) -> None:
    """3.14+: a target started with -X disable_remote_debug is refused before anything
    touches it, and runs on as untouched."""
    target = Target(tmp_path, "sleep", python=(sys.executable, "-X", "disable_remote_debug"))
    try:
        res = attach(str(target.pid), env=no_gdb)
        assert res.returncode == 1, res.stderr
        assert "disable_remote_debug" in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert tracer_of(target.pid) == 0
    finally:
        target.finish()


@pytest.mark.parametrize("kind", KINDS)
def test_injector_on_every_interpreter(tmp_path: Path, kind: str) -> None:
    """The injector alone, on each interpreter: the code runs once in the main thread,
    the program's output and status are unchanged."""
    for name, python in interpreters():
        target = Target(tmp_path, kind, python=(python,))
        marker = tmp_path / f"ran-{name}"
        try:
            addresses, syscall, _ = elf_symbols.resolve(
                target.pid, ("Py_AddPendingCall", "PyRun_SimpleString")
            )
            code = (f"open({str(marker)!r}, 'a').write(__import__('threading')"
                    ".current_thread().name + ' ' + hex(0x0000000000000000) + '\\n')")
            res = subprocess.run(
                [str(injection.injector_path()), str(target.pid),
                 f"{addresses['Py_AddPendingCall']:x}", f"{addresses['PyRun_SimpleString']:x}",
                 f"{syscall:x}", code],
                capture_output=True, text=True, timeout=60, check=False,
            )
            assert res.returncode == 0 and res.stdout.startswith("ok tid="), (name, res)
            page = res.stdout.split("page=")[1].split()[0]
            wait_for(marker.exists)
            time.sleep(0.05)
            assert marker.read_text() == f"MainThread {hex(int(page, 16))}\n", name
        finally:
            target.finish()
