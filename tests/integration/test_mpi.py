"""MPI jobs: mpi4py on Open MPI, 4 ranks on this node, one LTTng session around the job.

Two launch forms, each run once per module:

* ``pinsight-python trace -- mpirun -np 4 python app.py`` (the session is trace's own);
* ``mpirun -np 4 python -m pinsight_python app.py`` inside a session the test creates.

Each rank prints its rank as MPI itself knows it (``comm.Get_rank()``) and its pid, so
every check selects the job's own processes: the session also records any other traced
process of this user that runs meanwhile. Counts are exact, per rank.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from pinsight_python import cli
from tests.tracing import (
    MPI_ENV,
    PINSIGHT_LIB,
    Trace,
    Tracer,
    check_balanced,
    isolated_session,
    read_trace,
)

RANKS = 4
STEPS = 40  # calls of exchange(), hence of comm.allreduce, on every rank
ALLREDUCE = "mpi4py.MPI.Comm.allreduce"  # callee_name of comm.allreduce
BARRIER = "mpi4py.MPI.Comm.Barrier"
GET_RANK = "mpi4py.MPI.Comm.Get_rank"
GET_SIZE = "mpi4py.MPI.Comm.Get_size"
BACKEND = "sys.monitoring" if sys.version_info >= (3, 12) else "setprofile"
# sys.monitoring sees every native callable. CPython's profile hook (PyEval_SetProfile,
# the backend before 3.12) reports only builtin functions and method descriptors:
# mpi4py's methods are Cython functions, and no c_call event can show them there.
MPI4PY_VISIBLE = BACKEND == "sys.monitoring"
# The app's mpi4py calls: comm.Get_rank() in <module>, comm.allreduce in exchange(),
# comm.Barrier() and comm.Get_size() in main().
MPI4PY_CALLS = {
    (GET_RANK, "<module>"): 1,
    (ALLREDUCE, "exchange"): STEPS,
    (BARRIER, "main"): 1,
    (GET_SIZE, "main"): 1,
} if MPI4PY_VISIBLE else {}

MPIRUN = ["mpirun", "-np", str(RANKS), "--oversubscribe"]

APP = """
import os
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()


def exchange(step):
    return comm.allreduce(step)


def extra_work(step):
    return step * rank


def main(steps):
    total = 0
    for step in range(steps):
        total += exchange(step)
        for _ in range(rank):  # rank-dependent: rank r calls extra_work r times per step
            extra_work(step)
    comm.Barrier()
    # A file per rank: mpirun interleaves the ranks' standard outputs.
    with open(f"rank-{rank}.txt", "w") as f:
        f.write(f"{rank} {comm.Get_size()} {os.getpid()} {total}")


main(int(sys.argv[1]))
"""


# ---------------------------------------------------------------------------- running a job


def _check_prerequisites() -> None:
    """A missing mpirun or mpi4py is a failure of the set-up, never a skip."""
    if shutil.which("mpirun") is None:
        pytest.fail("mpirun not found on PATH: scripts/setup.sh installs openmpi-bin", False)
    probe = subprocess.run([sys.executable, "-c", "import mpi4py.MPI"], capture_output=True,
                           text=True, check=False, env={**os.environ, **MPI_ENV})
    if probe.returncode != 0:
        pytest.fail(f"{sys.executable} cannot import mpi4py.MPI (the test extra installs "
                    f"mpi4py):\n{probe.stderr}", False)


@dataclass
class Job:
    form: str
    script: Path
    trace: Trace  # the job's own processes only
    full_trace: Trace  # everything the session recorded
    pid_of_rank: Dict[int, int]
    stdout: str
    stderr: str

    @property
    def rank_of_pid(self) -> Dict[int, int]:
        return {pid: rank for rank, pid in self.pid_of_rank.items()}

    @property
    def vpid_of_rank(self) -> Dict[int, int]:
        """As a reader of the trace finds the ranks: process_info's rank -> vpid."""
        return {e.fields["mpi_rank"]: e.ctx["vpid"] for e in self.trace.named("process_info")}

    def of_rank(self, rank: int) -> Trace:
        vpid = self.vpid_of_rank[rank]
        return Trace(self.trace.path, [e for e in self.trace.events if e.ctx["vpid"] == vpid],
                     self.trace.discarded)


def _run_job(form: str, tmp: Path) -> Job:
    _check_prerequisites()
    script = tmp / "app.py"
    script.write_text(textwrap.dedent(APP))
    out = tmp / "trace"
    env = {**os.environ, **MPI_ENV}
    for name in ("PINSIGHT_PYTHON", "PINSIGHT_TRACE_PYTHON", "PINSIGHT_PYTHON_EVENTS",
                 "PINSIGHT_PYTHON_BACKEND", "PINSIGHT_TRACE_CONFIG_FILE", "PYTHONSTARTUP"):
        env.pop(name, None)
    app = [str(script), str(STEPS)]
    if form == "trace":
        command = [sys.executable, "-m", "pinsight_python.cli", "trace", "-o", str(out),
                   "--no-summary", "--", *MPIRUN, sys.executable, *app]
        proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp,
                              timeout=120, check=False)
    else:
        command = [*MPIRUN, sys.executable, "-m", "pinsight_python", *app]
        with isolated_session(out) as run_as:  # the job's ranks only
            proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp,
                                  timeout=120, check=False, preexec_fn=run_as)
    assert proc.returncode == 0, (
        f"{' '.join(command)} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
        f"stderr:\n{proc.stderr}"
    )
    # Whatever Open MPI prints, the tracer itself has nothing to say.
    assert "pinsight-python:" not in proc.stderr, proc.stderr
    # (rank, size, pid, total) as each rank's MPI library knows them.
    lines = [tuple(map(int, path.read_text().split())) for path in tmp.glob("rank-*.txt")]
    assert sorted(rank for rank, *_ in lines) == list(range(RANKS)), proc.stdout
    assert {size for _, size, _, _ in lines} == {RANKS}
    assert {total for *_, total in lines} == {sum(range(STEPS)) * RANKS}, "allreduce failed"
    pid_of_rank = {rank: pid for rank, _, pid, _ in lines}
    full = read_trace(out)
    pids = set(pid_of_rank.values())
    own = Trace(full.path, [e for e in full.events if e.ctx.get("vpid") in pids], full.discarded)
    return Job(form, script, own, full, pid_of_rank, proc.stdout, proc.stderr)


@pytest.fixture(scope="module", params=["trace", "python -m"])
def job(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Job:
    """Runs once per launch form for the whole module."""
    form = str(request.param)
    return _run_job(form, tmp_path_factory.mktemp("mpi-" + form.replace(" ", "")))


# ---------------------------------------------------------------------------- helpers


def count(trace: Trace, short: str, file: Optional[str] = None, **fields: Any) -> int:
    """Events `short` with these field values, of `file` if given (Event.file)."""
    return sum(1 for e in trace.named(short)
               if (file is None or e.file == file)
               and all(e.fields.get(k) == v for k, v in fields.items()))


def own_calls(trace: Trace, short: str, script: Path, qualname: str) -> int:
    """Begins (or ends) of the app's function `qualname`: its file, not a namesake."""
    return count(trace, short, qualname=qualname, file=str(script))


def cli_output(args: List[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


# ---------------------------------------------------------------------------- the trace


def test_one_process_info_per_rank(job: Job) -> None:
    infos = job.trace.named("process_info")
    assert len(infos) == RANKS
    # The ranks the trace tells are those MPI gave the processes.
    assert job.vpid_of_rank == job.pid_of_rank
    by_pid = {e.ctx["vpid"]: e for e in infos}
    assert set(by_pid) == set(job.pid_of_rank.values())  # one each
    for rank, pid in job.pid_of_rank.items():
        f = by_pid[pid].fields
        # The rank process_info names is the rank MPI gave the process.
        assert (f["pid"], f["mpi_rank"], f["mpi_size"]) == (pid, rank, RANKS)
        assert f["hostname"] == socket.gethostname()
        assert f["argv"] == f"{job.script} {STEPS}"
        assert f["python_version"] == sys.version.split()[0]
        assert f["backend"] == BACKEND
        # Emitted at activation, before any function event of the process.
        first = next(e for e in job.of_rank(rank).events)
        assert first.short == "process_info"
    # No other process of the trace claims to be a rank of a 4-rank job with our argv.
    claims = [e for e in job.full_trace.named("process_info")
              if e.fields["argv"] == f"{job.script} {STEPS}"]
    assert len(claims) == RANKS


def test_function_counts_per_rank(job: Job) -> None:
    assert job.full_trace.discarded == 0
    for rank in range(RANKS):
        trace = job.of_rank(rank)
        for short in ("function_begin", "function_end"):
            assert own_calls(trace, short, job.script, "main") == 1, (rank, short)
            assert own_calls(trace, short, job.script, "exchange") == STEPS, (rank, short)
            assert own_calls(trace, short, job.script, "extra_work") == rank * STEPS, (
                rank, short)
        # Calls (transition=start) equal begins: none of these functions yields.
        starts = count(trace, "function_begin", qualname="exchange", file=str(job.script),
                       transition="start")
        assert starts == STEPS


def test_collective_native_calls_per_rank(job: Job) -> None:
    for rank in range(RANKS):
        trace = job.of_rank(rank)
        for short in ("c_call_begin", "c_call_end"):
            calls = collections.Counter(
                (e.fields["callee_name"], e.fields["caller_qualname"])
                for e in trace.named(short) if e.fields["callee_name"].startswith("mpi4py.")
            )
            # Exactly the mpi4py calls the app's Python code makes, named as the class
            # defines them (comm is an Intracomm; allreduce is Comm's).
            assert calls == MPI4PY_CALLS, (rank, short)
        sites = {(e.file, e.fields["caller_lineno"])
                 for e in trace.named("c_call_begin") if e.fields["callee_name"] == ALLREDUCE}
        line = textwrap.dedent(APP).splitlines().index("    return comm.allreduce(step)") + 1
        assert sites == ({(str(job.script), line)} if MPI4PY_VISIBLE else set())
        ends = collections.Counter(e.fields["transition"] for e in trace.named("c_call_end")
                                   if e.fields["callee_name"] == ALLREDUCE)
        assert ends == ({"return": STEPS} if MPI4PY_VISIBLE else {})


def test_every_rank_balanced(job: Job) -> None:
    # One Python thread per rank, its main thread: MPI's own threads run no Python code.
    assert set(job.trace.by_thread()) == {(pid, pid) for pid in job.pid_of_rank.values()}
    check_balanced(job.trace)


# ---------------------------------------------------------------------------- report


@pytest.fixture
def report(job: Job, capsys: pytest.CaptureFixture[str]) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(
        cli_output(["report", str(job.trace.path), "--json", "--top", "0"], capsys))
    return data


def expected_rank_row(job: Job, rank: int) -> Dict[str, Any]:
    """The report's numbers for one rank, from the babeltrace2 dump."""
    trace = job.of_rank(rank)
    open_mpi: Dict[Tuple[int, str], int] = {}
    mpi_ns = 0
    for e in trace.events:
        if e.short == "c_call_begin" and e.fields["callee_name"].startswith("mpi4py."):
            open_mpi[(e.ctx["vtid"], e.fields["callee_name"])] = e.ts
        elif e.short == "c_call_end" and e.fields["callee_name"].startswith("mpi4py."):
            mpi_ns += e.ts - open_mpi.pop((e.ctx["vtid"], e.fields["callee_name"]))
    assert not open_mpi
    return {
        "mpi_rank": rank,
        "mpi_size": RANKS,
        "vpid": job.pid_of_rank[rank],
        "host": socket.gethostname(),
        "threads": 1,
        "events": len(trace.counted),
        "begin_ns": trace.counted[0].ts,
        "end_ns": trace.counted[-1].ts,
        "python_calls": count(trace, "function_begin", transition="start"),
        "native_calls": len(trace.named("c_call_begin")),
        "mpi4py_calls": sum(MPI4PY_CALLS.values()),
        "mpi4py_ns": mpi_ns,
    }


def foreign_ranked(job: Job, report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Ranked processes in the trace that are not the job's (concurrent runs)."""
    pids = set(job.pid_of_rank.values())
    return [p for p in report["processes"] if p["mpi_rank"] is not None and p["vpid"] not in pids]


def test_report_json_per_rank(job: Job, report: Dict[str, Any]) -> None:
    assert report["discarded"]["events"] == 0
    foreign = foreign_ranked(job, report)
    procs = {p["vpid"]: p for p in report["processes"]}
    ranked = [p["vpid"] for p in report["processes"] if p["mpi_rank"] is not None]
    # Ordered by rank: the job's processes come in rank order.
    assert [pid for pid in ranked if pid in job.rank_of_pid] == [
        job.pid_of_rank[r] for r in range(RANKS)]
    for rank, pid in job.pid_of_rank.items():
        proc = procs[pid]
        shared = any(p["mpi_rank"] == rank for p in foreign)
        assert proc["label"] == (f"rank {rank} (pid {pid})" if shared else f"rank {rank}")
        assert (proc["mpi_rank"], proc["mpi_size"], proc["pid"]) == (rank, RANKS, pid)
        assert proc["hostname"] == socket.gethostname()
        assert proc["argv"] == f"{job.script} {STEPS}"
        assert proc["events"] == len(job.of_rank(rank).counted)
        functions = {(r["qualname"], r["filename"]): r for r in proc["functions"]}
        assert functions[("exchange", str(job.script))]["calls"] == STEPS
        assert functions[("main", str(job.script))]["calls"] == 1
        if rank:
            assert functions[("extra_work", str(job.script))]["calls"] == rank * STEPS
        else:
            assert ("extra_work", str(job.script)) not in functions
        natives = {(n["callee"], n["caller"]["qualname"]): n for n in proc["native_calls"]
                   if n["callee"].startswith("mpi4py.")}
        assert {pair: n["calls"] for pair, n in natives.items()} == MPI4PY_CALLS
        for (callee, caller), n in natives.items():
            assert n["caller"]["filename"] == str(job.script)
            assert functions[(callee, None)]["calls"] == MPI4PY_CALLS[(callee, caller)]
        [thread] = proc["threads"]
        assert thread["vtid"] == pid and thread["label"] == f"main thread (tid {pid})"
        assert thread["unbalanced"] == {"ends_without_begin": 0, "implicitly_closed": 0,
                                        "open_at_end": 0, "stepped_aside": 0,
                                        "cut_by_damage": 0}


def test_report_json_mpi_section(job: Job, report: Dict[str, Any]) -> None:
    mpi = report["mpi"]
    rows = {r["vpid"]: r for r in mpi["ranks"]}
    procs = {p["vpid"]: p for p in report["processes"]}
    for rank, pid in job.pid_of_rank.items():
        row = dict(rows[pid])
        top = row.pop("top_function")
        assert row.pop("label") == procs[pid]["label"]
        assert row == expected_rank_row(job, rank)
        # The function with the most self time (--top 0: the rows hold every function).
        [best] = [r for r in procs[pid]["functions"]
                  if (r["qualname"], r["filename"]) == (top["qualname"], top["filename"])]
        assert (top["calls"], top["self_ns"]) == (best["calls"], best["self_ns"])
        assert top["self_ns"] == max(r["self_ns"] for r in procs[pid]["functions"])
    if not foreign_ranked(job, report):
        assert (mpi["size"], mpi["missing_ranks"], mpi["repeated_ranks"]) == (RANKS, [], [])
        assert mpi["hosts"] == [socket.gethostname()]
        assert not [w for w in report["warnings"] if "MPI job" in w]


def test_report_text_groups_by_rank(job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    text = cli_output(["report", str(job.trace.path), "--top", "0"], capsys)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("MPI ranks: "))
    if not foreign_ranked(job, json.loads(
            cli_output(["report", str(job.trace.path), "--json"], capsys))):
        assert lines[header] == f"MPI ranks: 4 processes of 4 on 1 host ({socket.gethostname()})"
    columns = lines[header + 1].split()
    assert columns[:6] == ["rank", "pid", "host", "threads", "events", "span"]
    rows = {}
    for line in lines[header + 2:]:
        if not line.strip():
            break
        cells = line.split()
        if cells[0].isdigit():
            rows[int(cells[1])] = cells
    for rank, pid in job.pid_of_rank.items():
        expected = expected_rank_row(job, rank)
        cells = rows[pid]
        assert cells[:5] == [str(rank), str(pid), socket.gethostname(), "1",
                             f"{expected['events']:,}"]
        # span takes two cells ("316 ms"), then the three counts.
        assert cells[7:10] == [f"{expected['python_calls']:,}", f"{expected['native_calls']:,}",
                               f"{sum(MPI4PY_CALLS.values()):,}"]
    # One section per rank, in rank order, each with the native call of the collective.
    sections = [m.start() for rank in range(RANKS)
                for m in re.finditer(rf"^=== rank {rank}\b.*\bpid {job.pid_of_rank[rank]}\b.*"
                                     rf"{re.escape(str(job.script))} {STEPS}, on "
                                     rf"{re.escape(socket.gethostname())}\b.*===$",
                                     text, re.MULTILINE)]
    assert len(sections) == RANKS and sections == sorted(sections)
    for rank in range(RANKS):
        start = sections[rank]
        end = sections[rank + 1] if rank + 1 < RANKS else len(text)
        section = text[start:end]
        allreduce = re.search(
            rf"^\s+{STEPS}\s+\S+ \S+\s+exchange \(.*app\.py:\d+\)\s+{ALLREDUCE}$",
            section, re.MULTILINE)
        assert (allreduce is not None) == MPI4PY_VISIBLE, section


def test_report_warns_of_missing_ranks(tracer: Tracer,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    # One rank of a 4-rank job, as a node's trace holds only that node's ranks.
    run = tracer.run("def f():\n    pass\nf()\n",
                     env={"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"})
    [info] = [e for e in run.trace.named("process_info")
              if e.fields["argv"] == str(tracer.tmp_path / "prog1.py")]
    pid = info.fields["pid"]
    assert (info.fields["mpi_rank"], info.fields["mpi_size"]) == (1, 4)
    report = json.loads(cli_output(["report", str(run.trace.path), "--json"], capsys))
    row = next(r for r in report["mpi"]["ranks"] if r["vpid"] == pid)
    assert (row["mpi_rank"], row["mpi_size"]) == (1, 4)
    if len(report["mpi"]["ranks"]) == 1:  # no other ranked process ran meanwhile
        assert report["mpi"]["missing_ranks"] == [0, 2, 3]
        assert report["warnings"] == [
            "the MPI job has 4 ranks but the trace holds only rank 1: ranks 0, 2-3 are "
            "missing (the ranks of other nodes are in those nodes' traces: see docs/mpi.md)"]
        text = cli_output(["report", str(run.trace.path)], capsys)
        assert "\nWARNING: the MPI job has 4 ranks but the trace holds only rank 1: " in text
        assert "MPI ranks: 1 process of 4 on 1 host" in text


# ---------------------------------------------------------------------------- PInsight's MPI domain

LATE_RANK_APP = """
import time

import numpy
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()


def arrive():
    if rank == 1:  # the late rank: rank 0 waits for it in every allreduce
        time.sleep(0.2)


def exchange(step):
    # The buffer form: one MPI_Allreduce (the pickling allreduce is Send/Recv + Bcast).
    total = numpy.zeros(1)
    comm.Allreduce(numpy.array([float(step)]), total)
    return total[0]


for step in range(5):
    arrive()
    exchange(step)
"""


def test_mpi_wait_goes_to_its_python_caller_and_the_imbalance_shows(tmp_path: Path) -> None:
    """mpi4py under mpirun -np 2 with PInsight's PMPI (libpinsight.so preloaded): each
    MPI_Allreduce is under the Python call that made it, on each rank, and the early
    rank's wait for the late one shows as the slowest rank."""
    _check_prerequisites()
    from pinsight_python.reading.analysis import read_trace as read_with_reader
    from pinsight_python.reading.report import build_report, render_text

    script = tmp_path / "late.py"
    script.write_text(textwrap.dedent(LATE_RANK_APP))
    out = tmp_path / "trace"
    env = {**os.environ, **MPI_ENV, "LD_PRELOAD": str(PINSIGHT_LIB.resolve())}
    command = [sys.executable, "-m", "pinsight_python.cli", "trace", "-o", str(out),
               "--no-summary", "--", "mpirun", "-np", "2", "--oversubscribe", "-x", "LD_PRELOAD",
               sys.executable, str(script)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    report = build_report(read_with_reader(out), top=0)
    rows = [r for r in report["native"] if (r["domain"], r["name"]) == ("mpi", "MPI_Allreduce")]
    # Issue 35, point 4: the row names the Python function that waits, and apart the
    # native callee its call went through (none where mpi4py's calls are not seen).
    assert [r["caller"]["qualname"] for r in rows] == ["exchange"], rows
    assert [r["via"] for r in rows] == ["mpi4py.MPI.Comm.Allreduce" if MPI4PY_VISIBLE else None]
    row = rows[0]
    assert row["count"] == 10  # 5 per rank
    assert set(row["ranks"]) == {"0", "1"}
    # Rank 0 waits about 0.2 s in each of its 5 calls; rank 1 hardly waits.
    assert row["ranks"]["0"] > 0.5e9, row
    assert row["imbalance"]["slowest_rank"] == 0 and row["imbalance"]["fastest_rank"] == 1
    assert row["imbalance"]["ratio"] > 3, row
    text = render_text(report)
    assert "[MPI] MPI_Allreduce" in text and "ranks: slowest 0" in text, text
    row_text = r"exchange \(late\.py:\d+\) +(mpi4py\.MPI\.Comm\.Allreduce|-) +\[MPI\]"
    assert re.search(row_text, text), text
