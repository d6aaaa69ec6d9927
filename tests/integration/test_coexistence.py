"""pinsight-python in the same process as PInsight's libpinsight.so (docs/pinsight.md).

PInsight itself is not in this repository: a stand-in, tests/native/pinsight_like/,
does to a process what libpinsight.so does that matters to us. It is loaded
before us (LD_PRELOAD, PInsight's usual way) or after us (ctypes, as
OMP_TOOL_LIBRARIES or a dlopen does); its constructor starts a control thread
and installs a SIGUSR1 handler that, like PInsight's, does not chain to the one
it replaces; it emits its own LTTng-UST events around and inside an OpenMP
parallel region (gcc -fopenmp). Checked here:

- SIGUSR1 reaches both its handler and our configuration reload, every time;
- its events are the same, in number, with and without pinsight-python active;
- its events fall inside the c_call_begin/c_call_end of the Python call that ran
  the region, on the caller's thread and on the team's.

The same checks run against the real library too: libpinsight.so built by
scripts/setup.sh from ../shared/pinsight (or PINSIGHT_LIB), with clang and LLVM's
libomp to build its OpenMP kernel; and `pinsight-python trace` runs a command that
preloads it.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

from pinsight_python.reading.report import render_text
from pinsight_python.recording import lttng
from tests import perfetto_trace
from tests.tracing import (
    CALLS,
    OPENMP_CONFIG,
    PINSIGHT_LIB,
    PINSIGHT_LIKE,
    SETPROFILE,
    STANDIN_WORKLOAD,
    TEAM,
    Event,
    Trace,
    assert_openmp_regions_under_their_call,
    build_openmp_kernel,
    check_balanced,
    compile_native,
    isolated_session,
    native_report,
    native_rows,
    openmp_env,
    proc_status,
    read_trace,
    trace_openmp_workload,
    wait_for,
)

STANDIN = "pinsight_like_lttng_ust"
OMPT = "ompt_pinsight_lttng_ust"
SIGNALS = 5


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """The stand-in, built with gcc: as PInsight ("plain") and chaining ("chain")."""
    out = tmp_path_factory.mktemp("pinsight_like")
    libs = {"plain": out / "libpinsight_like.so", "chain": out / "libpinsight_like_chain.so"}
    for kind, lib in libs.items():
        compile_native(
            [
                "gcc",
                "-O2",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fPIC",
                "-shared",
                "-fopenmp",
                f"-DPINSIGHT_LIKE_CHAIN={int(kind == 'chain')}",
                f"-I{PINSIGHT_LIKE}",
                str(PINSIGHT_LIKE / "pinsight_like.c"),
                "-o",
                str(lib),
                "-llttng-ust",
                "-ldl",
                "-lpthread",
            ]
        )
    return libs


# ---------------------------------------------------------------------------
# (a) SIGUSR1 reaches both

# The program: load the stand-in (already there under LD_PRELOAD; its
# constructor runs now otherwise), make sure we are active, keep running
# parallel regions while the test sends the signals, then report both counts.
SIGNAL_PROGRAM = textwrap.dedent("""
    import ctypes, json, os, sys, time
    import pinsight_python
    if os.environ.get("ACTIVATE_FIRST") == "1":
        pinsight_python.activate()
    # Under the .pth shim (PINSIGHT_PYTHON=1) we are active before this line.
    first = pinsight_python.status()["active"]
    like = ctypes.CDLL(os.environ["STANDIN"])
    time.sleep(float(os.environ.get("WAIT_AFTER_LOAD", "0")))
    if os.environ.get("REACTIVATE") == "1":
        pinsight_python.deactivate()
        pinsight_python.activate()
    if not pinsight_python.status()["active"]:
        pinsight_python.activate()
    like.pinsight_like_kernel.restype = ctypes.c_double
    def step():
        return like.pinsight_like_kernel(20000)
    step()
    print("ready", flush=True)
    while not os.path.exists("sent"):
        step()
    n = int(os.environ["SIGNALS"])
    deadline = time.monotonic() + 20
    while like.pinsight_like_reloads() < n and time.monotonic() < deadline:
        time.sleep(0.01)
    grace = time.monotonic() + 10  # ours reloads within milliseconds, if at all
    while pinsight_python.status()["reloads"] < n and time.monotonic() < grace:
        time.sleep(0.01)
    st = pinsight_python.status()
    print(json.dumps({
        "first": first, "signals": like.pinsight_like_signals(),
        "their_reloads": like.pinsight_like_reloads(), "our_reloads": st["reloads"],
        "reload_errors": st["reload_errors"], "active": st["active"],
    }), flush=True)
""")


def _wait_delivered(pid: int, timeout: float = 10.0) -> None:
    """Wait until no SIGUSR1 is pending for the process: a second one sent
    while the first is still pending would merge with it."""
    bit = 1 << (signal.SIGUSR1 - 1)
    wait_for(lambda: not int(proc_status(pid, "ShdPnd"), 16) & bit, timeout=timeout,
             what=f"SIGUSR1 pending for {pid} to be delivered", poll=0.001)


def run_signals(
    tmp_path: Path,
    env: Dict[str, str],
    count: int = SIGNALS,
    program: str = SIGNAL_PROGRAM,
    handled_line: Optional[str] = None,
) -> Dict[str, Any]:
    """Run `program`, send it `count` SIGUSR1 while it runs parallel regions.

    handled_line: a line the program's other handler prints on stderr once it
    has acted on a signal; the next signal waits for it (PInsight's handler sets
    a flag, so two signals before its control thread wakes are one reload)."""
    script = tmp_path / "signals.py"
    script.write_text(program)
    (tmp_path / "sent").unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "SIGNALS": str(count)},
        cwd=tmp_path,
    )
    lines: List[str] = []
    stream = proc.stderr
    assert stream is not None
    # Read as it comes: the handled lines pace the signals.
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")))
    reader.start()
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().strip()
        if ready != "ready":
            proc.kill()
            proc.wait(timeout=30)
            reader.join()
            raise AssertionError(f"program did not start: {ready!r}\n{''.join(lines)}")
        for sent in range(1, count + 1):
            os.kill(proc.pid, signal.SIGUSR1)
            _wait_delivered(proc.pid)
            deadline = time.monotonic() + 20
            while (handled_line is not None and time.monotonic() < deadline
                   and sum(handled_line in line for line in list(lines)) < sent):
                time.sleep(0.01)
            time.sleep(0.02)
        (tmp_path / "sent").touch()
        out = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=60)
        proc.stdout.close()
        stream.close()
    err = "".join(lines)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{err}"
    result: Dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["stderr"] = err
    return result


def test_sigusr1_reaches_both_when_standin_is_preloaded(
    standin: Dict[str, Path], tmp_path: Path
) -> None:
    # PInsight's usual order: its constructor installs its handler before
    # Python starts; activate() installs ours and chains to it.
    env = openmp_env(
        tmp_path,
        LD_PRELOAD=str(standin["plain"]),
        STANDIN=str(standin["plain"]),
        ACTIVATE_FIRST="1",
    )
    r = run_signals(tmp_path, env)
    assert r["first"] is True
    assert (r["signals"], r["their_reloads"], r["our_reloads"]) == (SIGNALS,) * 3, r
    assert r["reload_errors"] == 0


def test_sigusr1_reaches_both_when_a_chaining_library_loads_after_us(
    standin: Dict[str, Path], tmp_path: Path
) -> None:
    # Activated at start-up by the .pth shim, then a library that keeps and
    # calls the handler it replaces is loaded: ours must be callable from it.
    env = openmp_env(tmp_path, PINSIGHT_PYTHON="1", STANDIN=str(standin["chain"]))
    r = run_signals(tmp_path, env)
    assert r["first"] is True, "the .pth shim did not activate before the library loaded"
    assert (r["signals"], r["their_reloads"], r["our_reloads"]) == (SIGNALS,) * 3, r


def test_sigusr1_reaches_both_when_reactivated_after_pinsight_loads(
    standin: Dict[str, Path], tmp_path: Path
) -> None:
    # The workaround docs/pinsight.md gives for PInsight loaded after us
    # (OMP_TOOL_LIBRARIES, dlopen): deactivate() + activate() once it is
    # loaded re-installs our handler, chained to PInsight's.
    env = openmp_env(tmp_path, PINSIGHT_PYTHON="1", STANDIN=str(standin["plain"]), REACTIVATE="1")
    r = run_signals(tmp_path, env)
    assert r["first"] is True
    assert (r["signals"], r["their_reloads"], r["our_reloads"]) == (SIGNALS,) * 3, r


def test_sigusr1_reaches_both_when_pinsight_loads_after_us(
    standin: Dict[str, Path], tmp_path: Path
) -> None:
    # libpinsight.so's sigaction(SIGUSR1, &sa, NULL) replaces our handler
    # without chaining when it loads after activate() (OMP_TOOL_LIBRARIES,
    # dlopen): the control thread notices within a second and puts ours back,
    # chained to it. 3 s: the second's check, however late a loaded machine runs it.
    env = openmp_env(tmp_path, PINSIGHT_PYTHON="1", STANDIN=str(standin["plain"]),
                     WAIT_AFTER_LOAD="3")
    r = run_signals(tmp_path, env)
    assert r["first"] is True
    assert (r["signals"], r["their_reloads"]) == (SIGNALS, SIGNALS), r  # PInsight always gets it
    assert r["our_reloads"] == SIGNALS, r


# ---------------------------------------------------------------------------
# (b), (c) the stand-in's events, with and without us


def run_traced(
    tmp_path: Path,
    name: str,
    body: str,
    env: Dict[str, str],
    events: Sequence[str],
    activate: bool,
) -> Tuple[int, Trace]:
    """Run `body` (activating first if asked) in a session; the events of its process only."""
    script = tmp_path / f"{name}.py"
    prologue = "import pinsight_python\npinsight_python.activate()\n" if activate else ""
    script.write_text(prologue + body)
    out = tmp_path / f"trace-{name}"
    with isolated_session(out, events=events) as run_as:
        proc = subprocess.run(
            [sys.executable, str(script)],
            preexec_fn=run_as,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr}"
    pid = int(proc.stdout.split()[0])
    trace = read_trace(out)
    # The session records every traced process of this user: keep ours.
    mine = [e for e in trace.events if e.ctx.get("vpid") == pid]
    return pid, Trace(out, mine, trace.discarded)


def _windows(trace: Trace, callee: str, caller: str = "step") -> List[Tuple[int, int, int]]:
    """(begin ts, end ts, vtid) of every native call to `callee`.

    CPython's profile hook (the setprofile backend, before 3.12) does not
    report ctypes calls: there, the windows are those of the Python function
    `caller` that makes them.
    """
    kind, key, name = (
        ("function", "qualname", caller) if SETPROFILE else ("c_call", "callee_name", callee)
    )
    opened: Dict[int, List[int]] = collections.defaultdict(list)
    windows = []
    for e in trace.events:
        if e.name.endswith(f":{kind}_begin") and e.fields[key] == name:
            opened[e.ctx["vtid"]].append(e.ts)
        elif e.name.endswith(f":{kind}_end") and e.fields[key] == name:
            windows.append((opened[e.ctx["vtid"]].pop(), e.ts, e.ctx["vtid"]))
    return sorted(windows)


def _window_of(windows: List[Tuple[int, int, int]], e: Event) -> Optional[int]:
    found = [i for i, (begin, end, _) in enumerate(windows) if begin <= e.ts <= end]
    return found[0] if len(found) == 1 else None


def _counts(trace: Trace, provider: str) -> collections.Counter[str]:
    return collections.Counter(e.short for e in trace.events if e.name.startswith(provider + ":"))


def test_standin_events_unchanged_and_inside_our_native_calls(
    standin: Dict[str, Path], tmp_path: Path
) -> None:
    lib = str(standin["plain"])
    env = openmp_env(tmp_path, LD_PRELOAD=lib, STANDIN=lib)
    events = (f"{lttng.PROVIDER}:*", f"{STANDIN}:*")
    _, alone = run_traced(tmp_path, "alone", STANDIN_WORKLOAD, env, events, activate=False)
    _, both = run_traced(tmp_path, "both", STANDIN_WORKLOAD, env, events, activate=True)
    assert alone.discarded == both.discarded == 0

    # (b) the same events, in number, with and without us.
    expected = {"region_begin": CALLS, "region_end": CALLS, "implicit_task": CALLS * TEAM}
    counts = {"alone": dict(_counts(alone, STANDIN)), "both": dict(_counts(both, STANDIN))}
    assert counts == {"alone": expected, "both": expected}
    assert not _counts(alone, lttng.PROVIDER)

    # (c) each region inside the native call that ran it.
    check_balanced(both)
    windows = _windows(both, "ctypes.pinsight_like_kernel")
    assert len(windows) == CALLS
    caller = windows[0][2]
    regions: Dict[int, List[Event]] = collections.defaultdict(list)
    for e in both.events:
        if e.name.startswith(STANDIN + ":"):
            regions[e.fields["region_id"]].append(e)
    assert len(regions) == CALLS
    for region_id, evs in sorted(regions.items()):
        where = {_window_of(windows, e) for e in evs}
        assert len(where) == 1 and None not in where, (
            f"region {region_id}: events outside the native call or across two: "
            f"{[(e.short, e.ts, e.ctx['vtid']) for e in evs]}"
        )
        assert where == {region_id - 1}, f"region {region_id} ran in call {where}"
        ends = [e for e in evs if e.short in ("region_begin", "region_end")]
        assert [e.short for e in ends] == ["region_begin", "region_end"]
        assert {e.ctx["vtid"] for e in ends} == {caller}  # the encountering thread
        team = [e for e in evs if e.short == "implicit_task"]
        assert sorted(e.fields["thread_num"] for e in team) == list(range(TEAM))
        assert len({e.ctx["vtid"] for e in team}) == TEAM and caller in {
            e.ctx["vtid"] for e in team
        }

    # Made by step(), called by main(): the Python side of each region.
    calls = [e for e in both.named("c_call_begin") if e.fields["callee_name"].endswith("_kernel")]
    assert {e.fields["caller_qualname"] for e in calls} == (set() if SETPROFILE else {"step"})
    assert both.functions()["step"] == CALLS and both.functions()["main"] == 1


def test_reload_applies_to_both_configurations(standin: Dict[str, Path], tmp_path: Path) -> None:
    # One SIGUSR1 after the shared file switched both domains to STANDBY: the
    # stand-in stops emitting and so do we.
    lib = str(standin["plain"])
    env = openmp_env(tmp_path, LD_PRELOAD=lib, STANDIN=lib)
    config = Path(env["PINSIGHT_TRACE_CONFIG_FILE"])
    body = textwrap.dedent(f"""
        import ctypes, os, signal, time
        like = ctypes.CDLL(os.environ["STANDIN"])
        like.pinsight_like_kernel.restype = ctypes.c_double
        def step(i):
            return like.pinsight_like_kernel(5000)
        for i in range(5):
            step(i)
        with open({str(config)!r}, "w") as f:
            f.write({OPENMP_CONFIG.replace("TRACING", "STANDBY")!r})
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + 60
        # The reload is counted just before its configuration is published: wait for
        # the mode it sets too, or step() could still run under the old one.
        while (like.pinsight_like_reloads() < 1 or pinsight_python.status()["reloads"] < 1
               or pinsight_python.status()["mode"] != "STANDBY") and time.monotonic() < deadline:
            time.sleep(0.01)
        for i in range(5):
            step(i)
        assert like.pinsight_like_tracing() == 0
        assert pinsight_python.status()["mode"] == "STANDBY"
        print(os.getpid())
    """)
    events = (f"{lttng.PROVIDER}:*", f"{STANDIN}:*")
    _, trace = run_traced(tmp_path, "reload", body, env, events, activate=True)
    assert _counts(trace, STANDIN) == {
        "region_begin": 5,
        "region_end": 5,
        "implicit_task": 5 * TEAM,
        "reload": 1,
    }
    assert trace.named("mode_change")[-1].fields["mode"] == "STANDBY"
    assert len(_windows(trace, "ctypes.pinsight_like_kernel")) == 5


def _perfetto(out: Path, pid: int, tmp_path: Path) -> perfetto_trace.PerfettoTrace:
    """export --format perfetto of the process `pid`, read back with Perfetto's schema."""
    exported = tmp_path / f"{pid}.pftrace"
    subprocess.run([sys.executable, "-m", "pinsight_python.cli", "export", "--pid", str(pid),
                    "-o", str(exported), str(out)], capture_output=True, check=True, timeout=120)
    return perfetto_trace.read(exported)


def test_report_attributes_any_providers_regions_to_their_caller(
    standin: Dict[str, Path], tmp_path: Path
) -> None:
    """A provider the reader does not know, with NAME_begin/NAME_end events: each
    region goes to the Python function whose call ran it, with the ctypes call it
    went through apart (none under the profile hook, which does not report ctypes
    calls)."""
    lib = str(standin["plain"])
    env = openmp_env(tmp_path, LD_PRELOAD=lib, STANDIN=lib)
    events = (f"{lttng.PROVIDER}:*", f"{STANDIN}:*")
    pid, _ = run_traced(tmp_path, "both", STANDIN_WORKLOAD, env, events, activate=True)
    report = native_report(tmp_path / "trace-both", pid)
    assert native_rows(report, STANDIN, "region") == {"step": CALLS}
    via = {row["via"] for row in report["native"] if row["domain"] == STANDIN}
    assert via == {None if SETPROFILE else "ctypes.pinsight_like_kernel"}, via
    assert report["native_unmatched"] == []
    assert report["native_ends_without_begin"] == 0
    assert "Native time by Python caller:" in render_text(report)
    # Perfetto: each region on its thread's track of the provider, joined to its call.
    exported = _perfetto(tmp_path / "trace-both", pid, tmp_path)
    regions = [s for s in exported.slices if s.name == f"[{STANDIN}] region"]
    assert len(regions) == CALLS
    assert {exported.tracks[s.track].name for s in regions} == {STANDIN}
    assert perfetto_trace.check_joins(exported, report) == CALLS


# ---------------------------------------------------------------------------
# The real libpinsight.so (tests/tracing.PINSIGHT_LIB; conftest insists it exists)


def test_real_libpinsight(tmp_path: Path) -> None:
    lib = PINSIGHT_LIB.resolve()
    kernel = build_openmp_kernel(tmp_path)
    env = openmp_env(tmp_path, LD_PRELOAD=str(lib), STANDIN=str(kernel))
    body = STANDIN_WORKLOAD.replace("pinsight_like_kernel", "openmp_region")
    events = (f"{lttng.PROVIDER}:*", f"{OMPT}:*")
    _, alone = run_traced(tmp_path, "alone", body, env, events, activate=False)
    _, both = run_traced(tmp_path, "both", body, env, events, activate=True)
    assert alone.discarded == both.discarded == 0

    # PInsight's events: the same, in number, with and without us.
    ompt_alone, ompt_both = _counts(alone, OMPT), _counts(both, OMPT)
    assert ompt_alone == ompt_both
    # PInsight also reports the initial thread's implicit region (codeptr 0).
    assert ompt_both["parallel_end"] == CALLS
    assert ompt_both["implicit_task_begin"] == CALLS * TEAM

    # Each region's parallel_begin/_end inside the call that ran it, on its thread.
    check_balanced(both)
    windows = _windows(both, "ctypes.openmp_region")
    assert len(windows) == CALLS
    marks = [
        e
        for e in both.events
        if e.short in ("parallel_begin", "parallel_end") and e.fields["parallel_codeptr"] != 0
    ]
    assert len(marks) == 2 * CALLS
    where = collections.Counter(_window_of(windows, e) for e in marks)
    assert where == {i: 2 for i in range(CALLS)}
    assert {e.ctx["vtid"] for e in marks} == {windows[0][2]}

    # SIGUSR1 while it runs: PInsight reloads (it says so on stderr) and so do we.
    reloading = "PInsight: Control thread reloading config"
    r = run_signals(tmp_path, env, program=REAL_SIGNAL_PROGRAM, handled_line=reloading)
    assert r["our_reloads"] == SIGNALS, r
    stderr = r["stderr"]
    assert stderr.count(reloading) == SIGNALS, stderr

REAL_SIGNAL_PROGRAM = textwrap.dedent("""
    import ctypes, json, os, time
    import pinsight_python
    pinsight_python.activate()
    kernel = ctypes.CDLL(os.environ["STANDIN"])
    kernel.openmp_region.restype = ctypes.c_double
    kernel.openmp_region(20000)
    print("ready", flush=True)
    while not os.path.exists("sent"):
        kernel.openmp_region(20000)
    deadline = time.monotonic() + 20
    while pinsight_python.status()["reloads"] < int(os.environ["SIGNALS"]):
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    time.sleep(0.5)  # PInsight's control thread logs its reloads
    st = pinsight_python.status()
    print(json.dumps({"our_reloads": st["reloads"], "first": True}), flush=True)
""")


def test_trace_records_a_command_that_preloads_libpinsight(tmp_path: Path) -> None:
    """LD_PRELOAD=libpinsight.so pinsight-python trace -- python app.py: trace copes
    with PInsight's C handler for SIGUSR1 in its own process, and records PInsight's
    domains beside Python's, each region inside the Python call that ran it."""
    kernel = build_openmp_kernel(tmp_path)
    env = openmp_env(tmp_path, LD_PRELOAD=str(PINSIGHT_LIB.resolve()), STANDIN=str(kernel))
    proc, out = trace_openmp_workload(tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    pid = int(proc.stdout.split()[0])
    trace = read_trace(out)
    mine = Trace(out, [e for e in trace.events if e.ctx.get("vpid") == pid], trace.discarded)
    assert mine.discarded == 0
    check_balanced(mine)
    windows = _windows(mine, "ctypes.openmp_region")
    assert len(windows) == CALLS
    regions = [e for e in mine.events
               if e.short == "parallel_begin" and e.fields["parallel_codeptr"] != 0]
    assert len(regions) == CALLS
    assert collections.Counter(_window_of(windows, e) for e in regions) == {
        i: 1 for i in range(CALLS)}

    # Our report: each parallel region under the call that ran it; the initial
    # implicit region's begins, which never end, listed as unmatched, not timed.
    report = native_report(out, pid)
    caller = assert_openmp_regions_under_their_call(report)

    # The flame graph: each region a child frame of its caller, nested as it ran.
    folded = subprocess.run(
        [sys.executable, "-m", "pinsight_python.cli", "flamegraph", "--folded", "--pid", str(pid),
         str(out)], capture_output=True, text=True, check=True, timeout=120,
    ).stdout
    weights: Dict[str, int] = collections.defaultdict(int)
    for line in folded.splitlines():
        path, weight = line.rsplit(" ", 1)
        weights[path] += int(weight)
    # Python frames are labelled "name (file:line)", native ones by name alone.
    # The regions are drawn under the innermost frame: the ctypes call under sys.monitoring.
    drawn_under = caller if SETPROFILE else "ctypes.openmp_region"
    under: Dict[str, int] = collections.defaultdict(int)
    for path, weight in weights.items():
        frames = path.split(";")
        at = [i for i, f in enumerate(frames)
              if f == drawn_under or f.startswith(f"{drawn_under} (")]
        if at:
            under[";".join(frames[at[-1] + 1:])] += weight
    assert under.get("[OpenMP] parallel", 0) > 0, folded
    assert under.get("[OpenMP] parallel;[OpenMP] implicit_task", 0) > 0, folded

    # trace's summary names the heaviest regions and their callers.
    from pinsight_python.reading.summary import summarize

    native = [ln for ln in summarize(out, progress="never") if ln.startswith("native time")]
    assert len(native) == 1 and "[OpenMP] parallel" in native[0] and caller in native[0], native

    # Perfetto: each region a slice on its own thread; the workers' with an arrow
    # from the thread of the call that opened their parallel region.
    exported = tmp_path / "trace.json"
    subprocess.run([sys.executable, "-m", "pinsight_python.cli", "export", "--pid", str(pid),
                    "-o", str(exported), str(out)], capture_output=True, check=True, timeout=120)
    events = json.loads(exported.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X" and e["cat"] == "openmp"]
    main_tid = windows[0][2]
    assert sum(e["name"] == "[OpenMP] parallel" and e["tid"] == main_tid for e in slices) == CALLS
    workers = [e for e in slices if e["name"] == "[OpenMP] implicit_task" and e["tid"] != main_tid]
    assert len(workers) >= CALLS * (TEAM - 1) - 1, len(workers)
    starts = [e for e in events if e["ph"] == "s" and e["cat"] == "native_flow"]
    ends = [e for e in events if e["ph"] == "f" and e["cat"] == "native_flow"]
    assert {e["tid"] for e in starts} == {main_tid}
    assert len(starts) == len(ends) >= len(workers)
    unmatched = {(u["domain"], u["name"]): u["count"] for u in report["native_unmatched"]}
    assert unmatched[("openmp", "parallel")] == unmatched[("openmp", "implicit_task")] == 1
    _assert_openmp_in_perfetto(_perfetto(out, pid, tmp_path), report, main_tid)


def _assert_openmp_in_perfetto(perfetto: perfetto_trace.PerfettoTrace, report: Dict[str, Any],
                               main_tid: int) -> None:
    """Perfetto's own format: the regions on each thread's OpenMP track, every one
    joined by a flow to the call that opened it, the workers' too (report's join)."""
    openmp = {s.track for s in perfetto.slices if s.category == "openmp"}
    assert {perfetto.tracks[t].name for t in openmp} == {"OpenMP"}
    assert sum(s.name == "[OpenMP] parallel" and perfetto.thread_of(s).tid == main_tid
               for s in perfetto.slices) == CALLS
    assert len({perfetto.thread_of(s).tid for s in perfetto.slices
                if s.track in openmp}) == TEAM
    assert perfetto_trace.check_joins(perfetto, report) >= CALLS * (TEAM + 1) - 1


@pytest.mark.parametrize(
    ("option", "expected"),
    [("none", 0), ("openmp", CALLS), ("mpi", 0), ("all", CALLS)],
)
def test_trace_domains_option(tmp_path: Path, option: str, expected: int) -> None:
    kernel = build_openmp_kernel(tmp_path)
    env = openmp_env(tmp_path, LD_PRELOAD=str(PINSIGHT_LIB.resolve()), STANDIN=str(kernel))
    proc, out = trace_openmp_workload(tmp_path, env, "--domains", option)
    assert proc.returncode == 0, proc.stderr
    trace = read_trace(out)
    regions = [e for e in trace.events
               if e.short == "parallel_begin" and e.fields["parallel_codeptr"] != 0]
    assert len(regions) == expected
    assert any(e.name.startswith(f"{lttng.PROVIDER}:") for e in trace.events)


def test_trace_domains_option_refuses_an_unknown_domain(tmp_path: Path) -> None:
    proc, out = trace_openmp_workload(tmp_path, openmp_env(tmp_path), "--domains", "opemnp")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "pinsight-python trace: error: --domains: unknown domain 'opemnp' (expected a list of "
        "openmp, mpi, cuda, or all, or none); did you mean 'openmp'?"
    ), proc.stderr
    assert not out.exists()
