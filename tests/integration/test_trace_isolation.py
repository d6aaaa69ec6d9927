"""``pinsight-python trace`` records its own run only and leaves nothing behind.

Real runs of the CLI, side by side or killed the way schedulers kill jobs; traces
read back with babeltrace2. No test here isolates anything itself: isolation is what
is under test.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, List

from tests.tracing import CLI, MPI_ENV, check_balanced, clean_env, read_trace, report_json

TRACE = [sys.executable, "-m", "pinsight_python.cli", "trace"]


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def sessions() -> List[str]:
    out = subprocess.run(["lttng", "list"], capture_output=True, text=True, check=False).stdout
    return re.findall(r"^\s*\d+\) (\S+) ", out, re.M)


def run_processes(marker: str) -> List[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


# Its own function, in its own process and in a forked child, for a while.
PROGRAM = """
import os, sys, time

def only_{tag}():
    return 1

deadline = time.monotonic() + float(sys.argv[1])
calls = 0
while time.monotonic() < deadline:
    only_{tag}(); calls += 1
    time.sleep(0.0005)
pid = os.fork()
if pid == 0:
    for _ in range(25):
        only_{tag}()
    sys.stdout.flush()
    sys.exit(0)  # unwinds (os._exit would leave its own call open)
os.waitpid(pid, 0)
print(calls + 25)
"""


def test_concurrent_runs_record_only_their_own_processes(tmp_path: Path) -> None:
    runs = {}
    for tag, seconds in (("a", "2.0"), ("b", "1.0")):
        script = write(tmp_path / f"{tag}.py", PROGRAM.format(tag=tag))
        runs[tag] = subprocess.Popen(
            [*TRACE, "--no-summary", "-o", str(tmp_path / f"trace-{tag}"), "--",
             sys.executable, str(script), seconds],
            cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.3)  # b starts while a runs, and ends first
    # A program of the same user traced outside both runs, in a session of its own.
    for tag, proc in runs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        trace = read_trace(tmp_path / f"trace-{tag}")
        names = trace.functions()
        other = "b" if tag == "a" else "a"
        assert names[f"only_{tag}"] == int(out), (tag, names)
        assert names[f"only_{other}"] == 0, (tag, names)
        pids = {e.ctx["vpid"] for e in trace.events}
        assert len(pids) == 2, pids  # the program and its forked child, nothing else
        check_balanced(trace)


def test_sigkill_of_trace_ends_the_run_and_its_session(tmp_path: Path) -> None:
    script = write(tmp_path / "long.py", PROGRAM.format(tag="k"))
    out = tmp_path / "killed"
    trace = subprocess.Popen(
        [*TRACE, "--no-summary", "-o", str(out), "--", sys.executable, str(script), "60"],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    marker = None
    deadline = time.monotonic() + 30
    while marker is None and time.monotonic() < deadline:
        for name in sessions():
            if name.startswith(f"pinsight-python-{trace.pid}-"):
                marker = f"PINSIGHT_PYTHON_TRACE_RUN={name}"
        time.sleep(0.05)
    assert marker is not None, sessions()
    session = marker.split("=", 1)[1]
    while not run_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run_processes(marker)
    time.sleep(0.5)
    trace.kill()  # SIGKILL: trace cleans up nothing itself
    trace.wait()
    deadline = time.monotonic() + 10
    while (session in sessions() or run_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert session not in sessions()
    assert run_processes(marker) == []
    # Its directory stops growing, and a new run records into its own.
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    again = subprocess.run(
        [*TRACE, "--no-summary", "-o", str(tmp_path / "next"), "--",
         sys.executable, str(script), "0.5"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) == size
    assert read_trace(tmp_path / "next").functions()["only_k"] > 0
    assert not [p for p in Path("/tmp").glob("pinsight-python-run-*") if str(trace.pid) in p.name]


def test_abandoned_session_is_swept_by_the_next_run(tmp_path: Path) -> None:
    # The owner (in the name) died with its keeper: a whole cgroup killed at once.
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"pinsight-python-{dead.pid}-0badcafe"
    subprocess.run(["lttng", "create", name, f"--output={tmp_path / 'dead'}"], check=True,
                   capture_output=True)
    try:
        run = subprocess.run(
            [*TRACE, "--no-summary", "-o", str(tmp_path / "t"), "--", sys.executable, "-c",
             "pass"],
            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        assert name not in sessions()
        assert f"destroyed the session {name}" in run.stderr
    finally:
        subprocess.run(["lttng", "destroy", name], capture_output=True, check=False)


def test_term_to_trace_of_mpirun_ends_every_rank_and_exits_143(tmp_path: Path) -> None:
    app = write(tmp_path / "app.py", """
        import os, time
        from mpi4py import MPI
        open(f"ready-{MPI.COMM_WORLD.Get_rank()}", "w").close()
        while True:
            time.sleep(0.01)
    """)
    script = write(tmp_path / "job.sh", f"""
        {' '.join(TRACE)} --no-summary -o out -- mpirun -np 2 --oversubscribe \\
            {sys.executable} {app} &
        pid=$!
        deadline=$((SECONDS + 90))
        until [ -e ready-0 ] && [ -e ready-1 ]; do
          [ $SECONDS -lt $deadline ] || break
          sleep 0.05
        done
        kill -TERM $pid
        wait $pid
        echo status=$?
    """)
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=clean_env(**MPI_ENV),
                          capture_output=True, text=True, timeout=180, check=False)
    assert "status=143" in proc.stdout, proc.stdout + proc.stderr
    leftovers = subprocess.run(["pgrep", "-f", str(app)], capture_output=True, text=True,
                               check=False).stdout.split()
    assert leftovers == []
    ranks = {e.fields["mpi_rank"] for e in read_trace(tmp_path / "out").named("process_info")}
    assert ranks == {0, 1}


def test_child_started_while_every_cpu_is_busy_is_recorded(tmp_path: Path) -> None:
    """Registration under load: the child waits (bounded) until it is recorded."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 2))
    ]
    try:
        script = write(tmp_path / "parent.py", """
            import subprocess, sys
            def parent_work():
                return 1
            parent_work()
            for i in range(4):
                subprocess.run([sys.executable, "-c", "def child_work(): pass\\nchild_work()"],
                               check=True)
        """)
        run = subprocess.run(
            [*TRACE, "--no-summary", "-o", str(tmp_path / "t"), "--", sys.executable,
             str(script)],
            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=180,
            check=False,
        )
    finally:
        for b in burners:
            b.send_signal(signal.SIGKILL)
            b.wait()
    assert run.returncode == 0, run.stderr
    trace = read_trace(tmp_path / "t")
    assert trace.functions()["child_work"] == 4, run.stderr
    assert len({e.ctx["vpid"] for e in trace.named("process_info")}) == 5
    assert "recorded no events" not in run.stderr


def test_report_flamegraph_export_read_several_traces_as_a_folder_of_them(
    tmp_path: Path,
) -> None:
    both = tmp_path / "both"
    for tag in ("a", "b"):
        script = write(tmp_path / f"{tag}.py", PROGRAM.format(tag=tag))
        run = subprocess.run(
            [*TRACE, "--no-summary", "-o", str(both / tag), "--", sys.executable, str(script),
             "0.2"],
            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120,
            check=False,
        )
        assert run.returncode == 0, run.stderr

    def report(*paths: Path) -> Dict[str, object]:
        data = report_json(*map(str, paths))
        data.pop("trace")
        data.pop("trace_dirs")
        data.pop("read_seconds", None)
        return data

    separate = report(both / "a", both / "b")
    assert separate == report(both)
    assert len(separate["processes"]) == 4  # type: ignore[arg-type]
    folded = subprocess.run([*CLI, "flamegraph", "--folded", str(both / "a"), str(both / "b"),
                             "-o", "-"], capture_output=True, text=True, check=True).stdout
    assert "only_a" in folded and "only_b" in folded
    exported = subprocess.run([*CLI, "export", str(both / "a"), str(both / "b"), "-o",
                               str(tmp_path / "t.json")], capture_output=True, text=True,
                              check=True)
    assert f"{both / 'a'}, {both / 'b'}" in exported.stderr
