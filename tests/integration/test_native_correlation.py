"""Python to native correlation: native events of other providers land inside the
c_call_begin/c_call_end of the Python call that started them.

Two sources of native events, both real and both in the same LTTng session as
python_pinsight_lttng_ust:
- an OpenMP kernel (tests/native/omp_kernel.c, built here) with a tracepoint
  provider of its own, pinsight_test_omp, fired by every thread of the team;
- LTTng's libc wrapper (liblttng-ust-libc-wrapper.so, LD_PRELOADed), whose
  lttng_ust_libc:malloc shows the allocations a NumPy call makes.

A session records every traced program of this user that runs meanwhile (other
tests run concurrently), so every check selects the program's own vpid.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Set, Tuple

from pinsight_python.recording import lttng
from tests.tracing import (
    OMP,
    OMP_PROGRAM,
    OMP_THREADS,
    Event,
    Run,
    Trace,
    Tracer,
    check_balanced,
    fresh_group,
    read_trace,
)

CHUNK = 25000  # CHUNK in omp_kernel.c
LIBC_WRAPPER = Path("/usr/lib/x86_64-linux-gnu/liblttng-ust-libc-wrapper.so.1")
# lttng_ust_libc:malloc fires for every malloc of the interpreter: keep the big ones.
MALLOC_FILTER = "size >= 1000000"


def own_events(run: Run) -> Tuple[int, Trace]:
    """The program prints its pid on its first line: keep that process's events."""
    pid = int(run.stdout.splitlines()[0])
    trace = run.trace
    mine = [e for e in trace.events if e.ctx["vpid"] == pid]
    assert mine, f"no events of process {pid}"
    return pid, Trace(trace.path, mine, trace.discarded)


def line_of(script: Path, text: str) -> int:
    """1-based line of the only line of script containing text."""
    hits = [i for i, line in enumerate(script.read_text().splitlines(), 1) if text in line]
    assert len(hits) == 1, f"{text!r} on lines {hits}"
    return hits[0]


def native_calls(trace: Trace, callee_prefix: str) -> List[Tuple[Event, Event]]:
    """(c_call_begin, c_call_end) of every native call whose callee starts with
    callee_prefix, in order of their begins; nesting is checked by check_balanced."""
    pairs: List[Tuple[Event, Event]] = []
    for events in trace.by_thread().values():
        open_calls: List[Event] = []
        for e in events:
            if not e.short.startswith("c_call_"):
                continue
            if not e.fields["callee_name"].startswith(callee_prefix):
                continue
            if e.short == "c_call_begin":
                open_calls.append(e)
            else:
                begin = open_calls.pop()
                assert begin.fields["callee_name"] == e.fields["callee_name"]
                pairs.append((begin, e))
    return sorted(pairs, key=lambda p: p[0].ts)


def within(e: Event, window: Tuple[Event, Event]) -> bool:
    return window[0].ts <= e.ts <= window[1].ts


def check_team(trace: Trace, kernel: str, n: int, team: Dict[int, List[Event]], pid: int,
               caller_vtid: int, python_vtids: Set[int]) -> None:
    """One region's events per OpenMP thread: its chunks (schedule(static, 1)), all in
    the program's process, each thread on one vtid: the caller's for the master, for
    the others a worker of the OpenMP runtime that runs no Python code."""
    nchunks = math.ceil(n / CHUNK)
    for t, events in team.items():
        mine = list(range(t, nchunks, OMP_THREADS))  # schedule(static, 1)
        assert [e.short for e in events] == (
            ["region_begin"] + ["chunk"] * len(mine) + ["region_end"]
        ), f"{kernel} thread {t}"
        assert [e.fields["lo"] for e in events[1:-1]] == [c * CHUNK for c in mine]
        assert [e.fields["hi"] for e in events[1:-1]] == [min((c + 1) * CHUNK, n) for c in mine]
        assert all(e.fields["num_threads"] == OMP_THREADS for e in (events[0], events[-1]))
        assert {e.ctx["vpid"] for e in events} == {pid}
        vtids = {e.ctx["vtid"] for e in events}
        assert len(vtids) == 1, f"{kernel} thread {t} on vtids {vtids}"
        if t == 0:
            # The master of the team is the Python thread that made the call.
            assert vtids == {caller_vtid}
        else:
            # A worker thread of the OpenMP runtime, which runs no Python code.
            assert not vtids & python_vtids
            (worker,) = vtids
            assert not [
                x
                for x in trace.events
                if x.ctx["vtid"] == worker and x.name.startswith(lttng.PROVIDER)
            ]


def test_openmp_regions_inside_the_python_call(tracer: Tracer, omp_kernel_dir: Path) -> None:
    run = tracer.run(
        OMP_PROGRAM.format(kernel_dir=str(omp_kernel_dir)),
        events=(f"{lttng.PROVIDER}:*", f"{OMP}:*"),
        env={"OMP_NUM_THREADS": str(OMP_THREADS)},
    )
    pid, trace = own_events(run)
    assert trace.discarded == 0
    check_balanced(trace)
    script = tracer.tmp_path / f"prog{tracer.counter}.py"
    simulate_line = line_of(script, "omp_kernel.saxpy(200_000")
    analyse_line = line_of(script, "omp_kernel.dot(")
    background_line = line_of(script, "omp_kernel.saxpy(60_000")

    calls = native_calls(trace, "omp_kernel.")
    # Module-level functions of an extension: "<module>.<function>", as written in Python.
    assert [
        (b.fields["caller_qualname"], b.fields["callee_name"], b.fields["caller_lineno"],
         b.fields["python_thread_id"], e.fields["transition"])
        for b, e in calls
    ] == [
        ("simulate", "omp_kernel.saxpy", simulate_line, 0, "return"),
        ("simulate", "omp_kernel.saxpy", simulate_line, 0, "return"),
        ("simulate", "omp_kernel.saxpy", simulate_line, 0, "return"),
        ("analyse", "omp_kernel.dot", analyse_line, 0, "return"),
        ("background", "omp_kernel.saxpy", background_line, 1, "return"),
    ]  # fmt: skip
    assert all(b.file == str(script) for b, _ in calls)
    main_vtid = calls[0][0].ctx["vtid"]
    assert main_vtid == pid
    thread_vtid = calls[4][0].ctx["vtid"]
    assert thread_vtid != main_vtid
    python_vtids = {main_vtid, thread_vtid}
    sizes = [200_000] * 3 + [110_000, 60_000]

    omp_events = [e for e in trace.events if e.name.startswith(f"{OMP}:")]
    accounted = 0
    region_ids = set()
    for (begin, end), n in zip(calls, sizes):
        caller_vtid = begin.ctx["vtid"]
        kernel = begin.fields["callee_name"].split(".", 1)[1]
        inside = [e for e in omp_events if within(e, (begin, end))]
        accounted += len(inside)
        # The calls run one after the other: each window holds exactly one region,
        # the one this call started.
        ids = {e.fields["region_id"] for e in inside}
        assert len(ids) == 1, f"{kernel} at {begin.ts}: regions {ids}"
        region_ids |= ids
        assert {e.fields["kernel"] for e in inside} == {kernel}
        by_thread: Dict[int, List[Event]] = {t: [] for t in range(OMP_THREADS)}
        for e in inside:
            by_thread[e.fields["thread_num"]].append(e)
        check_team(trace, kernel, n, by_thread, pid, caller_vtid, python_vtids)
        # On the calling thread nothing happens between the c_call's begin and end
        # but the master's own region: the native call is a leaf of the Python stack.
        caller_events = trace.by_thread()[(pid, caller_vtid)]
        i = caller_events.index(begin)
        j = caller_events.index(end)
        assert caller_events[i + 1 : j] == by_thread[0]
    # Every native event of the program fell inside some Python call's window.
    assert (
        accounted == len(omp_events) == sum(2 * OMP_THREADS + math.ceil(n / CHUNK) for n in sizes)
    )
    assert len(region_ids) == len(calls)


def run_with_filters(
    tmp_path: Path,
    code: str,
    events: Iterable[str],
    filtered: Sequence[Tuple[str, str]],
    env: Dict[str, str],
) -> Run:
    """Like Tracer.run(activate=None), with events enabled under an LTTng filter
    expression: (event, filter) pairs, added to the session's channel before it
    starts. The code activates pinsight_python itself."""
    script = tmp_path / "prog.py"
    script.write_text(code)
    out = tmp_path / "trace"
    gid, run_as = fresh_group()  # this program's events only, whatever runs beside it
    session = lttng.Session(out, events=events, track_vgid=gid)
    session.create()
    try:
        for event, expression in filtered:
            cmd = [
                "lttng", "enable-event", "--userspace",  # a filter, as a user adds one
                f"--session={session.name}", f"--channel={session.channel}",
                f"--filter={expression}", event,
            ]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stderr}"
        session.start()
        proc = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            cwd=tmp_path,
            timeout=120,
            check=False,
            preexec_fn=run_as,
        )
    finally:
        session.destroy()
    assert proc.returncode == 0, f"traced program failed:\n{proc.stdout}\n{proc.stderr}"
    return Run(proc.returncode, proc.stdout, proc.stderr, read_trace(out))


MALLOC_PROGRAM = textwrap.dedent(
    """
    import os
    import threading
    import numpy as np
    import pinsight_python
    # After the imports: NumPy's import alone makes ~200k function events.
    pinsight_python.activate()
    print(os.getpid(), flush=True)

    def allocate(n):
        a = np.empty(n)
        return a.nbytes

    def background():
        return allocate(3_000_000)

    print(allocate(10_000_000))
    t = threading.Thread(target=background)
    t.start()
    t.join()
    """
)


def test_libc_wrapper_mallocs_inside_the_numpy_call(tmp_path: Path) -> None:
    assert LIBC_WRAPPER.exists(), f"{LIBC_WRAPPER} missing: apt-get install liblttng-ust1"
    run = run_with_filters(
        tmp_path,
        MALLOC_PROGRAM,
        events=(f"{lttng.PROVIDER}:*",),
        filtered=[("lttng_ust_libc:malloc", MALLOC_FILTER)],
        env={"LD_PRELOAD": str(LIBC_WRAPPER)},
    )
    assert run.stdout.splitlines()[1] == "80000000"
    pid, trace = own_events(run)
    assert trace.discarded == 0
    check_balanced(trace)
    calls = native_calls(trace, "numpy.empty")
    line = line_of(tmp_path / "prog.py", "np.empty(n)")
    assert [
        (b.fields["caller_qualname"], b.fields["callee_name"], b.fields["caller_lineno"],
         b.fields["python_thread_id"], e.fields["transition"])
        for b, e in calls
    ] == [
        ("allocate", "numpy.empty", line, 0, "return"),
        ("allocate", "numpy.empty", line, 1, "return"),
    ]  # fmt: skip
    assert calls[0][0].ctx["vtid"] == pid != calls[1][0].ctx["vtid"]
    mallocs = trace.named("malloc")
    assert all(e.fields["size"] >= 1_000_000 for e in mallocs)  # the filter held
    for (begin, end), nbytes in zip(calls, (80_000_000, 24_000_000)):
        vtid = begin.ctx["vtid"]
        inside = [e for e in mallocs if within(e, (begin, end)) and e.ctx["vtid"] == vtid]
        # The array's buffer, of exactly its size, allocated by this call on this thread.
        assert [e.fields["size"] for e in inside] == [nbytes]
        assert inside[0].fields["ptr"] != 0
        # No allocation of that size anywhere else in the program.
        assert [e for e in mallocs if e.fields["size"] == nbytes] == inside
        caller_events = trace.by_thread()[(pid, vtid)]
        i = caller_events.index(begin)
        j = caller_events.index(end)
        assert caller_events[i + 1 : j] == inside
