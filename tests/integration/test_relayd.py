"""Collection through lttng-relayd: sessions that stream their trace over the network.

Each test starts its own relay daemon (recording/relayd.py's RelayDaemon) on loopback, on free
ports, writing under the test's tmp_path: another relay daemon (on the default
ports or any other) is never touched. Sessions stream to it, traced Python
processes run, and the trace the relay daemon wrote is read back whole with
babeltrace2 (tests/tracing.py) and with ``pinsight-python report``.

The session records every traced process of this user that runs meanwhile, so
checks select the test's own processes by pid.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import pytest

from pinsight_python.recording import lttng
from pinsight_python.recording import relayd as relay
from tests.tracing import (
    CLI,
    Trace,
    check_balanced,
    clean_env,
    fresh_group,
    read_trace,
    report_json,
    session_exists,
)

PY = sys.executable
HOSTNAME = socket.gethostname()

# Two different workloads. Each activates tracing itself and prints its pid.
RECURSIVE = """
import json, os
import pinsight_python
pinsight_python.activate()

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

fib(17)
print(json.dumps({"pid": os.getpid()}))
"""
FIB_17_CALLS = 5167  # 2 * F(18) - 1

THREADED = """
import json, os, threading
import pinsight_python
pinsight_python.activate()

def square(i):
    return i * i

def cube(i):
    return i * i * i

def worker():
    for i in range(4000):
        cube(i)

t = threading.Thread(target=worker)
t.start()
for i in range(6000):
    square(i)
t.join()
print(json.dumps({"pid": os.getpid()}))
"""
SQUARE_CALLS = 6000
CUBE_CALLS = 4000

# For `pinsight-python trace`: activated through the environment, with a Python child.
WITH_CHILD = """
import json, os, subprocess, sys

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

fib(15)
if len(sys.argv) > 1:
    child = subprocess.run([sys.executable, __file__], capture_output=True, text=True)
    print(child.stdout.strip())
print(json.dumps({"pid": os.getpid()}))
sys.exit(3)
"""
FIB_15_CALLS = 1973


def write(tmp_path: Path, name: str, code: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return path


def pids(stdout: str) -> List[int]:
    return [json.loads(line)["pid"] for line in stdout.splitlines() if line.startswith("{")]


def own(trace: Trace, pid: int) -> Trace:
    return Trace(trace.path, [e for e in trace.events if e.ctx["vpid"] == pid], trace.discarded)


def begins(trace: Trace, qualname: str) -> int:
    return trace.functions()[qualname]


def calls_in_report(report: Dict[str, object], vpid: int) -> Dict[str, int]:
    """qualname -> calls, for the Python functions of process vpid (all threads)."""
    processes = report["processes"]
    assert isinstance(processes, list)
    for proc in processes:
        if proc["vpid"] == vpid:
            assert proc["host"] == HOSTNAME
            return {f["qualname"]: f["calls"] for f in proc["functions"] if f["kind"] == "python"}
    raise AssertionError(f"process {vpid} missing from the report")


def run_cli(
    args: Sequence[str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, env=clean_env(),
        check=False, timeout=timeout,
    )


@pytest.fixture
def relayd(tmp_path: Path) -> Iterator[relay.RelayDaemon]:
    # A missing lttng-relayd raises RelaydError here: the test errors, never skips.
    daemon = relay.RelayDaemon(tmp_path / "relayd-output").start()
    try:
        yield daemon
    finally:
        daemon.stop()


# ---------------------------------------------------------------------------- Session


def test_two_processes_stream_to_one_relayd(tmp_path: Path, relayd: relay.RelayDaemon) -> None:
    recursive = write(tmp_path, "recursive.py", RECURSIVE)
    threaded = write(tmp_path, "threaded.py", THREADED)
    gid, run_as = fresh_group()  # these two processes only, whatever runs beside them
    session = lttng.Session(set_url=relayd.url, relayd_output=relayd.output, track_vgid=gid)
    assert session.network and session.output is None
    with session:
        # Both at once: their streams interleave in the session's per-user buffers.
        procs = [
            subprocess.Popen([PY, str(script)], cwd=tmp_path, env=clean_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=run_as)  # noqa: PLW1509 (a setgid only, before exec)
            for script in (recursive, threaded)
        ]
        outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stderr
    pid_recursive, pid_threaded = (pids(out)[0] for out, _ in outputs)
    assert not session_exists(session.name)

    # Where the relay daemon wrote it: OUTPUT/HOSTNAME/SESSION-YYYYmmdd-HHMMSS.
    trace_dir = session.trace_dir()
    assert trace_dir.parent == relayd.output / HOSTNAME
    assert re.fullmatch(re.escape(session.name) + r"-\d{8}-\d{6}", trace_dir.name)
    assert relay.find_relayd_traces(relayd.output, session.name) == [trace_dir]
    assert relay.find_relayd_traces(relayd.output, session.name, HOSTNAME) == [trace_dir]
    assert relay.find_relayd_traces(relayd.output, session.name, "elsewhere") == []

    # Whole: every event of both processes, none discarded, every stack balanced.
    trace = read_trace(trace_dir)
    assert trace.discarded == 0
    first = own(trace, pid_recursive)
    assert begins(first, "fib") == FIB_17_CALLS
    assert len(first.named("function_end")) == len(first.named("function_begin"))
    assert len(first.named("process_info")) == 1
    check_balanced(first)
    second = own(trace, pid_threaded)
    assert begins(second, "square") == SQUARE_CALLS
    assert begins(second, "cube") == CUBE_CALLS
    assert "fib" not in second.functions() and "square" not in first.functions()
    threads = {e.ctx["vtid"] for e in second.named("function_begin")
               if e.fields["qualname"] in ("square", "cube")}
    assert len(threads) == 2  # square on the main thread, cube on the worker
    assert len(second.named("thread_start")) == 2
    check_balanced(second)

    # `report` over the relay daemon's whole output directory: both processes.
    report = report_json(relayd.output, "--top", "0")
    assert report["events"] == len(trace.counted)
    assert report["discarded"] == {"events": 0, "packets": 0, "records": 0, "ranges": []}
    assert calls_in_report(report, pid_recursive)["fib"] == FIB_17_CALLS
    calls = calls_in_report(report, pid_threaded)
    assert (calls["square"], calls["cube"]) == (SQUARE_CALLS, CUBE_CALLS)


def test_ctrl_and_data_urls(tmp_path: Path, relayd: relay.RelayDaemon) -> None:
    script = write(tmp_path, "recursive.py", RECURSIVE.replace("fib(17)", "fib(10)"))
    gid, run_as = fresh_group()
    session = lttng.Session(
        ctrl_url=f"tcp://127.0.0.1:{relayd.ctrl_port}",
        data_url=f"tcp://127.0.0.1:{relayd.data_port}",
        relayd_output=relayd.output,
        track_vgid=gid,
    )
    with session:
        proc = subprocess.run([PY, str(script)], cwd=tmp_path, env=clean_env(),
                              capture_output=True, text=True, check=True, timeout=120,
                              preexec_fn=run_as)
    trace = read_trace(session.trace_dir())
    mine = own(trace, pids(proc.stdout)[0])
    assert begins(mine, "fib") == 177
    assert trace.discarded == 0
    check_balanced(mine)


def test_session_to_an_absent_relayd_fails_clearly(tmp_path: Path) -> None:
    port = relay._free_ports("127.0.0.1", 1)[0]  # nothing listens there
    session = lttng.Session(set_url=f"net://127.0.0.1:{port}:{port + 1}")
    with pytest.raises(lttng.LttngError, match=rf"cannot reach the LTTng relay daemon at "
                       rf"127\.0\.0\.1 port {port}: Connection refused"):
        session.create()
    assert not session_exists(session.name)


# ---------------------------------------------------------------------------- pinsight-python trace


def test_trace_command_streams_to_relayd(tmp_path: Path, relayd: relay.RelayDaemon) -> None:
    script = write(tmp_path, "app.py", WITH_CHILD)
    proc = run_cli(["trace", "--relayd", relayd.spec, "--", PY, str(script), "kids"], tmp_path)
    assert proc.returncode == 3, proc.stderr  # the command's status
    child_pid, parent_pid = pids(proc.stdout)
    m = re.search(
        r"trace streamed to the relay daemon at (\S+) \(LTTng session (\S+), now destroyed\); "
        r"on the relay host it is in RELAYD_OUTPUT/(\S+)/(\S+)-YYYYmmdd-HHMMSS",
        proc.stderr,
    )
    assert m, proc.stderr
    assert m.group(1) == relayd.url
    name = m.group(2)
    assert (m.group(3), m.group(4)) == (HOSTNAME, name)
    assert not session_exists(name)
    assert proc.stderr.count("\n") == 1  # that one line: no summary of a remote trace
    assert not list(tmp_path.glob("pinsight-trace-*"))  # nothing written locally

    [trace_dir] = relay.find_relayd_traces(relayd.output, name)
    assert trace_dir.parent == relayd.output / HOSTNAME
    trace = read_trace(trace_dir)
    assert trace.discarded == 0
    for pid in (parent_pid, child_pid):
        mine = own(trace, pid)
        assert begins(mine, "fib") == FIB_15_CALLS
        check_balanced(mine)
    report = report_json(trace_dir, "--top", "0")
    for pid in (parent_pid, child_pid):
        assert calls_in_report(report, pid)["fib"] == FIB_15_CALLS


MALFORMED = "expected HOST[:CTRL_PORT[:DATA_PORT]], e.g. collector, 10.0.0.5:5342:5343 or [fd00::5]"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("collector:ctrl", "control port 'ctrl' is not a port number (1-65535)"),
        ("collector:5342:70000", "data port '70000' is not a port number (1-65535)"),
        ("collector:0", "control port '0' is not a port number (1-65535)"),
        ("collector:5342:5343:5344",
         "too many ':' (HOST, then at most a control and a data port)"),
        ("fd00::5", "an IPv6 address goes in brackets: [ADDRESS]"),
        ("fd00:0:0:0:0:0:0:5", "an IPv6 address goes in brackets: [ADDRESS]"),
        ("[fd00::5", "'[' without ']' around the IPv6 address"),
        ("[collector]:5342", "'collector' is not an IPv6 address"),
        ("", "no host given"),
        ("coll ector", "'coll ector' is not a host name or address"),
        ("collector:6000:6000", "the control and data ports are both 6000"),
    ],
)
def test_trace_relayd_malformed(tmp_path: Path, value: str, reason: str) -> None:
    marker = tmp_path / "ran"
    proc = run_cli(["trace", "--relayd", value, "--", "touch", str(marker)], tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines == [f"pinsight-python trace: error: --relayd {value!r}: {reason}; {MALFORMED}"]
    assert not marker.exists()


def test_trace_relayd_excludes_output(tmp_path: Path) -> None:
    proc = run_cli(["trace", "--relayd", "collector", "-o", "t", "--", "true"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "pinsight-python trace: error: -o and --relayd exclude each other: with --relayd, "
        "the relay daemon writes the trace under its own output directory"
    ]


def test_trace_relayd_unreachable(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    port = relay._free_ports("127.0.0.1", 1)[0]
    proc = run_cli(["trace", "--relayd", f"127.0.0.1:{port}", "--", "touch", str(marker)],
                   tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"pinsight-python trace: error: cannot reach the LTTng relay daemon at 127.0.0.1 "
        f"port {port}: Connection refused (is lttng-relayd running there, listening on that "
        "port, and is the port open in the firewall?)"
    ]
    assert not marker.exists()


def test_trace_help_documents_relayd(tmp_path: Path) -> None:
    proc = run_cli(["trace", "--help"], tmp_path)
    assert proc.returncode == 0
    assert "--relayd HOST[:CTRL_PORT[:DATA_PORT]]" in proc.stdout
    assert "pinsight-python trace --relayd collector -- python sim.py" in proc.stdout


# ---------------------------------------------------------------------------- helpers


def test_relay_daemons_side_by_side_and_stopped(tmp_path: Path) -> None:
    def listening(port: int) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return True
        except OSError:
            return False

    with relay.RelayDaemon(tmp_path / "a") as a, relay.RelayDaemon(tmp_path / "b") as b:
        ports_a = [a.ctrl_port, a.data_port, a.live_port]
        ports_b = [b.ctrl_port, b.data_port, b.live_port]
        assert len(set(ports_a + ports_b)) == 6
        assert a.url == f"net://127.0.0.1:{a.ctrl_port}:{a.data_port}"
        assert a.spec == f"127.0.0.1:{a.ctrl_port}:{a.data_port}"
        assert a.live_url == f"net://127.0.0.1:{a.live_port}"
        process: Optional[subprocess.Popen[bytes]] = a.process
        assert process is not None
        a.stop()
        assert process.returncode is not None  # reaped
        assert not any(listening(p) for p in ports_a)
        assert all(listening(p) for p in ports_b)  # the other daemon is untouched
    assert not any(listening(p) for p in ports_b)
