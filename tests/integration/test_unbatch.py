"""`pinsight-python unbatch` (issue 36): the C++ conversion (src/reader/unbatch.cpp,
CTF written directly) gives, event by event, what the Python one it replaced
(tests/unbatch_bt2.py, a babeltrace2 graph feeding sink.ctf.fs) gave: names,
timestamps, fields, contexts and each thread's order, one stream per thread. On
threads and processes, a process killed with blocks unflushed, a trace whose
blocks LTTng discarded, and partial blocks (the writer thread's: a thread's events
after such a block's last record wait for its next block)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.tracing import (
    HERE,
    LOSSY,
    SYSTEM_PYTHON,
    WRITER_PROGRAM,
    Trace,
    cli,
    isolated_session,
    read_trace,
    report_json,
    run_dying,
    system_lttng_env,
)

# Threads, a forked child and a second interpreter (processes), generators,
# exceptions and native calls; blocks flushed at exits, at fork and by the
# control thread while a thread sleeps.
PROCESSES = """
import os, subprocess, sys, threading, time, pinsight_python
pinsight_python.activate(payload="batched")

def leaf(x):
    return abs(x) + len([x])

def numbers(n):
    for i in range(n):
        yield leaf(i)

def fails():
    raise ValueError("unwound")

def work(n):
    for i in range(n):
        sum(numbers(i % 7))
        try:
            fails()
        except ValueError:
            pass

threads = [threading.Thread(target=work, args=(300 + 100 * k,)) for k in range(3)]
for t in threads:
    t.start()
work(200)
time.sleep(0.3)
pid = os.fork()
if pid == 0:
    work(150)
    os._exit(0)
os.waitpid(pid, 0)
subprocess.run([sys.executable, "-c",
                "import pinsight_python; pinsight_python.activate(payload='batched'); "
                "[abs(i) for i in range(500)]"], check=True)
for t in threads:
    t.join()
"""


def unbatch_both(trace: Path, tmp_path: Path) -> tuple[Trace, Trace]:
    """The trace unbatched by the command and by the old Python conversion."""
    (metadata,) = trace.rglob("metadata")
    new, old = tmp_path / "new", tmp_path / "old"
    cli("unbatch", "--progress", "never", "-o", str(new), str(trace))
    proc = subprocess.run([SYSTEM_PYTHON, str(HERE / "unbatch_bt2.py"), str(metadata.parent),
                           str(old)], env=system_lttng_env(), capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return read_trace(new), read_trace(old)


def assert_same(new: Trace, old: Trace) -> None:
    kinds = {e.short for e in new.events}
    assert "event_block" not in kinds and "compact_function_begin" in kinds
    assert "compact_c_call_begin" in kinds
    # Per thread, in order: what each output stream holds.
    assert new.by_thread() == old.by_thread()
    # And the whole trace as babeltrace2 muxes it.
    assert new.events == old.events
    assert new.discarded == old.discarded
    streams = [sorted(p.name for p in t.path.iterdir() if p.name != "metadata")
               for t in (new, old)]
    assert streams[0] == streams[1]
    assert len(streams[0]) == len(new.by_thread())


def test_threads_and_processes(tmp_path: Path) -> None:
    script = tmp_path / "processes.py"
    script.write_text(textwrap.dedent(PROCESSES))
    out = tmp_path / "trace"
    with isolated_session(out) as run_as:
        subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, check=True, preexec_fn=run_as)
    new, old = unbatch_both(out, tmp_path)
    assert len({e.ctx["vpid"] for e in new.events}) == 3
    assert len(new.by_thread()) >= 6  # four threads, the child, the second interpreter
    assert_same(new, old)


def test_killed_process_keeps_its_held_events(tmp_path: Path) -> None:
    # kill -9: the main thread's last block never came; its events since the
    # previous block are written at the end, as the old conversion wrote them.
    trace = run_dying(tmp_path, "kill")
    new, old = unbatch_both(trace.path, tmp_path)
    assert_same(new, old)


def test_lost_blocks(tmp_path: Path) -> None:
    script = tmp_path / "lossy.py"
    script.write_text(textwrap.dedent(LOSSY).replace("fib(18)", "fib(16)"))
    out = tmp_path / "lossy"
    with isolated_session(out, subbuf_size="8K", num_subbuf=2, read_timer_us=200_000) as run_as:
        subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, check=True, preexec_fn=run_as)
    assert read_trace(out).discarded > 0, "LTTng kept up: nothing was lost"
    new, old = unbatch_both(out, tmp_path)
    assert_same(new, old)


def test_other_contexts_are_copied(tmp_path: Path) -> None:
    # A context beyond vpid and vtid: each event keeps its own; a record gets its
    # block's (the old conversion left it unset), the rest is as the old one wrote it.
    script = tmp_path / "processes.py"
    script.write_text(textwrap.dedent(PROCESSES))
    out = tmp_path / "trace"
    with isolated_session(out, contexts=("vpid", "vtid", "procname")) as run_as:
        subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, check=True, preexec_fn=run_as)
    batched = read_trace(out)
    new, old = unbatch_both(out, tmp_path)
    records = {"compact_function_begin", "compact_function_end", "compact_c_call_begin",
               "compact_c_call_end", "generator_end"}  # generators' ends are records too
    procnames = {e.ctx["procname"] for e in batched.named("event_block")}
    assert procnames and all(procnames)
    assert {e.ctx["procname"] for e in new.events if e.short in records} <= procnames
    copied = [e for e in new.events if e.short not in records]
    assert sorted(copied, key=repr) == sorted(
        (e for e in batched.events if e.short != "event_block"), key=repr)
    for trace in (new, old):
        for e in trace.events:
            del e.ctx["procname"]
    assert_same(new, old)


def test_partial_blocks(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    # A fifth of it: the old conversion (babeltrace2's Python bindings) is slow.
    program = textwrap.dedent(WRITER_PROGRAM).replace("range(150000)", "range(30000)")
    script.write_text("import pinsight_python\n" + program)
    out = tmp_path / "trace"
    with isolated_session(out) as run_as:
        subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, check=True, preexec_fn=run_as)
    batched = read_trace(out)
    assert any(e.fields["flags"] & 2 for e in batched.named("event_block"))
    new, old = unbatch_both(out, tmp_path)
    assert_same(new, old)
    # Each generator's end event after its function's last record, in every stream.
    for events in new.by_thread().values():
        ends = [i for i, e in enumerate(events) if e.short == "generator_end"]
        assert len(ends) == 60
        for i in ends:
            before = [e for e in events[:i] if e.short == "compact_function_end"]
            assert before and before[-1].fields["code_id"] == events[i].fields["code_id"]


EMPTY_FILENAME = """
import json

def named(i):
    return json.dumps(i)

for i in range(10):
    named(i)
exec(compile("def nameless():\\n    pass\\nfor _ in range(3):\\n    nameless()\\n", "", "exec"))
"""


def test_an_empty_string_after_longer_ones(tmp_path: Path) -> None:
    # Code compiled from "" names no file: its code_info's filename is the empty
    # string, after longer ones. Babeltrace 2.0.4 reads it as one of the field's
    # previous values, its length right (0): the copy follows the length.
    script = tmp_path / "empty.py"
    script.write_text(textwrap.dedent(EMPTY_FILENAME))
    out = tmp_path / "trace"
    cli("trace", "--batch", "--no-summary", "-o", str(out), "--", sys.executable, str(script))
    new = tmp_path / "new"
    cli("unbatch", "--progress", "never", "-o", str(new), str(out))
    assert read_trace(new).named("compact_function_begin")  # babeltrace2 reads it whole
    for trace in (out, new):
        [proc] = report_json(trace, "--top", "0")["processes"]
        [nameless] = [f for f in proc["functions"] if f["qualname"] == "nameless"]
        assert nameless["filename"] == "" and nameless["calls"] == 3, nameless
