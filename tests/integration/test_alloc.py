"""Sampled allocations (events = alloc): estimates against bytes the program
allocates itself, retention, attribution to the allocating thread's innermost
Python function, native malloc through the preload library.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

from pinsight_python.recording.run.plan import alloc_preload_library, fd_guard_library
from tests.tracing import CLI, Run, Tracer, report_json

MIB = 1 << 20

WORKLOAD = """
kept = []
def churn(n):
    for _ in range(n):
        block = bytearray(10_000)
        del block
def keep(n):
    for _ in range(n):
        kept.append(bytearray(20_000))
churn(3000)    # 30 MB allocated and freed
keep(500)      # 10 MB still alive when the program ends
"""


def report(run: Run) -> Dict[str, Any]:
    report = report_json("--top", "50", str(run.trace.path))
    procs = [p for p in report["processes"] if p["allocations"]["functions"]]
    assert len(procs) == 1
    return {f["qualname"]: f for f in procs[0]["allocations"]["functions"]}


def within(estimate: float, truth: float, tolerance: float = 0.25) -> bool:
    return abs(estimate - truth) <= tolerance * truth


def test_estimates_and_retention_without_function_events(tracer: Tracer) -> None:
    config = tracer.tmp_path / "alloc.txt"
    config.write_text("[Python]\n    events = alloc\n    alloc_sample_interval = 32KiB\n")
    run = tracer.run(WORKLOAD, activate=f"pinsight_python.activate(config={str(config)!r})")
    assert not run.trace.named("function_begin")
    samples = run.trace.named("alloc_sample")
    assert samples and all(s.fields["python_thread_id"] == 0 for s in samples)
    assert {s.fields["source"] for s in samples} <= {"python_raw", "python_mem", "python_object"}
    functions = report(run)
    churn, keep = functions["churn"], functions["keep"]
    assert within(churn["sampled_bytes"], 30_000_000), churn
    assert within(keep["sampled_bytes"], 10_000_000), keep
    # Never freed: what keep() kept, not what churn() dropped.
    assert within(keep["retained_bytes"], 10_000_000), keep
    assert keep["retention_pct"] >= 90
    assert churn["retained_bytes"] <= 0.05 * churn["sampled_bytes"], churn
    assert max(functions.values(), key=lambda f: f["retained_bytes"])["qualname"] == "keep"
    # The definition line, in the script (after the prologue's two lines).
    assert keep["filename"].endswith(".py")
    assert keep["lineno"] == 3 + WORKLOAD.splitlines().index("def keep(n):")
    text = subprocess.run([*CLI, "report", str(run.trace.path)], capture_output=True, text=True,
                          check=True).stdout
    assert "Allocations (sampled" in text and "never freed" in text


def test_alloc_flamegraph_with_function_events(tracer: Tracer) -> None:
    config = tracer.tmp_path / "alloc.txt"
    config.write_text("[Python]\n    alloc_sample_interval = 64KiB\n")
    run = tracer.run(
        WORKLOAD,
        activate=f"pinsight_python.activate(['function', 'alloc'], config={str(config)!r})",
    )
    assert run.trace.functions()["churn"] == 1
    folded = subprocess.run([*CLI, "flamegraph", "--alloc", "--folded", str(run.trace.path)],
                            capture_output=True, text=True, check=True).stdout
    weights = {line.rsplit(" ", 1)[0].split(";")[-1]: int(line.rsplit(" ", 1)[1])
               for line in folded.splitlines()}
    churn = next(w for name, w in weights.items() if name.startswith("churn "))
    keep = next(w for name, w in weights.items() if name.startswith("keep "))
    assert within(churn, 30_000_000) and within(keep, 10_000_000), weights
    svg = subprocess.run([*CLI, "flamegraph", "--alloc", str(run.trace.path)],
                         capture_output=True, text=True, check=True).stdout
    assert "width = sampled allocated bytes" in svg


NATIVE_C = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void *grab(size_t size) { void *p = malloc(size); memset(p, 1, size); return p; }

void *volatile sink;  /* keeps the compiler from eliding malloc/free pairs */

static void *native_worker(void *arg) {
    size_t total = (size_t)arg;
    for (size_t done = 0; done < total; done += 100000) {
        sink = malloc(100000);
        memset(sink, 2, 100000);
        free(sink);
    }
    return NULL;
}

/* A thread that never runs Python code allocates while Python runs. */
int run_native_thread(size_t total) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, native_worker, (void *)total) != 0) return -1;
    return pthread_join(thread, NULL);
}
"""


def test_native_mallocs_attributed_to_the_python_caller(tracer: Tracer) -> None:
    source = tracer.tmp_path / "native_alloc.c"
    source.write_text(NATIVE_C)
    library = tracer.tmp_path / "libnative_alloc.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-pthread", "-o", str(library),
                    str(source)], check=True)
    config = tracer.tmp_path / "alloc.txt"
    config.write_text("[Python]\n    events = function, c_call, alloc\n"
                      "    alloc_sample_interval = 64KiB\n")
    run = tracer.run(
        f"""
        import ctypes, threading
        lib = ctypes.CDLL({str(library)!r})
        lib.grab.restype = ctypes.c_void_p
        held = []
        def native_grab():
            for _ in range(100):
                held.append(lib.grab(100_000))      # 10 MB kept by native code
        def python_busy():
            data = []
            for _ in range(2000):
                data.append(bytearray(5_000))
        t = threading.Thread(target=python_busy)
        t.start()
        lib.run_native_thread(20_000_000)           # 20 MB on a thread without Python
        t.join()
        native_grab()
        status = pinsight_python.status()
        print(status["alloc_native"], status["alloc_sampling"])
        """,
        activate=f"pinsight_python.activate(config={str(config)!r})",
        env={"LD_PRELOAD": str(alloc_preload_library())},
    )
    assert run.stdout.split() == ["True", "True"]
    # One function, one line: samples inside its native calls (lib.grab's mallocs,
    # held.append's) name its definition line, as those outside them do.
    grab_lines = {s.fields["lineno"] for s in run.trace.named("alloc_sample")
                  if s.fields["qualname"] == "native_grab"}
    begin_lines = {e.fields["lineno"] for e in run.trace.named("function_begin")
                   if e.fields["qualname"] == "native_grab"}
    assert grab_lines == begin_lines and len(begin_lines) == 1, (grab_lines, begin_lines)
    functions = report(run)
    grab = functions["native_grab"]
    assert within(grab["native_bytes"], 10_000_000), grab
    assert within(grab["retained_bytes"], 10_000_000), grab
    # Each sample names its own thread's function: the native thread's
    # allocations name none, never the Python functions running meanwhile.
    python_vtids = {e.ctx["vtid"] for e in run.trace.events if e.short == "function_begin"}
    samples = run.trace.named("alloc_sample")
    foreign = [s for s in samples if s.ctx["vtid"] not in python_vtids]
    assert foreign, ("the native thread's allocations were not sampled",
                     collections.Counter((s.ctx["vtid"], s.fields["qualname"]) for s in samples))
    assert all(s.fields["qualname"] == "<no Python frame>" and s.fields["code_id"] == 0
               and s.fields["python_thread_id"] == -1
               for s in foreign), collections.Counter(
        (s.ctx["vtid"], s.fields["qualname"], s.fields["python_thread_id"]) for s in foreign)
    assert within(sum(s.fields["sampled_bytes"] for s in foreign), 20_000_000, 0.35)
    busy = [s for s in samples if s.fields["qualname"] == "python_busy"]
    assert busy and {s.fields["python_thread_id"] for s in busy} == {1}


def test_the_tracers_own_thread_allocates_nothing_sampled(tracer: Tracer) -> None:
    # With a sample every 64 bytes on average, any allocation of the control
    # thread (its Python thread state, its parses) would show up as a sample
    # without a Python frame: they are the tracer's, not the program's.
    config = tracer.tmp_path / "alloc.txt"
    config.write_text("[Python]\n    events = alloc\n    alloc_sample_interval = 64\n")
    run = tracer.run("import time\nkept = [bytearray(100) for _ in range(1000)]\n"
                     "time.sleep(0.2)\n",
                     activate=f"pinsight_python.activate(config={str(config)!r})")
    threads = collections.Counter(s.fields["python_thread_id"]
                                  for s in run.trace.named("alloc_sample"))
    assert set(threads) == {0} and threads[0] > 1000, threads


def test_trace_alloc_preloads_the_interposer(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import pinsight_python\nprint(pinsight_python.status()['alloc_native'])\n")
    out = tmp_path / "trace"
    proc = subprocess.run([*CLI, "trace", "--alloc", "--no-summary", "-o", str(out), "--",
                           sys.executable, str(script)], capture_output=True, text=True,
                          check=False, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_trace_alloc_leaves_a_preloaded_sanitizer_first(tmp_path: Path) -> None:
    # Native code built with -fsanitize=address runs with libasan preloaded, which
    # must stay first: --alloc then warns and samples Python's allocations only.
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert Path(libasan).is_file(), f"gcc has no libasan.so ({libasan})"
    script = tmp_path / "prog.py"
    script.write_text("import os, pinsight_python\n"
                      "print(pinsight_python.status()['alloc_native'], os.environ['LD_PRELOAD'])\n")
    env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0"}
    proc = subprocess.run([*CLI, "trace", "--alloc", "--no-summary", "-o", str(tmp_path / "t"),
                           "--", sys.executable, str(script)], capture_output=True, text=True,
                          check=False, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    # The sanitizer first, no malloc interposer, the descriptor guard last.
    assert proc.stdout.split() == ["False", libasan, str(fd_guard_library())], proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and "libasan.so" in warnings[0] and "not sampled" in warnings[0], (
        proc.stderr)
