"""Configuration, modes, rate control and SIGUSR1 reload, end to end in real traces."""

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
from typing import List, Tuple

from pinsight_python import _pinsight_python_testing as testing
from tests.tracing import Run, Tracer, check_balanced, clean_env, isolated_session, read_trace

CALL_100 = """
def hot(i):
    return i

def main():
    for i in range(100):
        hot(i)

main()
"""


def run_with_config(tracer: Tracer, tmp_path: Path, config: str, code: str = CALL_100, **kw):
    cfg = tmp_path / f"cfg{tracer.counter + 1}.txt"
    cfg.write_text(textwrap.dedent(config))
    return tracer.run(code, activate=f"pinsight_python.activate(config={str(cfg)!r})", **kw)


def pairs(run, name: str) -> int:
    begins = run.trace.functions("function_begin")[name]
    ends = run.trace.functions("function_end")[name]
    assert begins == ends, f"{name}: {begins} begins, {ends} ends"
    return begins


def test_max_num_traces(tracer: Tracer, tmp_path: Path) -> None:
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Lexgion(Python).default]
            max_num_traces = 5
        """,
    )
    assert pairs(run, "hot") == 5
    assert pairs(run, "main") == 1
    check_balanced(run.trace)


def test_tracing_rate(tracer: Tracer, tmp_path: Path) -> None:
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Lexgion(Python).default]
            tracing_rate = 10
        """,
    )
    assert pairs(run, "hot") == 10
    check_balanced(run.trace)


def test_trace_starts_at_and_named_lexgion(tracer: Tracer, tmp_path: Path) -> None:
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Lexgion(Python).default]
            max_num_traces = 0
        [Lexgion(Python:hot)]
            trace_starts_at = 50
            max_num_traces = 20
            tracing_rate = 2
        """,
    )
    assert pairs(run, "hot") == 20
    assert pairs(run, "main") == 0
    check_balanced(run.trace)


def test_design_form_and_window_end_action(tracer: Tracer, tmp_path: Path) -> None:
    code = CALL_100 + textwrap.dedent("""
        import pinsight_python
        print(pinsight_python.status()["mode"])
        """)
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Python]
            trace_mode = TRACING
            events = function, c_call
        [Python.punit.thread]
            range = 0-0
        [Lexgion.default]
            max_num_traces = 3
            trace_mode_after = MONITORING
        """,
        code=code,
    )
    assert pairs(run, "hot") == 3
    assert run.stdout.strip() == "MONITORING"
    modes = [(e.fields["mode"], e.fields["reason"]) for e in run.trace.named("mode_change")]
    assert modes[0] == ("TRACING", "activate")
    assert ("MONITORING", "window_end_action") in modes
    check_balanced(run.trace)


def test_event_selection_keys(tracer: Tracer, tmp_path: Path) -> None:
    code = """
import math
def f():
    return math.floor(1.5)
for _ in range(4):
    f()
"""
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Python.default]
            pysysmon_py_start  = off
            pysysmon_py_return = off
            pysysmon_c_start   = on
            pysysmon_c_return  = on
        """,
        code=code,
    )
    assert not run.trace.named("function_begin")
    floors = [e for e in run.trace.named("c_call_begin") if e.fields["callee_name"] == "math.floor"]
    assert len(floors) == 4
    check_balanced(run.trace)


def test_monitoring_counts_without_output(tracer: Tracer, tmp_path: Path) -> None:
    code = CALL_100 + textwrap.dedent("""
        import pinsight_python
        counts = {l["qualname"]: l["executions"] for l in pinsight_python.lexgions()}
        print(counts["hot"], counts["main"], pinsight_python.status()["mode"])
        """)
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Python.default]
            trace_mode = MONITORING
        """,
        code=code,
    )
    assert run.stdout.split() == ["100", "1", "MONITORING"]
    assert not run.trace.named("function_begin")
    assert not run.trace.named("c_call_begin")


def test_monitoring_then_tracing_honours_start_and_rate(tracer: Tracer, tmp_path: Path) -> None:
    # MONITORING counts executions as PInsight does, so once TRACING starts,
    # trace_starts_at and tracing_rate count from the first execution ever,
    # exactly as the tracer's own decision function says (_lexgion_simulate).
    sections = """
        [Lexgion(Python:late)]
            trace_starts_at = 15
        [Lexgion(Python:sparse)]
            tracing_rate = 4
        """
    code = """
        import pinsight_python
        def late():
            return 1
        def sparse():
            return 2
        def phase():
            for _ in range(10):
                late()
                sparse()
        phase()
        pinsight_python.set_mode("TRACING")
        phase()
        """
    run = run_with_config(
        tracer, tmp_path, "[Python.default]\n    trace_mode = MONITORING\n" + sections,
        code=textwrap.dedent(code),
    )
    tracing = textwrap.dedent(sections)
    for name, expected in (("late", list(range(15, 20))), ("sparse", [10, 14, 18])):
        assert pairs(run, name) == len(expected)
        simulated = testing._lexgion_simulate(tracing, name, n_calls=20, monitoring_calls=10)
        assert simulated == expected
    check_balanced(run.trace)


def test_standby_then_tracing_by_reload(tracer: Tracer, tmp_path: Path) -> None:
    cfg = tmp_path / "live.txt"
    cfg.write_text("[Python.default]\n    trace_mode = STANDBY\n")
    code = f"""
        import os, signal, time
        def hot(i):
            return i
        def phase():
            for i in range(10):
                hot(i)
        phase()
        gen = pinsight_python.status()["config_generation"]
        with open({str(cfg)!r}, "w") as f:
            f.write("[Python.default]\\n    trace_mode = TRACING\\n")
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while pinsight_python.status()["config_generation"] == gen:
            assert time.monotonic() < deadline, "reload did not happen"
            time.sleep(0.01)
        phase()
        print(pinsight_python.status()["mode"], pinsight_python.status()["reloads"])
        """
    run = tracer.run(code, activate=f"pinsight_python.activate(config={str(cfg)!r})")
    assert run.stdout.split() == ["TRACING", "1"]
    assert pairs(run, "hot") == 10
    assert pairs(run, "phase") == 1
    check_balanced(run.trace)


def test_reload_to_standby_keeps_open_frames_balanced(tracer: Tracer, tmp_path: Path) -> None:
    cfg = tmp_path / "live.txt"
    cfg.write_text("[Python.default]\n    trace_mode = TRACING\n")
    code = f"""
        import pinsight_python
        def hot(i):
            return i
        def outer():
            for i in range(5):
                hot(i)
            with open({str(cfg)!r}, "w") as f:
                f.write("[Python.default]\\n    trace_mode = STANDBY\\n")
            pinsight_python.reload()
            for i in range(5):
                hot(i)
            return pinsight_python.status()["mode"]
        print(outer())
        """
    run = tracer.run(code, activate=f"pinsight_python.activate(config={str(cfg)!r})")
    assert run.stdout.strip() == "STANDBY"
    assert pairs(run, "hot") == 5
    assert pairs(run, "outer") == 1  # begun in TRACING, so it ends, in STANDBY
    check_balanced(run.trace)


def test_bad_config_at_activation(tracer: Tracer, tmp_path: Path) -> None:
    cfg = tmp_path / "bad.txt"
    cfg.write_text("[Python.default]\n    trace_mode = TRACE\n")
    run = tracer.run(
        f"""
        try:
            pinsight_python.activate(config={str(cfg)!r})
        except ValueError as e:
            print(type(e).__name__, e)
        """,
        activate=None,
    )
    line = run.stdout.strip()
    assert line.startswith(f"ConfigError {cfg}:2:")
    assert "TRACE" in line and "TRACING" in line


def test_bad_config_on_reload_keeps_previous(tracer: Tracer, tmp_path: Path) -> None:
    cfg = tmp_path / "live.txt"
    cfg.write_text("[Lexgion(Python).default]\n    max_num_traces = 3\n")
    code = f"""
        import pinsight_python
        def hot(i):
            return i
        for i in range(5):
            hot(i)
        with open({str(cfg)!r}, "w") as f:
            f.write("[Lexgion(Python).default]\\n    max_num_traces = lots\\n")
        try:
            pinsight_python.reload()
        except ValueError:
            print("rejected")
        for i in range(5):
            hot(i)
        print(pinsight_python.status()["reload_errors"])
        """
    run = tracer.run(code, activate=f"pinsight_python.activate(config={str(cfg)!r})")
    assert run.stdout.split() == ["rejected", "1"]
    assert pairs(run, "hot") == 3
    assert run.stderr.count("configuration reload failed") == 1
    assert f"{cfg}:2:" in run.stderr


def test_reload_errors_say_did_you_mean_as_start_up_does(tracer: Tracer, tmp_path: Path) -> None:
    cfg = tmp_path / "live.txt"
    cfg.write_text("[Python.default]\n    trace_mode = TRACNG\n")
    start_up = tracer.run(
        f"""
        try:
            pinsight_python.activate(config={str(cfg)!r})
        except ValueError as error:
            print(error)
        """,
        activate=None,
    )
    assert "did you mean 'TRACING'?" in start_up.stdout
    code = f"""
        with open({str(cfg)!r}, "w") as f:
            f.write("[Python.default]\\n    payload = compakt\\n")
        try:
            pinsight_python.reload()
        except ValueError:
            print("rejected")
        """
    cfg.write_text("[Python.default]\n    trace_mode = TRACING\n")
    run = tracer.run(code, activate=f"pinsight_python.activate(config={str(cfg)!r})")
    assert run.stdout.split() == ["rejected"]
    assert "did you mean 'compact'?" in run.stderr


def test_module_filter_and_exclude(tracer: Tracer, tmp_path: Path) -> None:
    (tmp_path / "helpers_a.py").write_text("def a():\n    return 1\n")
    (tmp_path / "helpers_b.py").write_text("def b():\n    return 2\n")
    code = """
import sys
sys.path.insert(0, ".")
import helpers_a, helpers_b
for _ in range(3):
    helpers_a.a(); helpers_b.b()
"""
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Python]
            module_filter = helpers_a, helpers_b
            module_exclude = helpers_b
        """,
        code=code,
    )
    counts = run.trace.functions()
    assert counts["a"] == 3
    assert counts["b"] == 0
    modules = collections.Counter(
        Path(e.file or "").name
        for e in run.trace.named("function_begin")
        if e.fields["qualname"] == "<module>"
    )
    assert modules["helpers_a.py"] == 1
    assert modules["helpers_b.py"] == 0
    check_balanced(run.trace)


def test_thread_filter(tracer: Tracer, tmp_path: Path) -> None:
    code = """
import threading
def work():
    return 1
def body():
    for _ in range(10):
        work()
threads = [threading.Thread(target=body) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
body()
"""
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Python.default]
            Python.thread = (0)
        """,
        code=code,
    )
    ids = {e.fields["python_thread_id"] for e in run.trace.named("function_begin")}
    assert ids == {0}
    assert pairs(run, "work") == 10
    check_balanced(run.trace)


def test_per_thread_cap(tracer: Tracer, tmp_path: Path) -> None:
    code = """
import threading
def worker():
    return 1
def body():
    for _ in range(20):
        worker()
threads = [threading.Thread(target=body) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
"""
    run = run_with_config(
        tracer,
        tmp_path,
        """
        [Lexgion(Python).default]
            max_num_traces = 0
        [Lexgion(Python:worker)] : Python.default : Python.thread(1-4)
            max_num_traces = 5
        """,
        code=code,
    )
    per_thread = collections.Counter(
        e.fields["python_thread_id"]
        for e in run.trace.named("function_begin")
        if e.fields["qualname"] == "worker"
    )
    assert sorted(per_thread.values()) == [5, 5, 5, 5]
    assert set(per_thread) == {1, 2, 3, 4}
    check_balanced(run.trace)


def test_many_sigusr1_against_busy_threads(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.txt"
    cfg.write_text("[Python.default]\n    trace_mode = TRACING\n")
    script = tmp_path / "busy.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys, threading, time
        import pinsight_python
        pinsight_python.activate(config={str(cfg)!r})
        def leaf(i):
            return i
        def work(n):
            s = 0
            for i in range(n):
                s += leaf(i)
            return s
        def run():
            deadline = time.monotonic() + 3.0
            done = 0
            while time.monotonic() < deadline:
                work(10)
                done += 1
                time.sleep(0.0005)  # keep the trace small enough to read back quickly
            counts.append(done)
        counts = []
        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads: t.start()
        print("ready", flush=True)
        for t in threads: t.join()
        print(sum(counts), pinsight_python.status()["reloads"], flush=True)
        # A loaded machine can make the 1000 signals outlast the threads' 3 s: at exit
        # SIGUSR1 is the program's again, whose default would end it.
        sys.stdin.readline()
        """)
    )
    out = tmp_path / "trace"
    # Only this program's group is recorded: other traced programs running on
    # the machine meanwhile must not show up in the trace.
    with isolated_session(out) as run_as:
        proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            preexec_fn=run_as,  # noqa: PLW1509 (sets the group id only)
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        for _ in range(1000):
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(0.001)
        stdout, stderr = proc.communicate("done\n", timeout=120)
    assert proc.returncode == 0, stderr
    total, reloads = (int(x) for x in stdout.split())
    assert reloads >= 1
    trace = read_trace(out)
    assert trace.discarded == 0
    assert trace.functions()["work"] == total
    assert trace.functions("function_end")["work"] == total
    assert trace.functions()["leaf"] == 10 * total
    check_balanced(trace)


def test_garbage_configs_never_crash(tracer: Tracer, tmp_path: Path) -> None:
    cfg = tmp_path / "live.txt"
    cfg.write_text("[Python.default]\n    trace_mode = TRACING\n")
    garbage = [
        b"[Python.default\n trace_mode = TRACING",
        b"\x00\xff\xfe[[[]]]=\n=\n",
        b"[Lexgion(Python:",
        b"[Python.default]\n    trace_mode",
        bytes(range(256)) * 4,
        b"[Lexgion(Python).default]\n max_num_traces = 99999999999999999999999\n",
    ]
    lines = []
    for i, blob in enumerate(garbage):
        (tmp_path / f"g{i}.txt").write_bytes(blob)
        lines.append(f"shutil.copy({str(tmp_path / f'g{i}.txt')!r}, {str(cfg)!r})")
        lines.append("try:\n    pinsight_python.reload()\nexcept ValueError:\n    pass")
        lines.append("hot(1)")
    code = "import shutil\nimport pinsight_python\ndef hot(i):\n    return i\n" + "\n".join(lines)
    code += "\nprint(pinsight_python.status()['mode'], pinsight_python.status()['reload_errors'])\n"
    run = tracer.run(code, activate=f"pinsight_python.activate(config={str(cfg)!r})")
    mode, errors = run.stdout.split()
    assert mode == "TRACING"
    assert int(errors) >= 5
    assert pairs(run, "hot") == len(garbage)


def test_threads_started_during_reloads_are_traced(tmp_path: Path) -> None:
    # Each reload takes the GIL on the control thread. On 3.8-3.11 a thread is
    # hooked when its starter's call returns: a Python thread state the control
    # thread made at that moment must not take the new thread's place.
    cfg = tmp_path / "cfg.txt"
    cfg.write_text("[Python.default]\n    trace_mode = TRACING\n")
    script = tmp_path / "starts.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys, threading
        import pinsight_python
        pinsight_python.activate(config={str(cfg)!r})
        def work():
            return sum(range(10))
        print("ready", flush=True)
        sys.stdin.readline()  # the signals are flowing
        for _ in range(300):
            t = threading.Thread(target=work)
            t.start()
            t.join()
        print(pinsight_python.status()["reloads"], flush=True)
        sys.stdin.readline()  # the signals have stopped: at exit SIGUSR1 is the program's again
        """)
    )
    out = tmp_path / "trace"
    with isolated_session(out) as run_as:
        proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            preexec_fn=run_as,  # noqa: PLW1509 (sets the group id only)
        )
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGUSR1)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        reloads: List[str] = []
        reader = threading.Thread(target=lambda: reloads.append(proc.stdout.readline()))
        reader.start()
        deadline = time.monotonic() + 120
        while reader.is_alive() and time.monotonic() < deadline:
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(0.0005)
        reader.join()
        _, stderr = proc.communicate("done\n", timeout=60)
    assert proc.returncode == 0, stderr
    assert reloads and int(reloads[0]) >= 10, ("too few reloads overlapped the thread starts",
                                              reloads)
    trace = read_trace(out)
    assert trace.discarded == 0
    assert trace.functions()["work"] == 300
    assert trace.functions("function_end")["work"] == 300
    check_balanced(trace)


def test_sigusr1_without_a_configuration_file_says_so_once(tmp_path: Path) -> None:
    script = tmp_path / "noconfig.py"
    script.write_text(
        "import sys, pinsight_python\n"
        "pinsight_python.activate()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "print(pinsight_python.status()['reloads'], pinsight_python.status()['config_path'])\n"
    )
    env = clean_env()
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready" and proc.stderr is not None
    # The first answer is waited for, however late a loaded machine runs the control
    # thread; the second signal then has 0.3 s to be (wrongly) answered again.
    os.kill(proc.pid, signal.SIGUSR1)
    before = []
    while not before or "SIGUSR1" not in before[-1]:
        line = proc.stderr.readline()
        assert line, before
        before.append(line)
    os.kill(proc.pid, signal.SIGUSR1)
    time.sleep(0.3)
    stdout, stderr = proc.communicate("\n", timeout=60)
    stderr = "".join(before) + stderr
    assert proc.returncode == 0, stderr
    assert stdout.split() == ["0"], stdout
    told = [line for line in stderr.splitlines() if "SIGUSR1" in line]
    assert told == ["pinsight-python: SIGUSR1: tracing was activated without a configuration "
                    "file, so there is nothing to reload (said once)"], stderr


def test_sigusr1_during_finalization_does_not_end_the_program(tmp_path: Path) -> None:
    """A reload request that comes as the program ends (a job script's signal, or
    trace's forwarding, which saw our handler a moment before) is a no-op: the
    program keeps its exit status. Before, the atexit hook that stops the control
    thread put SIGUSR1 back to its default, and such a signal ended the program
    during the interpreter's finalization (status 138 under trace, CI on 3.14)."""
    script = tmp_path / "late.py"
    script.write_text(
        "import os, signal, pinsight_python\n"
        "pinsight_python.activate()\n"
        "class Late:\n"
        "    def __del__(self):\n"
        "        # After every atexit hook: the module's globals go at finalization.\n"
        "        os.kill(os.getpid(), signal.SIGUSR1)\n"
        "        print('after the signal', flush=True)\n"
        "late = Late()\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, env=clean_env(), timeout=60, check=False)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout == "after the signal\n"


def window_config(seconds: float) -> str:
    """A TRACING window of `seconds` at most, MONITORING after it."""
    return f"[Lexgion.default]\nwindow_timeout = {seconds}\nwindow_end_action = MONITORING\n"


def reasons(run: Run) -> List[Tuple[str, str]]:
    return [(e.fields["mode"], e.fields["reason"]) for e in run.trace.named("mode_change")]


# hot() until `seconds` have passed, each call bracketed by the mode it saw: the
# workload's own account of which calls ran while tracing was on.
TIMED_CALLS = """
import json, time
import pinsight_python
def hot(i):
    return i
def calls_for(seconds):
    seen = []
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        before = pinsight_python.status()["mode"]
        hot(i)
        seen.append((before, pinsight_python.status()["mode"]))
        i += 1
        time.sleep(0.001)
    return seen
"""


def test_window_timeout_ends_the_tracing_window(tracer: Tracer, tmp_path: Path) -> None:
    """[Lexgion.default] window_timeout: after N seconds the window ends with
    window_end_action, though no function reached a cap (PInsight's wall-clock
    bound on a TRACING window): the calls traced are exactly those the program
    made while the mode was TRACING, and the switch comes N seconds after
    activation, from the control thread, not at the program's next reload."""
    code = TIMED_CALLS + textwrap.dedent("""
        seen = calls_for(0.8)
        print(json.dumps(seen))
        """)
    run = run_with_config(tracer, tmp_path, window_config(0.3), code=code)
    seen = [tuple(pair) for pair in json.loads(run.stdout)]
    surely = sum(1 for pair in seen if pair == ("TRACING", "TRACING"))
    maybe = sum(1 for pair in seen if pair == ("TRACING", "MONITORING"))
    assert surely > 10 and maybe <= 1 and seen[-1] == ("MONITORING", "MONITORING")
    assert surely <= pairs(run, "hot") <= surely + maybe
    assert reasons(run) == [("TRACING", "activate"), ("MONITORING", "window_timeout")]
    activated, ended = run.trace.named("mode_change")
    # Armed after the activation's event; the control thread wakes at the deadline,
    # while the program still runs (its own last calls saw MONITORING).
    assert ended.ts - activated.ts >= 0.3e9
    assert all(e.ts < ended.ts for e in run.trace.named("function_begin")
               if e.fields["qualname"] == "hot")
    check_balanced(run.trace)


def test_window_timeout_after_the_window_ended_by_a_cap_does_nothing(
    tracer: Tracer, tmp_path: Path
) -> None:
    """A function's cap ended the window first: the timer has no window left to
    end, and a TRACING mode the program then sets itself stays."""
    code = TIMED_CALLS + textwrap.dedent("""
        def other():
            return 0
        while pinsight_python.status()["mode"] != "MONITORING":
            hot(0)
        pinsight_python.set_mode("TRACING")
        start = time.monotonic()
        while time.monotonic() - start < 0.6:
            other()
            time.sleep(0.001)
        print(pinsight_python.status()["mode"])
        """)
    run = run_with_config(tracer, tmp_path,
                          window_config(0.3) + "[Lexgion(Python:hot)]\nmax_num_traces = 3\n",
                          code=code)
    assert run.stdout.strip() == "TRACING"
    assert reasons(run) == [("TRACING", "activate"), ("MONITORING", "window_end_action"),
                            ("TRACING", "set_mode")]
    assert pairs(run, "hot") == 3
    assert pairs(run, "other") > 100
    check_balanced(run.trace)


def test_reload_arms_the_window_timeout_again(tracer: Tracer, tmp_path: Path) -> None:
    """Each configuration published (SIGUSR1) starts a new window and bounds it
    again, as PInsight's control thread does."""
    code = TIMED_CALLS + textwrap.dedent("""
        import os, signal
        def wait_for(mode, reloads):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                st = pinsight_python.status()
                if st["mode"] == mode and st["reloads"] == reloads:
                    return
                hot(0)
                time.sleep(0.001)
            raise SystemExit(f"still {st['mode']} after {st['reloads']} reloads")
        wait_for("MONITORING", 0)
        os.kill(os.getpid(), signal.SIGUSR1)
        wait_for("TRACING", 1)
        wait_for("MONITORING", 1)
        print("done")
        """)
    run = run_with_config(tracer, tmp_path, window_config(0.2), code=code)
    assert run.stdout.strip() == "done"
    assert reasons(run) == [("TRACING", "activate"), ("MONITORING", "window_timeout"),
                            ("TRACING", "reload"), ("MONITORING", "window_timeout")]
    # Re-armed by the reload, not left from activation: the deadline counts from it
    # (and came while the program waited for it).
    _, _, reloaded, ended = run.trace.named("mode_change")
    assert ended.ts - reloaded.ts >= 0.2e9
    check_balanced(run.trace)


def test_a_window_timeout_beyond_any_run_never_fires(tracer: Tracer, tmp_path: Path) -> None:
    """1e300 seconds parses (a finite number) and bounds nothing: no timer. Its
    nanoseconds, converted to an integer, came out as 0 on x86-64: a deadline at
    once (the sanitizers' stage reports such a conversion: float-cast-overflow)."""
    code = CALL_100 + textwrap.dedent("""
        print(pinsight_python.status()["mode"])
        """)
    run = run_with_config(tracer, tmp_path, window_config(1e300), code=code)
    assert run.stdout.strip() == "TRACING"
    assert reasons(run) == [("TRACING", "activate")]
    assert pairs(run, "hot") == 100


def trigger_config(trigger: str, timeout: float = 60.0) -> str:
    """f capped at 3 executions, g at 5, every other function unlimited (no gate)."""
    return textwrap.dedent(f"""
        [Lexgion.default]
        window_end_trigger = {trigger}
        window_timeout = {timeout}
        window_end_action = MONITORING
        [Lexgion(Python:f)]
        max_num_traces = 3
        [Lexgion(Python:g)]
        max_num_traces = 5
        """)


# f, h and g once per step, each followed by the mode the program saw after it:
# the workload's own account of where the window ended.
CAPPED_STEPS = """
import json
import pinsight_python
def f():
    return 1
def g():
    return 2
def h():
    return 3
def mode():
    return pinsight_python.status()["mode"][0]
steps = []
for i in range(8):
    f()
    after_f = mode()
    h()
    g()
    steps.append(after_f + mode())
print(json.dumps(steps))
"""


def test_window_end_trigger_first_and_all(tracer: Tracer, tmp_path: Path) -> None:
    """PInsight's count policy. `first`: f's cap (its 3rd execution) ends the window.
    `all`: the window ends only when the last function with a cap that the thread
    ran reaches it, g at its 5th; f's cap then only counts, and h (no cap) is no
    gate. Each window ends after the capping execution's function_end."""
    first = run_with_config(tracer, tmp_path, trigger_config("first"), code=CAPPED_STEPS)
    steps = json.loads(first.stdout)
    assert steps[:3] == ["TT", "TT", "MM"] and set(steps[3:]) == {"MM"}
    assert (pairs(first, "f"), pairs(first, "h"), pairs(first, "g")) == (3, 2, 2)
    assert reasons(first) == [("TRACING", "activate"), ("MONITORING", "window_end_action")]
    check_balanced(first.trace)

    every = run_with_config(tracer, tmp_path, trigger_config("all"), code=CAPPED_STEPS)
    steps = json.loads(every.stdout)
    assert steps[:5] == ["TT", "TT", "TT", "TT", "TM"] and set(steps[5:]) == {"MM"}
    assert (pairs(every, "f"), pairs(every, "h"), pairs(every, "g")) == (3, 5, 5)
    assert reasons(every) == [("TRACING", "activate"), ("MONITORING", "window_end_action")]
    ended = every.trace.named("mode_change")[-1]
    last_g = [e for e in every.trace.named("function_end") if e.fields["qualname"] == "g"][-1]
    assert last_g.ts <= ended.ts
    check_balanced(every.trace)


def test_window_end_trigger_all_counts_each_thread_alone(tracer: Tracer, tmp_path: Path) -> None:
    """As in PInsight, `all` is per thread: a worker that ran only f ends the window
    at f's cap, though the main thread ran g below its cap."""
    code = textwrap.dedent("""
        import threading
        import pinsight_python
        def f():
            return 1
        def g():
            return 2
        def worker():
            for _ in range(6):
                f()
        g()
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        print(pinsight_python.status()["mode"])
        """)
    run = run_with_config(tracer, tmp_path, trigger_config("all"), code=code)
    assert run.stdout.strip() == "MONITORING"
    assert (pairs(run, "f"), pairs(run, "g")) == (3, 1)
    assert reasons(run) == [("TRACING", "activate"), ("MONITORING", "window_end_action")]
    check_balanced(run.trace)


def test_window_end_trigger_all_and_a_function_never_called_again(
    tracer: Tracer, tmp_path: Path
) -> None:
    """g ran once and never again, below its cap: under `all` the window stays open
    past f's cap, and window_timeout bounds it (PInsight's advice). A function
    that dies below its cap (its code object freed) no longer holds the window
    open: the next cap ends it."""
    code = TIMED_CALLS + textwrap.dedent("""
        import gc, sys
        def f():
            return 1
        namespace = {}
        exec("def g():\\n    return 2\\n", namespace)
        namespace["g"]()
        for _ in range(3):
            f()
        print(pinsight_python.status()["mode"])
        if sys.argv[-1] == "free":
            del namespace
            gc.collect()
        for _ in range(2):
            f()
        print(pinsight_python.status()["mode"])
        if sys.argv[-1] == "keep":
            calls_for(0.6)
            print(pinsight_python.status()["mode"])
        """)
    f_capped_at_4 = trigger_config("all").replace("max_num_traces = 3", "max_num_traces = 4")
    kept = run_with_config(tracer, tmp_path, f_capped_at_4.replace("= 60.0", "= 0.3"),
                           code=code, args=["keep"])
    assert kept.stdout.split() == ["TRACING", "TRACING", "MONITORING"]
    assert reasons(kept) == [("TRACING", "activate"), ("MONITORING", "window_timeout")]
    assert (pairs(kept, "f"), pairs(kept, "g")) == (4, 1)
    check_balanced(kept.trace)

    freed = run_with_config(tracer, tmp_path, f_capped_at_4, code=code, args=["free"])
    assert freed.stdout.split() == ["TRACING", "MONITORING"]
    assert reasons(freed) == [("TRACING", "activate"), ("MONITORING", "window_end_action")]
    assert (pairs(freed, "f"), pairs(freed, "g")) == (4, 1)
    check_balanced(freed.trace)


# f() once per step (argv[1] steps, argv[2] seconds of sleep between them, 0: none),
# then the program's own clock and the mode it saw: where the pauses fell, by the
# workload's account.
STAMPED_STEPS = """
import json, os, sys, time
import pinsight_python
def f():
    return 1
stamps = []
between = float(sys.argv[2])
for i in range(int(sys.argv[1])):
    f()
    stamps.append((time.monotonic(), pinsight_python.status()["mode"]))
    if between:
        time.sleep(between)
print(json.dumps({"pid": os.getpid(), "stamps": stamps}))
"""


def introspect_config(action: str, cap: int, extra: str = "") -> str:
    return textwrap.dedent(f"""
        [Lexgion.default]
        window_end_action = {action}
        {extra}
        [Lexgion(Python:f)]
        max_num_traces = {cap}
        """)


def gaps(stamps: List[List]) -> List[float]:
    """Seconds between each step and the next, by the program's clock."""
    return [b[0] - a[0] for a, b in zip(stamps, stamps[1:])]


def in_order(run: Run) -> List[str]:
    """f's traced calls and the mode changes after activation's, as the trace orders
    them: "f", or the change's reason."""
    calls = [e for e in run.trace.named("function_begin") if e.fields["qualname"] == "f"]
    changes = run.trace.named("mode_change")[1:]
    return [e.fields["reason"] if e.short == "mode_change" else "f"
            for e in sorted([*calls, *changes], key=lambda e: e.ts)]


def test_introspect_runs_the_script_and_pauses_the_program(
    tracer: Tracer, tmp_path: Path
) -> None:
    """INTROSPECT:0.5:script:MONITORING. f's cap ends the window: the script starts
    with PInsight's arguments (where traces are, the pid, the configuration) in an
    environment without LD_PRELOAD and OMP_TOOL_LIBRARIES; no Python code runs for
    0.5 s, from the end of f's third call: that call returns after the pause (the
    program's own clock shows the gap there, though the program never lets the GIL
    go by itself), in MONITORING. The trace marks both ends of the pause."""
    script = tmp_path / "analyze.sh"
    seen = tmp_path / "script-saw.txt"
    script.write_text(
        f'printf "%s\\n" "$@" "${{LD_PRELOAD-unset}}" "${{OMP_TOOL_LIBRARIES-unset}}" > {seen}\n'
    )
    config = introspect_config(f"INTROSPECT:0.5:{script}:MONITORING", cap=3)
    run = run_with_config(tracer, tmp_path, config, code=STAMPED_STEPS, args=["6", "0"],
                          env={"OMP_TOOL_LIBRARIES": "/nonexistent/libtool.so"})
    out = json.loads(run.stdout)
    stamps = out["stamps"]
    assert [mode for _, mode in stamps] == ["TRACING"] * 2 + ["MONITORING"] * 4
    assert gaps(stamps)[1] >= 0.5
    assert pairs(run, "f") == 3
    assert reasons(run) == [("TRACING", "activate"), ("TRACING", "introspect_pause"),
                            ("MONITORING", "introspect")]
    # The one pause, after f's third call (the trace's order, not a time).
    assert in_order(run) == ["f", "f", "f", "introspect_pause", "introspect"]
    _, paused, resumed = run.trace.named("mode_change")
    assert resumed.ts - paused.ts >= 0.5e9
    location = os.environ.get("PINSIGHT_PYTHON_TRACE_DIR") or (
        (os.environ.get("LTTNG_HOME") or os.environ["HOME"]) + "/lttng-traces")
    cfg = tmp_path / f"cfg{tracer.counter}.txt"
    assert seen.read_text().splitlines() == [location, str(out["pid"]), str(cfg), "unset",
                                             "unset"]
    check_balanced(run.trace)


def test_introspect_resuming_in_tracing_starts_a_new_window(
    tracer: Tracer, tmp_path: Path
) -> None:
    """PInsight's cyclic INTROSPECT (resume mode TRACING, no script): each pause
    ends a window of f's cap, and the next window traces f's cap again: every call
    of a busy loop is traced."""
    config = introspect_config("INTROSPECT:0.25:-:TRACING", cap=2)
    run = run_with_config(tracer, tmp_path, config, code=STAMPED_STEPS, args=["6", "0"])
    stamps = json.loads(run.stdout)["stamps"]
    # Each second call returns after its window's pause, and only those: each pause
    # lies between a window's second call and the next window's first.
    between = gaps(stamps)
    assert between[0] >= 0.25 and between[2] >= 0.25 and between[4] >= 0.25
    assert pairs(run, "f") == 6
    assert reasons(run) == [("TRACING", "activate")] + [
        ("TRACING", "introspect_pause"), ("TRACING", "introspect")] * 3
    assert in_order(run) == ["f", "f", "introspect_pause", "introspect"] * 3
    check_balanced(run.trace)


def test_introspect_until_sigusr1_from_the_script(tracer: Tracer, tmp_path: Path) -> None:
    """INTROSPECT:-1:script: paused until SIGUSR1, said on stderr. The script rewrites
    the configuration (its third argument) and signals the program (its second):
    the program resumes and reloads it. The counters carry over the reload, as
    PInsight's do: f, traced twice under a cap of 2, is traced 3 more times under 5."""
    script = tmp_path / "resume.sh"
    script.write_text(textwrap.dedent("""
        sleep 0.3
        printf '[Lexgion(Python:f)]\\nmax_num_traces = 5\\n' > "$3"
        kill -USR1 "$2"
        """))
    config = introspect_config(f"INTROSPECT:-1:{script}", cap=2)
    run = run_with_config(tracer, tmp_path, config, code=STAMPED_STEPS, args=["9", "0.03"])
    stamps = json.loads(run.stdout)["stamps"]
    assert gaps(stamps)[0] >= 0.3  # f's second call returns after the pause
    assert pairs(run, "f") == 5
    assert reasons(run) == [("TRACING", "activate"), ("TRACING", "introspect_pause"),
                            ("MONITORING", "introspect"), ("TRACING", "reload")]
    assert "pinsight-python: INTROSPECT: paused until SIGUSR1 (kill -USR1 " in run.stderr
    check_balanced(run.trace)


def test_window_timeout_with_introspect(tracer: Tracer, tmp_path: Path) -> None:
    """window_timeout ends the window with [Lexgion.default]'s INTROSPECT action too:
    the pause starts at the deadline, though no function reached a cap."""
    config = introspect_config("INTROSPECT:0.3:-:MONITORING", cap=-1, extra="window_timeout = 0.2")
    run = run_with_config(tracer, tmp_path, config, code=STAMPED_STEPS, args=["30", "0.03"])
    stamps = json.loads(run.stdout)["stamps"]
    assert max(gaps(stamps)) >= 0.3
    # The pause came while the program ran: its first steps TRACING, its last ones
    # MONITORING, the resume mode.
    assert stamps[0][1] == "TRACING" and stamps[-1][1] == "MONITORING"
    assert reasons(run) == [("TRACING", "activate"), ("TRACING", "introspect_pause"),
                            ("MONITORING", "introspect")]
    activated, paused, resumed = run.trace.named("mode_change")
    assert paused.ts - activated.ts >= 0.2e9
    assert resumed.ts - paused.ts >= 0.3e9
    check_balanced(run.trace)
