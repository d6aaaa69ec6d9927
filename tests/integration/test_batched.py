"""Batched events (issue 26): the batched payload packs a thread's compact records
into one event_block per block, and the reader gives what the per-event payloads give.

- The same deterministic workload (threads, generators, exceptions, native calls,
  rate control) traced compact and batched: report, folded stacks and Chrome export
  agree on everything but times and ids.
- Blocks are flushed at thread exit and process exit (the last block of each thread
  says so), at fork, and at a fatal signal; kill -9 loses only the unflushed records,
  and the reader says on which thread and after when.
- A snapshot holds the latest events.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from pinsight_python.reading import analysis
from pinsight_python.recording import lttng
from tests.tracing import (
    ANALYSES,
    CLI,
    LOSSY,
    MIXED_WORKLOAD,
    OMP,
    OMP_PROGRAM,
    OMP_THREADS,
    PINSIGHT_LIB,
    SYSTEM_PYTHON,
    WRITER_PROGRAM,
    Trace,
    Tracer,
    assert_openmp_regions_under_their_call,
    build_openmp_kernel,
    chrome_frames,
    clean_env,
    cli,
    folded_stacks,
    isolated,
    isolated_session,
    native_report,
    normalized,
    openmp_env,
    read_trace,
    replayed_stacks,
    run_dying,
    system_lttng_env,
    trace_openmp_workload,
)

RATE_CONFIG = """
[Lexgion(Python).default]
    max_num_traces = 7
"""


def report(trace: Trace) -> Dict[str, Any]:
    return json.loads(cli("report", "--json", "--top", "0", str(trace.path)))


def summary(trace: Trace) -> str:
    """What `trace` prints after the run."""
    proc = subprocess.run(
        [sys.executable, "-c",
         "import sys; from pinsight_python.reading.analysis import read_trace; "
         "from pinsight_python.reading.summary import summary_lines; "
         "print('\\n'.join(summary_lines(read_trace(sys.argv[1]))))", str(trace.path)],
        capture_output=True, text=True, check=True)
    return proc.stdout


def mask(text: str) -> str:
    """Each run's own script (progN.py) named alike."""
    return re.sub(r"prog\d+", "prog", text)


def untimed(value: Any) -> Any:
    """Without the shares of time (share_of_caller, ...), which normalized() keeps."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.startswith("share")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def same_run(rep: Dict[str, Any]) -> Any:
    return normalized(untimed(json.loads(mask(json.dumps(rep)))))


def calls(rep: Dict[str, Any]) -> Dict[str, int]:
    out: Dict[str, int] = collections.Counter()
    for p in rep["processes"]:
        for f in p["functions"]:
            out[f["name"]] += f["calls"]
    return out


@pytest.fixture(scope="module")
def payload_traces(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Trace]:
    """MIXED_WORKLOAD traced compact and batched, without and with rate control."""
    tmp = tmp_path_factory.mktemp("batched")
    config = tmp / "rate.txt"
    config.write_text(textwrap.dedent(RATE_CONFIG))
    tracer = Tracer(tmp)
    traces = {}
    for payload in ("compact", "batched"):
        traces[payload] = tracer.run(
            MIXED_WORKLOAD, activate=f"pinsight_python.activate(payload={payload!r})").trace
        traces[payload + "-rate"] = tracer.run(
            MIXED_WORKLOAD,
            activate=f"pinsight_python.activate(payload={payload!r}, config={str(config)!r})",
        ).trace
    # Each traced thread writes its own blocks, with no writer thread.
    traces["batched-inline"] = tracer.run(
        MIXED_WORKLOAD, activate="pinsight_python.activate(payload='batched')",
        env={"PINSIGHT_PYTHON_BLOCK_WRITER": "inline"}).trace
    return traces


def blocks_by_thread(trace: Trace) -> Dict[int, List[Dict[str, Any]]]:
    out: Dict[int, List[Dict[str, Any]]] = collections.defaultdict(list)
    for e in trace.named("event_block"):
        out[e.fields["tid"]].append(e.fields)
    return out


def test_batched_trace_is_blocks(payload_traces: Dict[str, Trace]) -> None:
    batched = payload_traces["batched"]
    kinds = collections.Counter(e.short for e in batched.events)
    assert kinds["event_block"] >= 2
    assert not [k for k in kinds if k.startswith("compact_") or k.startswith("function_")]
    assert "generator_end" not in kinds  # a record too
    assert kinds["code_info"] and kinds["callable_info"]  # the names, as compact's
    compact = payload_traces["compact"]
    records = sum(e.fields["record_count"] for e in batched.named("event_block"))
    assert compact.named("generator_end")
    assert records == sum(1 for e in compact.events
                          if e.short.startswith("compact_") or e.short == "generator_end")
    threads = blocks_by_thread(batched)
    assert len(threads) == 2
    for blocks in threads.values():
        # An empty block opens the thread's stream; the numbering has no gap; the
        # last block (thread exit, process exit) says it is the last.
        assert blocks[0]["record_count"] == 0 and blocks[0]["first_sequence"] == 0
        expected = 0
        for b in blocks:
            assert b["first_sequence"] == expected
            expected += b["record_count"]
        assert [b["flags"] for b in blocks].count(1) == 1 and blocks[-1]["flags"] == 1


@pytest.mark.parametrize("rate", [False, True, "inline"], ids=["all", "rate-control", "inline"])
def test_batched_and_compact_read_alike(
    payload_traces: Dict[str, Trace], tmp_path: Path, rate: object
) -> None:
    if rate == "inline":
        traces = {"compact": payload_traces["compact"], "batched": payload_traces["batched-inline"]}
        rate = False
    else:
        suffix = "-rate" if rate else ""
        traces = {name: payload_traces[name + suffix] for name in ("compact", "batched")}
    reports = {name: report(t) for name, t in traces.items()}
    for rep in reports.values():
        assert not rep["missing_events"]
        for proc in rep["processes"]:
            assert proc["unbalanced"]["implicitly_closed"] == 0
            assert proc["unbalanced"]["open_at_end"] == 0
    assert same_run(reports["compact"]) == same_run(reports["batched"])
    names = calls(reports["batched"])
    assert {"leaf", "numbers", "Box.total", "math.sqrt", "len", "fails", "parse"} <= set(names)
    if rate:
        assert names["leaf"] <= 14 and names["Box.total"] == 7 + 1, names
    else:
        assert names["Box.total"] == 21, names

    folded = {name: [mask(line) for line in folded_stacks(cli("flamegraph", "--folded",
                                                                 str(t.path)))]
              for name, t in traces.items()}
    assert folded["compact"] == folded["batched"] and folded["batched"]

    exported = {}
    for name, t in traces.items():
        out = tmp_path / f"{name}.json"
        cli("export", "-o", str(out), str(t.path))
        exported[name] = mask(json.dumps(chrome_frames(out)))
    assert exported["compact"] == exported["batched"]

    summaries = {name: summary(t).splitlines() for name, t in traces.items()}
    assert "WARNING" not in "".join(summaries["batched"])
    assert summaries["batched"][0] == summaries["compact"][0]  # events by kind


@pytest.mark.parametrize(("path", "callstack_id"), ANALYSES, ids=["callstack", "crossdomain"])
def test_unbatched_trace_reads_as_compact_in_trace_compass(
    payload_traces: Dict[str, Trace], tmp_path: Path, path: Path, callstack_id: str
) -> None:
    out = tmp_path / "unbatched"
    cli("unbatch", "-o", str(out), str(payload_traces["batched"].path))
    unbatched = read_trace(out)
    kinds = collections.Counter(e.short for e in unbatched.events)
    assert "event_block" not in kinds and kinds["compact_function_begin"]
    # Each thread's events in time order, as LTTng writes them.
    for events in unbatched.by_thread().values():
        assert [e.ts for e in events] == sorted(e.ts for e in events)
    compact = replayed_stacks(payload_traces["compact"].events, path, callstack_id)
    assert replayed_stacks(unbatched.events, path, callstack_id) == compact
    # Our reader too: what the batched trace gives.
    assert same_run(report(unbatched)) == same_run(report(payload_traces["batched"]))


def test_kill9_loses_only_unflushed_blocks_and_says_where(tmp_path: Path) -> None:
    trace = run_dying(tmp_path, "kill")
    rep = report(trace)
    names = calls(rep)
    # Flushed by the control thread while the program slept: all there.
    assert names["before"] == 100
    assert names["time.sleep"] == 1
    # ... on the main thread, though the control thread wrote the block.
    (proc,) = rep["processes"]
    (main,) = [t for t in proc["threads"] if t["vtid"] == proc["vpid"]]
    assert {f["name"]: f["calls"] for f in main["functions"]}["before"] == 100
    # The records written after the sleep never left the process.
    assert names.get("after", 0) == 0
    (missing,) = rep["missing_events"]
    assert missing["count"] is None
    last_block = max(e.ts for e in trace.named("event_block"))
    assert missing["after_ns"] <= last_block
    assert any("events missing on thread" in w and "kill -9" in w for w in rep["warnings"])
    assert "WARNING: events missing on thread" in summary(trace)
    svg = tmp_path / "killed.svg"
    cli("flamegraph", "-o", str(svg), str(trace.path))
    assert "events missing on 1 thread(s)" in svg.read_text()


@pytest.mark.parametrize("how", ["term", "abort"])
def test_fatal_signal_flushes_the_thread(tmp_path: Path, how: str) -> None:
    trace = run_dying(tmp_path, how)
    names = calls(report(trace))
    assert names["before"] == 100
    assert names["after"] == 10  # written by the signal handler
    assert names["deep"] == 6


FORKING = """
import os
def child_work():
    return sum(range(10))
def parent_work():
    return sum(range(20))
def before_fork():
    return 1
before_fork()
pid = os.fork()
if pid == 0:
    child_work()
else:
    os.waitpid(pid, 0)
    parent_work()
"""


def test_fork_flushes_the_parent_and_opens_the_child(tracer: Tracer) -> None:
    run = tracer.run(FORKING, activate="pinsight_python.activate(payload='batched')")
    rep = report(run.trace)
    by_process = {p["vpid"]: {f["name"]: f["calls"] for f in p["functions"]}
                  for p in rep["processes"]}
    assert len(by_process) == 2
    parent = [f for f in by_process.values() if "parent_work" in f]
    child = [f for f in by_process.values() if "child_work" in f]
    assert len(parent) == 1 and len(child) == 1
    assert parent[0]["before_fork"] == 1 and "before_fork" not in child[0]
    assert "parent_work" not in child[0]
    assert not rep["missing_events"]
    # The child numbers its records from 0 again, after its own opening block.
    child_vpid = next(v for v, f in by_process.items() if "child_work" in f)
    child_blocks = [e.fields for e in run.trace.named("event_block")
                    if e.ctx["vpid"] == child_vpid]
    assert child_blocks[0]["first_sequence"] == 0 and child_blocks[0]["record_count"] == 0


SNAPSHOT_LOOP = """
import os, sys, time
import pinsight_python
pinsight_python.activate(payload="batched")
def tick(i):
    return sum(range(i % 50))
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
for _ in range(40):
    fib(18)
end = time.monotonic() + 3
i = 0
while time.monotonic() < end:
    tick(i)
    i += 1
    time.sleep(0.002)
def last_call():
    return 0
last_call()
"""


def test_snapshot_holds_the_latest_events(tmp_path: Path) -> None:
    cpu = min(os.sched_getaffinity(0))
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(SNAPSHOT_LOOP))
    with isolated(tmp_path / "snap", snapshot=True, subbuf_size="64K", num_subbuf=4) as (
        session, run_as
    ):

        def in_group() -> None:
            if run_as is not None:
                run_as()
            os.sched_setaffinity(0, {cpu})  # one buffer, overwritten many times

        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                             preexec_fn=in_group, timeout=120, check=False)
        assert run.returncode == 0, run.stderr
        session.record_snapshot()
    assert session.output is not None
    trace = read_trace(session.output)
    assert not trace.named("process_info"), "the buffers did not wrap"
    names = calls(report(trace))
    assert names.get("tick", 0) > 50, names
    assert names.get("last_call") == 1  # the end of the run, flushed at exit


def test_payload_batched_option(tmp_path: Path) -> None:
    config = tmp_path / "batched.txt"
    config.write_text("[Python]\npayload = batched\n")
    code = ("import pinsight_python, os; pinsight_python.activate({}); "
            "print(pinsight_python.status()['payload'])")
    env = clean_env()

    def payload(kwargs: str, **extra: str) -> str:
        proc = subprocess.run([sys.executable, "-c", code.format(kwargs)], capture_output=True,
                              text=True, env={**env, **extra}, check=True)
        return proc.stdout.strip()

    assert payload(f"config={str(config)!r}") == "batched"
    assert payload("", PINSIGHT_PYTHON_PAYLOAD="batched") == "batched"
    assert payload("payload='batched'") == "batched"
    # Another clock than CLOCK_MONOTONIC: the blocks would not line up; compact then.
    proc = subprocess.run([sys.executable, "-c", code.format("payload='batched'")],
                          capture_output=True, text=True, check=True,
                          env={**env, "LTTNG_UST_CLOCK_PLUGIN": "/nonexistent.so"})
    assert proc.stdout.strip() == "compact"
    assert "refused under LTTNG_UST_CLOCK_PLUGIN" in proc.stderr


def test_trace_batch_option(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("def f():\n    return 1\nfor _ in range(5):\n    f()\n")
    out = tmp_path / "t"
    proc = subprocess.run(
        [sys.executable, "-m", "pinsight_python.cli", "trace", "--batch", "-o", str(out), "--",
         sys.executable, str(script)],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    trace = read_trace(out)
    assert trace.named("event_block")
    assert calls(report(trace))["f"] == 5


def test_signal_handlers_leave_the_program_alone(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import signal, os, pinsight_python
        pinsight_python.activate(payload="batched")
        hits = []
        signal.signal(signal.SIGTERM, lambda *a: hits.append(1))
        os.kill(os.getpid(), signal.SIGTERM)
        print(signal.getsignal(signal.SIGABRT) is signal.SIG_DFL, hits)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=clean_env())
    # The program's own handler ran (it replaced ours), and Python sees no change.
    assert proc.stdout.strip() == "True [1]"


def test_lost_blocks_are_counted_where_they_were_lost(tmp_path: Path) -> None:
    # Two 8 KiB sub-buffers per CPU, in discard mode, read every 200 ms only:
    # LTTng drops many 4 KiB blocks, however fast the machine runs the program.
    script = tmp_path / "lossy.py"
    script.write_text(textwrap.dedent(LOSSY))
    out = tmp_path / "lossy"
    with isolated_session(out, subbuf_size="8K", num_subbuf=2, read_timer_us=200_000) as run_as:
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=120, check=True, preexec_fn=run_as)
    rep = report(read_trace(out))
    assert rep["discarded"]["events"] > 0, "LTTng kept up: nothing was lost"
    counted = [m for m in rep["missing_events"] if m["count"]]
    assert counted
    # The process ended normally: every thread's last block is there.
    assert counted == rep["missing_events"]
    # Decoding the CPUs' streams on separate threads changes nothing (a loss's
    # record was once out of time order there, and blocks after it arrived late).
    one_thread = analysis.read_trace(out, progress="never", decode_threads=1)
    two_threads = analysis.read_trace(out, progress="never", decode_threads=2)
    assert one_thread.raw.missing_events == two_threads.raw.missing_events
    workers = {m["vtid"] for m in counted}
    # Every record the workers wrote is either read or counted missing, on its thread.
    read = {t["vtid"]: t for p in rep["processes"] for t in p["threads"]}
    assert workers <= set(read)
    kinds = rep["event_counts"]
    frames = sum(kinds[k] for k in ("function_begin", "function_end", "c_call_begin",
                                    "c_call_end"))
    missing = sum(m["count"] for m in counted)
    emitted = int(proc.stdout)
    assert missing > 0.02 * emitted
    # Exact: `emitted` leaves out only the main thread's records before and
    # after the work (its imports and activation, the interpreter's exit).
    assert emitted <= frames + missing <= emitted + 400
    assert any("events missing on thread" in w and "lost block" in w for w in rep["warnings"])


STEADY = """
import time
def step(n):
    return n + 1
calls = 0
for _ in range(200):
    for _ in range(100):
        calls = step(calls)
    time.sleep(0.005)
print(calls)
"""


def _trace_in_pages(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`trace ARGS` into 64 sub-buffers of 4 KiB, LTTng's smallest, per CPU: room
    for a start-up's burst of per-event records (code_info, imports), not for much more."""
    proc = subprocess.run(
        [*CLI, "trace", "--subbuf-size", "4k", "--num-subbuf", "64", "--no-summary", "-o",
         str(out), *args], capture_output=True, text=True, env=clean_env(), timeout=240,
        check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_blocks_fit_the_smallest_sub_buffer(tmp_path: Path) -> None:
    """LTTng discards an event larger than its sub-buffer, however many sub-buffers
    there are. A block's event fits a 4 KiB page, the smallest sub-buffer, which
    --buffer-budget can come down to: every record of a steady program arrives
    (blocks of 4 KiB of records and more were all lost: not one call of step)."""
    script = tmp_path / "steady.py"
    script.write_text(STEADY)
    out = tmp_path / "steady"
    # The steady part's 200 records per 5 ms: about a second of them fits the channel.
    proc = _trace_in_pages(out, "--batch", "--", sys.executable, str(script))
    assert int(proc.stdout) == 20_000
    rep = report(read_trace(out))
    calls = {f["name"]: f["calls"] for p in rep["processes"] for f in p["functions"]}
    if rep["discarded"]["events"] == 0:
        assert not [m for m in rep["missing_events"] if m["count"]]
        assert calls["step"] == 20_000
    else:
        # A consumer daemon starved by a loaded machine loses a few blocks, counted.
        assert calls.get("step", 0) > 18_000


def test_a_long_command_line_fits_the_smallest_sub_buffer(tmp_path: Path) -> None:
    """process_info carries the command line, and a `python -c` program's is its
    code: cut to 2 KiB and marked with its length, the event still fits a 4 KiB
    sub-buffer (it was discarded, and with it the process's rank and command)."""
    code = "calls = 0\n" + "# padding\n" * 600 + "print(calls)\n"
    out = tmp_path / "long-argv"
    # process_info is the process's first event: the start-up's burst of events
    # after it can overflow so small a channel, it cannot.
    proc = _trace_in_pages(out, "--", sys.executable, "-c", code)
    assert proc.stdout == "0\n"
    (info,) = read_trace(out).named("process_info")
    argv = info.fields["argv"]
    whole = f"-c {code}"
    assert argv.startswith("-c calls = 0\n# padding\n")
    assert argv.endswith(f" [... {len(whole.encode())} bytes]")
    assert len(argv.encode()) < 2100


def test_native_regions_go_to_the_same_python_callers(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """OpenMP regions (another provider, written per-event while a block is open)
    attributed as in a per-event trace: to the Python call that ran them, on the
    caller's thread and its workers'."""
    kernel_dir = request.getfixturevalue("omp_kernel_dir")
    tracer = Tracer(tmp_path)
    reports = {}
    for payload in ("compact", "batched"):
        run = tracer.run(
            OMP_PROGRAM.format(kernel_dir=str(kernel_dir)),
            activate=f"pinsight_python.activate(payload={payload!r})",
            events=(f"{lttng.PROVIDER}:*", f"{OMP}:*"),
            env={"OMP_NUM_THREADS": str(OMP_THREADS)},
        )
        assert run.trace.discarded == 0
        reports[payload] = report(run.trace)
    native = {p: same_run({k: r[k] for k in ("native", "native_unmatched",
                                             "native_ends_without_begin")})
              for p, r in reports.items()}
    assert native["compact"] == native["batched"]
    via = {row["via"] for row in reports["batched"]["native"] if row["caller"]}
    # The native call Python made, apart from the Python function that made it.
    assert via == {"omp_kernel.saxpy", "omp_kernel.dot"}, via
    assert same_run(reports["compact"]) == same_run(reports["batched"])


def test_pinsight_openmp_workers_joined_to_the_batched_call(tmp_path: Path) -> None:
    """PInsight's real OpenMP domain: a worker thread's implicit tasks (threads that run
    no Python) go to the Python call that opened their parallel region, which is in
    the calling thread's blocks: the reader keeps every thread's events in time order."""
    kernel = build_openmp_kernel(tmp_path)
    env = openmp_env(tmp_path, LD_PRELOAD=str(PINSIGHT_LIB.resolve()), STANDIN=str(kernel))
    proc, out = trace_openmp_workload(tmp_path, env, "--batch")
    assert proc.returncode == 0, proc.stderr
    pid = int(proc.stdout.split()[0])
    assert read_trace(out).named("event_block")
    report = native_report(out, pid)
    assert_openmp_regions_under_their_call(report)
    assert not report["missing_events"]


ON_AND_OFF = """
import threading, time
import pinsight_python
def first():
    return 1
def hidden():
    return 2
def second():
    return 3
def waiting(stop):
    stop.wait()
stop = threading.Event()
t = threading.Thread(target=waiting, args=(stop,))
pinsight_python.activate(payload="batched")
t.start()
first()
pinsight_python.set_mode("STANDBY")
hidden()
time.sleep(0.3)
pinsight_python.set_mode("TRACING")
second()
pinsight_python.deactivate()
hidden()
pinsight_python.activate(payload="batched")
first()
stop.set()
t.join()
"""


def test_blocks_follow_mode_changes_and_deactivation(tracer: Tracer) -> None:
    run = tracer.run(ON_AND_OFF, activate=None)
    trace = run.trace
    rep = report(trace)
    assert calls(rep)["first"] == 2 and calls(rep)["second"] == 1
    assert "hidden" not in calls(rep)
    assert not rep["missing_events"]
    main = [e.fields for e in trace.named("event_block") if e.fields["tid"] == e.ctx["vpid"]]
    # The main thread's stream: opened, closed (flag 1) when the mode left TRACING,
    # opened again, closed at deactivate(), opened again, closed at exit; numbered
    # without a gap throughout.
    assert [b["flags"] for b in main if b["record_count"] == 0 or b["flags"] & 1].count(1) == 3
    expected = 0
    for b in main:
        assert b["first_sequence"] == expected
        expected += b["record_count"]
    # The records before the switch to STANDBY went out before its mode_change.
    (standby,) = [e.ts for e in trace.named("mode_change") if e.fields["mode"] == "STANDBY"]
    finals = [e.ts for e in trace.named("event_block")
              if e.fields["flags"] & 1 and e.fields["tid"] == e.ctx["vpid"]]
    assert len(finals) == 3 and finals[0] <= standby


EXITING = """
import multiprocessing, os, sys
import pinsight_python
pinsight_python.activate(payload="batched")
def work(n):
    return sum(range(n))
def child():
    for i in range(50):
        work(i)
if __name__ == "__main__":
    p = multiprocessing.get_context("fork").Process(target=child)
    p.start()
    p.join()
    for i in range(5):
        work(i)
    sys.stdout.flush()
    os._exit(0)
"""


def test_os_exit_flushes_every_block(tracer: Tracer) -> None:
    """os._exit() runs no exit handler, and multiprocessing's forked children end with
    it: its call writes every thread's last block first."""
    run = tracer.run(EXITING, activate=None)
    rep = report(run.trace)
    assert not rep["missing_events"], rep["missing_events"]
    by_process = [{f["name"]: f["calls"] for f in p["functions"]} for p in rep["processes"]]
    assert sorted(f.get("work", 0) for f in by_process) == [5, 50]
    assert all(f.get("posix._exit") == 1 for f in by_process)


@pytest.mark.parametrize("writer", ["thread", "inline"])
def test_writer_thread_writes_the_blocks(tracer: Tracer, writer: str) -> None:
    """A writer thread encodes the closed segments of every thread and writes their
    blocks (partial ones: the thread's later records are still staged); with
    PINSIGHT_PYTHON_BLOCK_WRITER=inline each thread writes its own. Either way every
    call the program counted is in the trace, balanced, on its own thread, every
    generator's end is a record among them (no generator_end event of its own), and
    no record comes after a later event of its thread (no late records)."""
    run = tracer.run(WRITER_PROGRAM, activate=None, env={"PINSIGHT_PYTHON_BLOCK_WRITER": writer})
    writer_tid, named_as_process, counted = run.stdout.split()
    assert int(counted) == 450000
    blocks = list(run.trace.named("event_block"))
    partial = [b for b in blocks if b.fields["flags"] & 2]
    if writer == "thread":
        # Named as the process: LTTng-UST gives its events that procname.
        assert int(writer_tid) > 0 and named_as_process == "True"
        assert len(partial) > 10
        # Written by the writer for each of the program's threads, whose tid the
        # block carries (a thread whose segments all wait writes its own).
        by_writer = [b for b in partial if b.ctx["vtid"] == int(writer_tid)]
        assert len({b.fields["tid"] for b in by_writer}) == 3
        assert int(writer_tid) not in {b.fields["tid"] for b in blocks}
    else:
        # No thread but the program's writes blocks (partial ones too: a block that
        # filled in the middle of a segment, whose later records come next).
        assert int(writer_tid) == 0
        assert {b.ctx["vtid"] for b in blocks} <= {b.fields["tid"] for b in blocks}
    rep = report(run.trace)
    assert not rep["missing_events"], rep["missing_events"]
    (proc,) = rep["processes"]
    assert proc["unbalanced"]["implicitly_closed"] == 0
    assert proc["unbalanced"]["open_at_end"] == 0
    assert calls(rep)["leaf"] == 450000
    assert not list(run.trace.named("generator_end"))
    (pairs,) = [g for g in proc["generators"] if g["qualname"] == "pair"]
    assert pairs["instances_started"] == pairs["instances_finished"] == 3 * 300
    assert pairs["segments"] == 3 * 300 * 2  # its start, and the resume that ends it
    assert analysis.read_trace(str(run.trace.path)).raw.late_records == 0


INTERLEAVED = """
import os, sys, threading
print(os.getpid(), threading.get_native_id(), flush=True)
sys.path.insert(0, {kernel_dir!r})
import omp_kernel

def step():
    return omp_kernel.saxpy(16, 2.0)  # one chunk: the calling thread's events come at once

for _ in range(300):
    step()
"""

# Each event_block's clock reading (cycles of the stream's clock) beside its time
# from origin: a block's base_clock is a reading of that same clock.
BLOCK_CLOCKS = """
import json, sys
import bt2
for msg in bt2.TraceCollectionMessageIterator(sys.argv[1]):
    if not isinstance(msg, bt2._EventMessageConst) or not msg.event.name.endswith(":event_block"):
        continue
    snapshot = msg.default_clock_snapshot
    assert snapshot.clock_class.frequency == 1000000000
    p = msg.event.payload_field
    print(json.dumps({"tid": int(p["tid"]), "ts": snapshot.ns_from_origin,
                      "clock": snapshot.value, "base_clock": int(p["base_clock"]),
                      "count": int(p["record_count"]),
                      "records": bytes(int(b) for b in p["records"]).hex()}))
"""


def decoded_records(block: Dict[str, Any]) -> List[Tuple[int, int, int, int]]:
    """(kind, code_id, callable_id, ns from origin) of a block's records (format/wire.h)."""
    data = bytes.fromhex(block["records"])
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    def signed() -> int:
        v = varint()
        return (v >> 1) ^ -(v & 1)

    clock = block["base_clock"] + block["ts"] - block["clock"]
    code = callable_id = 0
    out = []
    for _ in range(block["count"]):
        kind = data[pos] >> 3
        pos += 1
        code += signed()
        if kind in (2, 3):
            callable_id += signed()
            varint()  # the call site's line
        elif kind == 4:  # a generator's end: its lifetime and segments
            varint()
            varint()
        clock += varint()
        out.append((kind, code, callable_id, clock))
    assert pos == len(data)
    return out


@pytest.mark.parametrize("cycle_clock", ["1", "0"])
def test_records_interleave_with_another_domain(
    tmp_path: Path, request: pytest.FixtureRequest, cycle_clock: str
) -> None:
    """A block's records carry LTTng's own clock (the cycle counter mapped to it per
    segment, or clock_gettime with PINSIGHT_PYTHON_CYCLE_CLOCK=0): every OpenMP event
    of another provider, written per event while the block is open, falls between the
    records of the native call that ran it, on the calling thread and its workers,
    and no record of the calling thread falls inside another call's region."""
    kernel_dir = request.getfixturevalue("omp_kernel_dir")
    run = Tracer(tmp_path).run(
        INTERLEAVED.format(kernel_dir=str(kernel_dir)),
        activate="pinsight_python.activate(payload='batched')",
        events=(f"{lttng.PROVIDER}:*", f"{OMP}:*"),
        env={"OMP_NUM_THREADS": str(OMP_THREADS), "PINSIGHT_PYTHON_CYCLE_CLOCK": cycle_clock},
    )
    assert run.trace.discarded == 0
    pid, main_tid = map(int, run.stdout.split()[:2])
    dump = subprocess.run([SYSTEM_PYTHON, "-c", BLOCK_CLOCKS, str(run.trace.path)],
                          env=system_lttng_env(), capture_output=True, text=True, check=True)
    blocks = [json.loads(line) for line in dump.stdout.splitlines()]
    records = [r for b in blocks if b["tid"] == main_tid for r in decoded_records(b)]
    times = [r[3] for r in records]
    assert times == sorted(times), "a thread's records go forward in time"
    saxpy = {e.fields["callable_id"] for e in run.trace.named("callable_info")
             if e.fields["name"] == "omp_kernel.saxpy"}
    assert len(saxpy) == 1
    calls = [r for r in records if r[0] in (2, 3) and r[2] in saxpy]
    windows = list(zip(calls[::2], calls[1::2]))
    assert len(windows) == 300 and all(b[0] == 2 and e[0] == 3 for b, e in windows)
    regions: Dict[int, List[int]] = collections.defaultdict(list)
    for e in run.trace.events:
        if e.name.startswith(OMP) and e.ctx["vpid"] == pid:
            regions[e.fields["region_id"]].append(e.ts)
    assert len(regions) == 300
    for (begin, end), region in zip(windows, sorted(regions)):
        events = regions[region]
        assert begin[3] <= min(events) and max(events) <= end[3], (
            f"region {region}: native events {min(events)}..{max(events)} outside its call's "
            f"records {begin[3]}..{end[3]}")
    # Between two calls the calling thread's records (step's end and begin) fall
    # between the regions' events.
    spans = sorted((min(v), max(v)) for v in regions.values())
    for t in times:
        assert not any(lo < t < hi for lo, hi in spans), f"a record at {t} inside a region"


LONG_NAMES = """
import sys
# A function whose name and file are each longer than a 4 KiB page, and a class
# (called natively: no __init__ of its own) whose name is too.
name = "f_" + "q" * 5000 + "_end"
file = "/srcx/" + "\\u00e4\\u20ac\\U0001f600" * 600 + "/mod.py"
space = {}
exec(compile(f"def {name}():\\n    return 1\\n", file, "exec"), space)
Named = type("T" + "t" * 5000, (), {})
print(sum(space[name]() for _ in range(3)), sum(1 for _ in (Named(), Named())))
"""


@pytest.mark.parametrize("payload", ["full", "compact", "batch"])
def test_long_names_fit_the_smallest_sub_buffer(tmp_path: Path, payload: str) -> None:
    """Every event carries names of at most 1 KiB (cut in the middle, on UTF-8
    character starts, marked with the whole length): a code_info, callable_info or
    full-payload event with a longer name did not fit a 4 KiB sub-buffer and was
    discarded, and with a code_info every event of the function lost its name."""
    script = tmp_path / "long_names.py"
    script.write_text(LONG_NAMES)
    out = tmp_path / "long-names"
    flags = [] if payload == "full" else [f"--{payload}"]
    proc = _trace_in_pages(out, *flags, "--", sys.executable, str(script))
    assert proc.stdout == "3 2\n"
    trace = read_trace(out)
    assert trace.discarded == 0
    qualname = "f_" + "q" * 5000 + "_end"
    # 1,004 bytes of the name kept beside the 20 of the mark, half before it.
    cut_qualname = f"{qualname[:502]}[... 5006 bytes ...]{qualname[-502:]}"
    infos = [e for e in trace.named("code_info") if e.fields["qualname"].startswith("f_q")]
    assert [e.fields["qualname"] for e in infos] == [cut_qualname]
    filename = infos[0].fields["filename"]
    # 2-, 3- and 4-byte characters: the head's cut at byte 502 falls inside an ä and
    # moves back one byte, the tail's inside a 😀 and moves forward one.
    whole = "/srcx/" + "\u00e4\u20ac\U0001f600" * 600 + "/mod.py"
    head, tail = filename.split(f"[... {len(whole.encode())} bytes ...]")
    assert whole.startswith(head) and whole.endswith(tail)
    assert (len(head.encode()), len(tail.encode())) == (501, 502)
    callable_name = "__main__.T" + "t" * 5000
    rep = report(trace)
    assert rep["discarded"]["events"] == 0
    named = calls(rep)
    assert named[cut_qualname] == 3 and qualname not in named
    cut_callable = f"{callable_name[:502]}[... 5010 bytes ...]{callable_name[-502:]}"
    longest = max(len(value.encode()) for e in trace.events if e.short != "process_info"
                  for value in e.fields.values() if isinstance(value, str))
    assert longest == 1024
    if payload == "full":
        assert trace.functions()[cut_qualname] == 3
    # The setprofile backend (before 3.12) sees native calls of builtin functions
    # only, not of a class.
    if sys.version_info < (3, 12):
        return
    if payload == "full":
        assert [e.fields["callee_name"] for e in trace.named("c_call_begin")
                if e.fields["callee_name"].startswith("__main__.Tt")] == [cut_callable] * 2
    else:
        assert [e.fields["name"] for e in trace.named("callable_info")
                if e.fields["name"].startswith("__main__.Tt")] == [cut_callable]
