"""``pinsight-python trace`` operated from job scripts, and the CLI's common ground.

Signals are sent the way job scripts send them: ``trace ... & kill -USR1 $!`` from a
non-interactive bash, so the sender is in trace's own process group. Every run checks
that its LTTng session is gone afterwards. Checks select the program's own processes:
the session records every traced process of this user.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from importlib import metadata
from pathlib import Path
from typing import List

import pytest

import pinsight_python
from pinsight_python import cli
from pinsight_python.recording import lttng
from tests.tracing import (
    CLI,
    begins,
    check_balanced,
    clean_env,
    events_of,
    read_trace,
    session_exists,
    trace_report,
    write,
)

PY = sys.executable
TRACE = " ".join([*CLI, "trace"])

# Signals itself ready once tracing is active (the .pth shim activated it before
# the first line), then works until told to stop or killed.
LOOP = """
import os, sys, time
import pinsight_python

def step():
    time.sleep(0.01)

assert pinsight_python.status()["active"]
step()
open(f"ready-{os.getpid()}", "w").close()
deadline = time.monotonic() + 120
while not os.path.exists("stop") and time.monotonic() < deadline:
    step()
"""


def job_script(tmp_path: Path, body: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run `body` with bash, as a batch system runs a job script: no job control, so a
    background `trace` is in the script's process group, and SIGHUP and SIGTERM at their
    default actions whatever the test run inherited (under nohup, SIGHUP is ignored, and
    an ignored signal stays ignored in every child)."""
    script = write(tmp_path, "job.sh", "set -u\n" + body)

    def default_signals() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return subprocess.run(["bash", str(script)], cwd=tmp_path, env=clean_env(), text=True,
                          capture_output=True, timeout=timeout, check=False,
                          preexec_fn=default_signals)


WAIT_READY = """
deadline=$((SECONDS + 90))
until [ "$(ls ready-* 2>/dev/null | wc -l)" -ge {n} ]; do
  [ $SECONDS -lt $deadline ] || {{ echo "never ready" >&2; break; }}
  sleep 0.05
done
"""


def status_of(stdout: str) -> int:
    m = re.search(r"^status=(\d+)$", stdout, re.M)
    assert m, stdout
    return int(m.group(1))


def single_line(stderr: str, pattern: str) -> str:
    lines = [ln for ln in stderr.splitlines() if re.search(pattern, ln)]
    assert len(lines) == 1, stderr
    return lines[0]


# ---------------------------------------------------------------------------- signals


RELOADING = """
import os, signal, subprocess, sys, time
import pinsight_python

got_usr2 = []
if len(sys.argv) > 1:  # the parent: a fresh-interpreter child, and a SIGUSR2 handler
    signal.signal(signal.SIGUSR2, lambda *_: got_usr2.append(1))
    child = subprocess.Popen([sys.executable, __file__])

def step():
    time.sleep(0.01)

step()
open(f"ready-{os.getpid()}", "w").close()
deadline = time.monotonic() + 90
while pinsight_python.status()["reloads"] < 1 and time.monotonic() < deadline:
    step()
if len(sys.argv) > 1:
    while not got_usr2 and time.monotonic() < deadline:
        step()
    child.wait()
print(os.getpid(), pinsight_python.status()["reloads"], pinsight_python.status()["mode"],
      "usr2" if got_usr2 else "", flush=True)
"""


def test_usr1_without_a_configuration_says_it_only_flushes(tmp_path: Path) -> None:
    # No --config, no PINSIGHT_PYTHON_CONFIG, no file in the working directory: trace's
    # note says what the processes do with the signal, as they would (no contradiction
    # between "forwarded ... that reload the configuration" and "nothing to reload").
    write(tmp_path, "prog.py", LOOP)
    proc = job_script(tmp_path, f"""
{TRACE} -o t -- {PY} prog.py &
pid=$!
{WAIT_READY.format(n=1)}
kill -USR1 $pid
sleep 1
touch stop
wait $pid
echo status=$?
""")
    assert status_of(proc.stdout) == 0, proc.stderr
    usr1 = single_line(proc.stderr, r"SIGUSR1 forwarded")
    assert "to 1 process(es) of the command that handle it" in usr1, usr1
    assert "without a configuration file: nothing to reload" in usr1, usr1
    # The program's own note (said once, per-event payloads) agrees.
    assert "reload the configuration" not in proc.stderr, proc.stderr
    _, session = trace_report(proc.stderr)
    assert not session_exists(session)


def test_usr1_to_trace_reloads_every_traced_process_and_usr2_is_forwarded(
    tmp_path: Path,
) -> None:
    write(tmp_path, "prog.py", RELOADING)
    config = write(tmp_path, "c.txt", "[Python.default]\ntrace_mode = TRACING\n")
    proc = job_script(tmp_path, f"""
{TRACE} -o t --config {config} -- {PY} prog.py parent &
pid=$!
{WAIT_READY.format(n=2)}
sed -i s/TRACING/MONITORING/ {config}
kill -USR1 $pid
sleep 1
kill -USR2 $pid
wait $pid
echo status=$?
""")
    assert status_of(proc.stdout) == 0, proc.stderr
    rows = [ln.split() for ln in proc.stdout.splitlines() if not ln.startswith("status=")]
    # Both processes reloaded once, into the new mode; trace itself kept running.
    assert sorted(r[1:3] for r in rows) == [["1", "MONITORING"], ["1", "MONITORING"]], proc
    assert sum(r[3:] == ["usr2"] for r in rows) == 1  # the parent's handler ran
    usr1 = single_line(proc.stderr, r"SIGUSR1 forwarded to 2 process\(es\)")
    assert "that reload the configuration" in usr1, usr1
    single_line(proc.stderr, r"SIGUSR2 forwarded to 1 process\(es\)")
    _, session = trace_report(proc.stderr)
    assert not session_exists(session)
    trace = read_trace(tmp_path / "t")
    for row in rows:
        own = events_of(trace, int(row[0]))
        changes = [(e.fields["mode"], e.fields["reason"]) for e in own.named("mode_change")]
        assert changes == [("TRACING", "activate"), ("MONITORING", "reload")]


@pytest.mark.parametrize("signame", ["TERM", "HUP"])
def test_term_and_hup_from_the_job_script_end_the_command(tmp_path: Path, signame: str) -> None:
    write(tmp_path, "loop.py", LOOP)
    proc = job_script(tmp_path, f"""
{TRACE} -o t --no-summary -- {PY} loop.py &
pid=$!
{WAIT_READY.format(n=1)}
kill -{signame} $pid
wait $pid
echo status=$?
""")
    signo = signal.Signals[f"SIG{signame}"]
    assert status_of(proc.stdout) == 128 + signo, proc.stderr
    single_line(proc.stderr, rf"the command was killed by signal {signo} \(SIG{signame}\)")
    _, session = trace_report(proc.stderr)
    assert not session_exists(session)
    pid = int(next(tmp_path.glob("ready-*")).name[6:])
    assert begins(events_of(read_trace(tmp_path / "t"), pid), "step") > 0


def test_hup_ignored_on_entry_stays_ignored_as_under_nohup(tmp_path: Path) -> None:
    """`nohup pinsight-python trace -- ...`: the command ignores SIGHUP as it would
    untraced, so a hang-up ends neither it nor `trace`, and the run finishes normally."""
    write(tmp_path, "loop.py", LOOP)
    proc = job_script(tmp_path, f"""
trap '' HUP
{TRACE} -o t --no-summary -- {PY} loop.py &
pid=$!
{WAIT_READY.format(n=1)}
kill -HUP $pid
sleep 0.5
kill -0 $pid && kill -0 $(ls ready-* | cut -d- -f2) && echo alive
touch stop
wait $pid
echo status=$?
""")
    assert "alive" in proc.stdout.split(), proc.stderr
    assert status_of(proc.stdout) == 0, proc.stderr
    single_line(proc.stderr, r"SIGHUP was relayed to it, and it finished normally \(status 0\)")
    _, session = trace_report(proc.stderr)
    assert not session_exists(session)
    pid = int(next(tmp_path.glob("ready-*")).name[6:])
    assert begins(events_of(read_trace(tmp_path / "t"), pid), "step") > 0


def test_sigkill_of_the_command_still_destroys_the_session(tmp_path: Path) -> None:
    write(tmp_path, "loop.py", LOOP)
    proc = job_script(tmp_path, f"""
{TRACE} -o t --no-summary -- {PY} loop.py &
pid=$!
{WAIT_READY.format(n=1)}
kill -KILL $(ls ready-* | cut -d- -f2)
wait $pid
echo status=$?
""")
    assert status_of(proc.stdout) == 128 + signal.SIGKILL, proc.stderr
    single_line(proc.stderr, r"the command was killed by signal 9 \(SIGKILL\)")
    _, session = trace_report(proc.stderr)
    assert not session_exists(session)
    assert read_trace(tmp_path / "t").named("function_begin")


def test_sigint_from_the_same_process_group_is_relayed(tmp_path: Path) -> None:
    write(tmp_path, "loop.py", LOOP)
    # Our own process group: the sender (this test) and trace share it.
    with subprocess.Popen(
        [*CLI, "trace", "-o", "t", "--no-summary", "--", PY, "loop.py"],
        cwd=tmp_path, env=clean_env(), stderr=subprocess.PIPE, text=True,
    ) as proc:
        deadline = time.monotonic() + 90
        while not list(tmp_path.glob("ready-*")):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=90)
    # The program died of KeyboardInterrupt, which CPython turns into death by SIGINT.
    assert proc.returncode == 128 + signal.SIGINT, stderr
    assert "KeyboardInterrupt" in stderr
    single_line(stderr, r"the command was killed by signal 2 \(SIGINT\)")
    _, session = trace_report(stderr)
    assert not session_exists(session)



def test_a_command_that_ignores_the_relayed_signal_keeps_its_status(tmp_path: Path) -> None:
    """Issue 34, point 5: SIGINT relayed to a command that ignores it and finishes
    normally: trace exits with the command's status 0 and says what happened."""
    write(tmp_path, "deaf.py", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
          + LOOP + "print('finished')\n")
    with subprocess.Popen(
        [*CLI, "trace", "-o", "t", "--no-summary", "--", PY, "deaf.py"],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        deadline = time.monotonic() + 90
        while not list(tmp_path.glob("ready-*")):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.5)  # the command goes on after the signal
        assert proc.poll() is None
        (tmp_path / "stop").touch()
        stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stderr
    assert stdout == "finished\n"
    assert "killed" not in stderr and "ended by" not in stderr, stderr
    single_line(stderr, r"SIGINT was relayed to it, and it finished normally \(status 0\)")
    _, session = trace_report(stderr)
    assert not session_exists(session)


POOL = """
import collections, json, os, multiprocessing as mp

def work(n):
    return os.getpid()

if __name__ == "__main__":
    with mp.get_context("fork").Pool(2) as pool:  # ends with terminate()
        workers = [w.pid for w in pool._pool]
        done = pool.map(work, range(16), chunksize=1)
    print(json.dumps({"workers": workers, "done": collections.Counter(done)}))
"""


def test_pool_terminate_keeps_everything_the_workers_ran(tmp_path: Path) -> None:
    # A worker terminate() kills may have run nothing (docs/activation.md: it may
    # still be waiting for LTTng-UST's registration); whatever ran is in the trace.
    write(tmp_path, "pool.py", POOL)
    proc = subprocess.run([*CLI, "trace", "-o", "t", "--no-summary", "--", PY, "pool.py"],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                          timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    trace = read_trace(tmp_path / "t")
    for pid in out["workers"]:
        assert begins(events_of(trace, pid), "work") == out["done"].get(str(pid), 0)


# ---------------------------------------------------------------------------- checks first


def test_every_bad_setting_is_reported_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(tmp_path, "bad.txt",
                   "[Python.default]\ntrace_mode = TRACING\nevents = functions\n")
    ran = tmp_path / "ran"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PINSIGHT_TRACE_PYTHON", "TRACNG")
    code = cli.main(["trace", "--events", "fucntion", "--mode", "FAST", "--config", str(config),
                     "--module", "a..b", "--", "touch", str(ran)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert all(ln.startswith("pinsight-python trace: error: ") for ln in lines), err
    assert len(lines) == 5, err
    assert "PINSIGHT_TRACE_PYTHON: unknown trace mode 'TRACNG'" in err
    assert "did you mean 'TRACING'?" in err
    assert "--events: unknown event 'fucntion'" in err and "did you mean 'function'?" in err
    assert "--mode: unknown trace mode 'FAST'" in err
    assert "--module: expected module names" in err
    assert f"{config}:3: events: unknown event 'functions'" in err
    assert not ran.exists()
    assert not list(tmp_path.glob("pinsight-trace-*"))


def test_a_fifo_as_configuration_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    assert cli.main(["trace", "--config", str(fifo), "--", "true"]) == 2
    assert "is a FIFO: a trace configuration must be a regular file" in capsys.readouterr().err
    # The start-up shim, and the core itself (activate(), whatever names the file).
    probe = "import pinsight_python as p; print(p.status()['active'])"
    direct = ("import pinsight_python as p\ntry:\n    p.activate()\n"
              "except p.ConfigError as e:\n    print('refused:', e)\n")
    for env, code, expected in [
        (clean_env(PINSIGHT_PYTHON="1", PINSIGHT_TRACE_CONFIG_FILE=str(fifo)), probe, "False"),
        (clean_env(PINSIGHT_TRACE_CONFIG_FILE=str(fifo)), direct, "refused:"),
    ]:
        proc = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(expected), proc.stdout
        assert "FIFO" in proc.stderr + proc.stdout


def test_ctf_2_is_refused_before_anything_runs_where_lttng_cannot_write_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "ran"
    args = ["trace", "--trace-format", "ctf-2", "-o", str(tmp_path / "t"), "--", "touch", str(ran)]
    path, minor = lttng.ctl_library()
    if minor >= 15:  # LTTng 2.15 and later write it (tests/integration/test_lttng_versions.py)
        assert cli.main([*args[:-2], "true"]) == 0
        return
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"--trace-format ctf-2: needs LTTng 2.15 or later; this LTTng ({path}, LTTng 2.1" in err
    assert "writes ctf-1.8 only" in err
    assert not ran.exists() and not (tmp_path / "t").exists()


CHILDREN = """
import subprocess, sys
def work():
    return sum(range(10))
work()
if len(sys.argv) > 1:
    for _ in range(2):
        subprocess.run([sys.executable, __file__], check=True)
"""


def test_configuration_warnings_once_per_run_and_export_to_a_closed_pipe(tmp_path: Path) -> None:
    write(tmp_path, "kids.py", CHILDREN)
    config = write(tmp_path, "c.txt", "[Python.default]\ntrace_mod = TRACING\n")
    proc = job_script(tmp_path, f"""
{TRACE} -o t --no-summary --config {config} -- {PY} kids.py parent
echo status=$?
{PY} -m pinsight_python.cli export -o - t | head -c 20
echo
echo export=${{PIPESTATUS[0]}}
""")
    assert status_of(proc.stdout) == 0, proc.stderr
    line = single_line(proc.stderr, "trace_mod")
    assert line.startswith(f"pinsight-python trace: warning: {config}:2: unknown key 'trace_mod'")
    assert "did you mean 'trace_mode'?" in line
    _, session = trace_report(proc.stderr)
    assert not session_exists(session)
    # Three processes traced; export's reader went away after 20 bytes: no noise.
    assert len(read_trace(tmp_path / "t").named("process_info")) >= 3
    assert re.search(r'^\{"traceEvents":\s*\[', proc.stdout, re.M), proc.stdout
    assert "export=0" in proc.stdout
    assert "Error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


FILTERED = """
import json

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

import email.parser  # imports through importlib's frozen bootstrap
fib(10)
json.loads(json.dumps({"a": [1, 2]}))
print(__import__("os").getpid())
"""


def test_trace_module_filters(tmp_path: Path) -> None:
    write(tmp_path, "filtered.py", FILTERED)
    for options, check in [
        (["--exclude", "json", "--ignore-frozen"],
         lambda f: "<frozen importlib" not in f and "/json/" not in f),
        (["--module", "__main__"], lambda f: f.endswith("filtered.py")),
    ]:
        out = tmp_path / f"t{len(options)}"
        proc = subprocess.run(
            [*CLI, "trace", "-o", str(out), "--no-summary", *options, "--", PY, "filtered.py"],
            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=180,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        own = events_of(read_trace(out), int(proc.stdout))
        files = {e.file for e in own.named("function_begin")}
        assert begins(own, "fib") == 177
        assert all(check(f) for f in files), (options, sorted(files))
        check_balanced(own)


# ---------------------------------------------------------------------------- the CLI


def test_version_and_a_help_layout_with_examples_everywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    version = capsys.readouterr().out
    assert re.fullmatch(r"pinsight-python \d+\.\d+\.\d+\S* \(CPython [\d.]+\S*\)\n", version)
    # One version: the package's, which the build copies into the metadata.
    assert version.split()[1] == pinsight_python.__version__ == metadata.version("pinsight-python")
    proc = subprocess.run([PY, "-m", "pinsight_python", "--version"], capture_output=True,
                          text=True, check=False, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, version)

    helps = {}
    for command in [None, *(c.name for c in cli.SUBCOMMANDS)]:
        with pytest.raises(SystemExit):
            cli.main([command, "--help"] if command else ["--help"])
        helps[command] = capsys.readouterr().out
    proc = subprocess.run([PY, "-m", "pinsight_python", "--help"], capture_output=True,
                          text=True, check=False, timeout=60)
    helps["python -m"] = proc.stdout
    for command, text in helps.items():
        assert text.startswith("usage: "), command
        examples = text.split("\nexamples:\n", 1)
        assert len(examples) == 2 and examples[1].startswith("  "), (command, text)


CHANNEL = """
import os, re, subprocess
sessions = subprocess.run(["lttng", "list"], capture_output=True, text=True).stdout
[name] = [w for w in sessions.split() if w.startswith(f"pinsight-python-{os.getppid()}-")]
listed = subprocess.run(["lttng", "list", name], capture_output=True, text=True).stdout
size = re.search(r"Sub-buffer size: *(\\d+) bytes", listed).group(1)
count = re.search(r"Sub-buffer count: *(\\d+)", listed).group(1)
print(size, count)
"""


def test_the_channel_fits_the_buffer_budget_of_the_node(tmp_path: Path) -> None:
    """Issue 36, point 5: the session's channel, as LTTng reports it, takes at most the
    budget on the CPUs LTTng makes buffers for, and trace says it made it smaller."""
    cpus = lttng.possible_cpus()
    budget = (4 << 20) * lttng.default_num_subbuf() * cpus // 2  # half the default channel
    write(tmp_path, "channel.py", CHANNEL)
    proc = subprocess.run(
        [*CLI, "trace", "--no-summary", "-o", "t", "--buffer-budget", f"{budget >> 20}M",
         "--", PY, "channel.py"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=180, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    size, count = map(int, proc.stdout.split())
    assert size * count * cpus <= budget
    assert (size, count) == lttng.fit_channel(4 << 20, lttng.default_num_subbuf(), cpus, budget)
    single_line(proc.stderr, rf"warning: --buffer-budget {budget >> 20}M: {cpus} possible CPUs "
                rf"get {count} x 4 MiB sub-buffers each")


@pytest.mark.parametrize("argv, said", [
    (["trace", "--evnts", "function", "--", "true"],
     "pinsight-python trace: error: unrecognized arguments: --evnts (did you mean --events?)"),
    (["report", "--jsn", "t"],
     "pinsight-python report: error: unrecognized arguments: --jsn (did you mean --json?)"),
    (["export", "-o", "x.json", "--zzz", "t"],
     "pinsight-python export: error: unrecognized arguments: --zzz"),
])
def test_a_misspelt_option_gets_its_subcommand_usage_and_a_suggestion(
    capsys: pytest.CaptureFixture[str], argv: List[str], said: str
) -> None:
    """Issue 34, point 5: the subcommand's own usage, and the option meant."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"usage: pinsight-python {argv[0]} "), err
    assert err[-1] == said


def no_session_anywhere(argv: List[str]) -> List[str]:
    """argv run where no LTTng session daemon can be reached: a mount namespace with
    empty run directories and a home of its own."""
    hide = "mount -t tmpfs none /var/run/lttng 2>/dev/null || mkdir -p /var/run/lttng; "
    return ["unshare", "--mount", "--", "sh", "-c",
            hide + 'HOME=$(mktemp -d) LTTNG_HOME=$HOME exec "$@"', "sh", *argv]


def test_tracing_without_any_session_says_so_once(tmp_path: Path) -> None:
    program = write(tmp_path, "p.py", "import os\nos.fork() or print('child')\nos.wait()\n")
    proc = subprocess.run(
        no_session_anywhere([PY, str(program)]), cwd=tmp_path,
        env=clean_env(PINSIGHT_PYTHON="1"), capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    line = single_line(proc.stderr, "no LTTng session")
    assert "records python_pinsight_lttng_ust events yet" in line


def test_usr1_as_trace_ends_does_not_end_it(tmp_path: Path) -> None:
    # A job script that keeps sending SIGUSR1 to trace, from the command's start
    # until trace is gone: while the command runs each is forwarded (it ends once the
    # script has sent 30, however long a loaded machine takes to start sending);
    # after it has ended (the session torn down, the summary written, the interpreter
    # finalizing) none may end trace, whose status stays the command's.
    write(tmp_path, "prog.py", "import os, time\nopen(f'ready-{os.getpid()}', 'w').close()\n"
          "while not os.path.exists('sent-30'):\n    time.sleep(0.01)\n"
          "print('done', flush=True)\n")
    proc = job_script(tmp_path, f"""
{TRACE} -o t -- {PY} prog.py &
pid=$!
{WAIT_READY.format(n=1)}
sent=0
while kill -USR1 $pid 2>/dev/null; do
  sent=$((sent + 1)); [ $sent -eq 30 ] && touch sent-30; sleep 0.005
done
wait $pid
echo status=$? sent=$sent
""")
    assert status_of(proc.stdout.replace(" sent=", "\nsent=")) == 0, proc.stderr
    assert "done" in proc.stdout
    sent = re.search(r"sent=(\d+)", proc.stdout)
    assert sent and int(sent.group(1)) > 20, proc.stdout
    assert "trace written to" in proc.stderr, proc.stderr
    _, session = trace_report(proc.stderr)
    assert not session_exists(session)


# ---------------------------------------------------------------------------- INTROSPECT


def test_introspect_script_gets_the_trace_folder(tmp_path: Path) -> None:
    """Under `trace`, an INTROSPECT window end's script gets trace's output folder as
    its first argument (PInsight's: where traces are), and an environment without
    trace's switch (PINSIGHT_PYTHON), so that the Python it runs is not traced; once
    it rotates the session (docs/configuration.md's recipe) it reads the window's
    calls there. The summary lists the pause."""
    script = write(tmp_path, "look.sh", """\
        here="$(dirname "$0")"
        printf "%s\\n" "$1" "$2" "${PINSIGHT_PYTHON-unset}" > "$here/saw"
        lttng rotate "$PINSIGHT_PYTHON_TRACE_RUN" > /dev/null
        babeltrace2 "$1" | grep -c 'function_begin.*qualname = "f"' > "$here/window"
        kill -USR1 "$2"
        """)
    config = write(tmp_path, "cfg.ini", textwrap.dedent(f"""\
        [Lexgion.default]
        window_end_action = INTROSPECT:-1:{script}:MONITORING
        [Lexgion(Python:f)]
        max_num_traces = 2
        """))
    write(tmp_path, "prog.py", "import os, time\ndef f():\n    return 1\n"
          "for _ in range(5):\n    f()\n    time.sleep(0.02)\nprint(os.getpid())\n")
    proc = subprocess.run([*CLI, "trace", "-o", "t", "--config", str(config), "--", PY, "prog.py"],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                          timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "saw").read_text().splitlines() == [
        str(tmp_path / "t"), proc.stdout.strip(), "unset"]
    assert (tmp_path / "window").read_text().strip() == "2"
    assert re.search(r"mode changes: TRACING at \+\S+ \S+ \(introspect_pause\), "
                     r"MONITORING at \+\S+ \S+ \(introspect\), "
                     r"TRACING at \+\S+ \S+ \(reload\)", proc.stderr), proc.stderr
    trace = read_trace(tmp_path / "t")
    assert begins(trace, "f") == 2
    check_balanced(trace)
