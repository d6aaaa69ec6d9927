"""`pinsight-python attach` / `detach`: tracing programs that are already running.

The targets are plain programs that never import pinsight_python and have none of
our environment. Each runs until the test creates its stop file, then prints what it
computed and exits with a status of its own: its output and status must be those of
an unattached run, however many attach/detach cycles it went through.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, Iterator, Optional, Sequence, Tuple

import pytest

from pinsight_python.recording import target
from tests.tracing import (
    CALLSTACK_ID,
    CALLSTACK_XML,
    CLI,
    CROSSDOMAIN_ID,
    CROSSDOMAIN_XML,
    assert_clean,
    clean_env,
    cli_process,
    proc_status,
    read_trace,
    replay,
    wait_for,
)

_serial = itertools.count()
READY = "ready"

TARGET = textwrap.dedent(
    """
    import concurrent.futures, os, sys, threading, time

    kind, stop = sys.argv[1], sys.argv[2]

    def spin(n=20000):  # busy in Python, few calls: the trace stays small
        x = 0
        for i in range(n):
            x += i * i
        return x

    def until_stop(work):
        while not os.path.exists(stop):
            work()

    def nap():
        time.sleep(0.05)  # in C: the main thread runs no bytecode meanwhile

    results = []
    if kind == "sleep":
        print(READY, flush=True)
        until_stop(nap)
    elif kind == "busy":
        print(READY, flush=True)
        until_stop(spin)
    elif kind == "threads":
        def worker(i):
            until_stop(lambda: (spin(2000), time.sleep(0.01)))
            results.append(i)
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        print(READY, flush=True)
        until_stop(nap)
        for t in threads:
            t.join()
    elif kind == "pool":
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            print(READY, flush=True)
            def batch():
                results.extend(pool.map(spin, [2000] * 6))
                time.sleep(0.02)
            until_stop(batch)
    print(kind, "spin() =", spin(), "results:", len(results) > 0 or kind in ("sleep", "busy"))
    # Detached means gone: no sys.monitoring tool, no profile function left behind.
    monitoring = getattr(sys, "monitoring", None)
    print("tools:", monitoring and [monitoring.get_tool(i) for i in range(6)],
          "profile:", sys.getprofile())
    ours = [m for m in sys.modules if m.startswith("pinsight_python")]
    print("modules:", ours == [], file=sys.stderr)
    sys.exit(7)
    """
).replace("READY", repr(READY))


class Program:
    """A target program: started, waited for, stopped through its stop file."""

    def __init__(
        self,
        tmp: Path,
        kind: str,
        python: Sequence[str] = (sys.executable,),
        env: Optional[Dict[str, str]] = None,
    ) -> None:
        self.script = tmp / "target.py"
        self.script.write_text(TARGET)
        self.stop_file = tmp / f"stop-{kind}-{next(_serial)}"
        environ = clean_env()
        self.proc = subprocess.Popen(
            [*python, str(self.script), kind, str(self.stop_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**environ, **(env or {})},
            cwd=tmp,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip() == READY, (line, self.proc.stderr.read() if self.proc.stderr else "")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def finish(self, timeout: float = 60) -> Tuple[str, str, int]:
        self.stop_file.touch()
        out, err = self.proc.communicate(timeout=timeout)
        return out, err, self.proc.returncode


_baselines: Dict[str, Tuple[str, int]] = {}


def baseline(tmp: Path, kind: str) -> Tuple[str, int]:
    """Output and status of an unattached run (stderr says which modules it imported)."""
    if kind not in _baselines:
        program = Program(tmp, kind)
        time.sleep(0.3)
        out, err, status = program.finish()
        assert "modules: True" in err, err
        _baselines[kind] = (out, status)
    return _baselines[kind]


def check_trace(trace_dir: Path, pid: int, expect: str, readers: bool) -> None:
    trace = read_trace(trace_dir)
    assert trace.discarded == 0
    pids = {e.ctx["vpid"] for e in trace.events}
    assert pids == {pid}, pids  # the session tracked the target only
    infos = trace.named("process_info")
    assert len(infos) == 1 and infos[0].fields["pid"] == pid
    assert trace.functions()[expect] > 0, trace.functions().most_common(5)
    if not readers:
        return
    # Frames running at attach have no begin, frames running at detach no end: the
    # reader and the Trace Compass analyses take both without complaint.
    for command in (
        ["report", "--json", str(trace_dir)],
        ["flamegraph", "--folded", str(trace_dir)],
        ["export", str(trace_dir), "-o", "-"],
    ):
        res = cli_process(*command)
        assert res.returncode == 0 and res.stderr == "", (command, res.stderr)
    for path, callstack_id in ((CALLSTACK_XML, CALLSTACK_ID), (CROSSDOMAIN_XML, CROSSDOMAIN_ID)):
        _, result = replay(path, callstack_id, trace.events)
        assert_clean(result)


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "expect"),
    [("sleep", "nap"), ("busy", "spin"), ("threads", "spin"), ("pool", "spin")],
)
def test_attach_record_detach(tmp: Path, kind: str, expect: str) -> None:
    expected = baseline(tmp, kind)
    program = Program(tmp, kind)
    out_dir = tmp / "trace"
    try:
        rec = cli_process("attach", str(program.pid), "-o", str(out_dir), "--duration", "1",
                          "--no-summary")
        assert rec.returncode == 0, rec.stderr
        assert f"process {program.pid}: tracing on" in rec.stderr
        assert "1 s elapsed: detaching" in rec.stderr
        if kind == "busy":
            # Repeated cycles in the user's own session (none here: events go nowhere).
            for _ in range(2):
                on = cli_process("attach", str(program.pid))
                assert on.returncode == 0, on.stderr
                off = cli_process("detach", str(program.pid))
                assert off.returncode == 0, off.stderr
                assert f"process {program.pid}: tracing off" in off.stderr
    finally:
        out, err, status = program.finish()
    assert (out, status) == expected, err
    assert "modules: False" in err  # attached: pinsight_python was imported
    # The readers' checks are slow in Python: on the two traces with the most threads.
    check_trace(out_dir, program.pid, expect, readers=kind in ("threads", "pool"))


def test_attach_batched_payload(tmp: Path) -> None:
    expected = baseline(tmp, "threads")
    program = Program(tmp, "threads")
    out_dir = tmp / "trace"
    try:
        bad = cli_process("attach", str(program.pid), "--compact", "--batch")
        assert bad.returncode == 2 and "not allowed with argument" in bad.stderr, bad.stderr
        rec = cli_process("attach", str(program.pid), "-o", str(out_dir), "--duration", "1",
                          "--batch", "--no-summary")
        assert rec.returncode == 0, rec.stderr
    finally:
        out, err, status = program.finish()
    assert (out, status) == expected, err
    trace = read_trace(out_dir)
    assert trace.named("event_block") and not trace.named("function_begin")
    res = cli_process("report", "--json", "--top", "0", str(out_dir))
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    # Detach wrote every thread's last block: nothing is missing.
    assert report["missing_events"] == []
    (process,) = report["processes"]
    calls = {f["name"]: f["calls"] for f in process["functions"]}
    assert calls.get("spin", 0) > 0, sorted(calls.items(), key=lambda kv: -kv[1])[:5]


def test_several_processes_each_labelled(tmp: Path) -> None:
    # MPI ranks as Open MPI's launcher starts them: the rank is in their environment.
    ranks = [
        Program(tmp, "sleep", env={"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": "2"})
        for r in range(2)
    ]
    out_dir = tmp / "ranks"
    try:
        res = cli_process("attach", *(str(p.pid) for p in ranks), "-o", str(out_dir),
                          "--duration", "1")
        assert res.returncode == 0, res.stderr
        assert "processes: 2" in res.stderr  # the summary
    finally:
        outcomes = [p.finish() for p in ranks]
    assert [(out, status) for out, _, status in outcomes] == [baseline(tmp, "sleep")] * 2
    infos = read_trace(out_dir).named("process_info")
    labels = sorted((e.fields["pid"], e.fields["mpi_rank"], e.fields["mpi_size"]) for e in infos)
    assert labels == sorted((p.pid, r, 2) for r, p in enumerate(ranks))


def test_recording_ends_on_ctrl_c(tmp: Path) -> None:
    program = Program(tmp, "busy")
    env = clean_env()
    recorder = subprocess.Popen(
        [*CLI, "attach", str(program.pid), "-o", str(tmp / "trace"), "--no-summary"],
        stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert recorder.stderr is not None
        lines = [recorder.stderr.readline() for _ in range(2)]
        assert "recording until Ctrl-C" in lines[1], lines
        recorder.send_signal(signal.SIGINT)  # as a job script's `kill -INT $!` does
        rest = recorder.communicate(timeout=60)[1]
    finally:
        out, _, status = program.finish()
    assert recorder.returncode == 0, rest
    assert "SIGINT received: detaching" in rest and "trace written to" in rest
    assert (out, status) == baseline(tmp, "busy")
    assert read_trace(tmp / "trace").functions()["spin"] > 0


def test_detached_process_reacts_to_sigusr1_as_before(tmp: Path) -> None:
    # Our control thread takes SIGUSR1 (configuration reload) while attached; once
    # detached, the signal's default action (termination) is back.
    program = Program(tmp, "sleep")
    try:
        for command in ("attach", "detach"):
            res = cli_process(command, str(program.pid))
            assert res.returncode == 0, res.stderr
        os.kill(program.pid, signal.SIGUSR1)
        program.proc.wait(timeout=30)
    finally:
        program.proc.kill()
        program.proc.communicate()
    assert program.proc.returncode == -signal.SIGUSR1


def test_main_thread_blocked_in_c_call(tmp: Path) -> None:
    """A main thread blocked in a C call (a read of stdin, here) runs no Python code:
    attach gives up after --timeout and withdraws its request; once the call
    returns, the late pending call finds nothing to do and imports nothing."""
    script = tmp / "blocked.py"
    script.write_text(
        "import sys\nprint('ready', flush=True)\nline = sys.stdin.readline()\n"
        "print(line.strip(), sorted(m for m in sys.modules if m.startswith('pinsight_python')))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        res = cli_process("attach", str(proc.pid), "--timeout", "1.5")
        assert res.returncode == 1, res.stderr
        # Given up after its --timeout, not at some later moment: it says which.
        assert "ran no Python code for 1.5 s" in res.stderr, res.stderr
        assert "blocked in a C call" in res.stderr and "withdrawn" in res.stderr, res.stderr
    finally:
        out, _ = proc.communicate("go\n", timeout=30)
    assert (out, proc.returncode) == ("go []\n", 0)


@pytest.mark.parametrize("existing", [False, True], ids=["new-dir", "empty-dir"])
def test_recording_that_attached_nothing_leaves_no_output(tmp: Path, existing: bool) -> None:
    """attach -o DIR that times out records nothing: no directory of LTTng's is left
    behind, and an empty directory the user named stays, empty."""
    script = tmp / "blocked.py"
    script.write_text("import sys\nprint('ready', flush=True)\nsys.stdin.readline()\n")
    output = tmp / "never-written"
    if existing:
        output.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        res = cli_process("attach", str(proc.pid), "-o", str(output), "--duration", "5",
                          "--timeout", "1.5")
        assert res.returncode == 1, res.stderr
        assert "withdrawn" in res.stderr, res.stderr
        assert "nothing was recorded" in res.stderr and "trace written" not in res.stderr
    finally:
        proc.communicate("go\n", timeout=30)
    if existing:
        assert output.is_dir() and not any(output.iterdir())
    else:
        assert not output.exists()


# ---------------------------------------------------------------------------- refusals


def refused(pid: int, *extra: str) -> str:
    res = cli_process("attach", str(pid), *extra)
    assert res.returncode == 1, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pinsight-python attach: error: "), lines
    return lines[0]


def test_refuses_a_process_that_is_not_python() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert "is not a Python interpreter" in refused(proc.pid)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_refuses_a_process_that_exited() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert "no process" in refused(proc.pid)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    stat = Path(f"/proc/{zombie.pid}/stat")
    while not stat.read_text().split(") ")[1].startswith("Z"):
        time.sleep(0.01)
    try:
        assert "has exited" in refused(zombie.pid)
    finally:
        zombie.wait()


def test_refuses_a_process_another_tracer_holds(tmp: Path) -> None:
    program = Program(tmp, "sleep")
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import ctypes, sys
            libc = ctypes.CDLL(None, use_errno=True)
            PTRACE_SEIZE = 0x4206  # traces without stopping the tracee
            if libc.ptrace(PTRACE_SEIZE, {program.pid}, None, None) != 0:
                sys.exit("seize failed: %d" % ctypes.get_errno())
            print("held", flush=True)
            sys.stdin.read()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        line = refused(program.pid)
        assert f"already traced by process {holder.pid}" in line
    finally:
        holder.communicate("")
        out, err, status = program.finish()
    assert (out, status) == baseline(tmp, "sleep")
    assert "modules: True" in err


def test_refuses_another_users_process_without_cap_sys_ptrace() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.fail("this test runs as root with setpriv (util-linux), as CI does")
    proc = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             "sleep", "30"])
    try:
        # Until setpriv has switched users (a loaded machine may take longer than any sleep).
        wait_for(lambda: proc_status(proc.pid, "Uid") == "65534", timeout=60,
                 what="setpriv to switch to user 65534")
        res = subprocess.run(
            ["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace",
             *CLI, "attach", str(proc.pid)],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert res.returncode == 1, res
        assert "belongs to user id 65534" in res.stderr and len(res.stderr.splitlines()) == 1
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_yama_ptrace_scope(tmp: Path) -> None:
    scope = tmp / "ptrace_scope"
    scope.write_text("0\n")
    assert target.yama_refusal(1, str(scope)) == ""
    scope.write_text("3\n")
    assert "ptrace is disabled" in target.yama_refusal(1, str(scope))
    # Without CAP_SYS_PTRACE, scope 1 allows descendants only and scope 2 nobody.
    check = (
        "import sys; from pinsight_python.recording import target as a; "
        f"open({str(scope)!r}, 'w').write(sys.argv[1]); "
        "print(a.yama_refusal(1, " + repr(str(scope)) + ") or 'allowed')"
    )
    for value, expected in (("1", "only its descendants"), ("2", "only root")):
        res = subprocess.run(
            ["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace",
             sys.executable, "-c", check, value],
            capture_output=True, text=True, check=True,
        )
        assert expected in res.stdout, res


def test_refuses_an_interpreter_that_cannot_import_us(tmp: Path) -> None:
    # -S: no site-packages, so no pinsight_python: the probe starts the interpreter
    # the same way and finds that out before anything is injected.
    program = Program(tmp, "sleep", python=(sys.executable, "-S"))
    try:
        line = refused(program.pid)
        assert "cannot import pinsight_python" in line and "nothing was injected" in line
    finally:
        out, err, status = program.finish()
    assert (out, status) == baseline(tmp, "sleep")
    assert "modules: True" in err


def test_refuses_unsupported_versions(tmp: Path) -> None:
    old = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv"))
    pythons = sorted(old.glob("versions/3.7.*/bin/python3.7"))
    if not pythons:
        pytest.fail("no CPython 3.7 in pyenv: the machine's interpreters changed")
    program = Program(tmp, "sleep", python=(str(pythons[0]),))
    try:
        assert "runs CPython 3.7: pinsight-python needs 3.8+" in refused(program.pid)
    finally:
        program.finish()
