"""LTTng 2.15 and later (Debian sid's 2.16, in a private prefix) beside the machine's 2.13.

scripts/test.sh's LTTng 2.16 stage runs this file, with the end-to-end core, under
scripts/with-lttng.sh on .venv-3.14 (an interpreter whose glibc is sid's): a session
daemon of LTTng 2.16 of its own (LTTNG_RUNDIR), this process and its children loading
LTTng-UST 2.16, liblttng-ctl 2.16 and babeltrace2 2.1 (LD_LIBRARY_PATH), while the
machine's LTTng 2.13 daemon (root's) keeps running. Elsewhere it is skipped: it needs
that environment, which the stage gives it (PINSIGHT_PYTHON_LTTNG_STAGE=1 then makes a
missing piece an error, never a skip).

What it checks, as a user meets it:
- `trace` writes CTF 1.8 with LTTng 2.16, whose own default is CTF 2: babeltrace2 2.0
  (Debian 12's python3-bt2), our reader and Trace Compass's analyses read it, with the
  program's own counts;
- `trace --trace-format ctf-2` writes CTF 2, which our reader reads with babeltrace2
  2.1 (the same counts) and refuses with babeltrace2 2.0 in one line saying what to do;
- mixed versions fail with one line naming both: a program whose LTTng-UST cannot
  register with the run's daemon, an application's start-up warning, and
  liblttng-ctl against a daemon of another release, both ways.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Dict, List

import pytest

from pinsight_python import _pinsight_reader
from pinsight_python.recording import lttng
from tests.tracing import CLI, HERE, read_trace, report_json, system_lttng_env

PREFIX = Path(os.environ.get("PINSIGHT_LTTNG_PREFIX") or "/opt/pinsight-lttng")
SITE = Path(os.environ.get("PINSIGHT_PYTHON_SITE", "/opt/pinsight-python"))
USER = "pinsight-lttng"  # a user of its own: its LTTng 2.16 daemon is the test's
SBIN_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"
IN_STAGE = os.environ.get("PINSIGHT_PYTHON_LTTNG_STAGE") == "1"


def _why_not_ready() -> str:
    glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    if not os.environ.get("LTTNG_RUNDIR") or not os.environ.get("PINSIGHT_LTTNG_PREFIX"):
        return "not under scripts/with-lttng.sh (no LTTng 2.16 session daemon of its own)"
    if tuple(int(n) for n in glibc.split()[-1].split(".")) < (2, 38):
        return f"{sys.executable} runs on {glibc}: LTTng 2.16's libraries need sid's"
    if lttng.ctl_library()[1] < 15:
        return "liblttng-ctl is not LTTng 2.15 or later's (LD_LIBRARY_PATH)"
    return ""


WHY_NOT = _why_not_ready()
if IN_STAGE and WHY_NOT:
    raise RuntimeError(f"the LTTng 2.16 stage cannot run: {WHY_NOT}")
pytestmark = pytest.mark.skipif(
    bool(WHY_NOT), reason=f"{WHY_NOT}: scripts/test.sh's LTTng 2.16 stage runs this file "
    "(bash scripts/with-lttng.sh -- .venv-3.14/bin/python -m pytest ...)")

# Known counts: fib(6) makes 25 calls; two threads run work() once each.
PROGRAM = textwrap.dedent("""
    import threading

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def work(i):
        return sum(sorted([3, 1, 2])) + i

    fib(6)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("done")
""")
PROGRAM_CALLS = {"fib": 25, "work": 2}


def trace(tmp_path: Path, *options: str, env: Dict[str, str] | None = None,
          command: List[str] | None = None) -> subprocess.CompletedProcess[str]:
    """`pinsight-python trace -o tmp_path/out OPTIONS -- python prog.py` on this interpreter."""
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    argv = [*CLI, "trace", "--no-summary", "-o", str(tmp_path / "out"), *options, "--",
            *(command or [sys.executable]), str(program)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=180,
                          env=env or dict(os.environ), check=False)


def program_calls(report: Dict[str, object]) -> Dict[str, int]:
    [proc] = report["processes"]  # type: ignore[index]
    return {f["qualname"]: f["calls"] for f in proc["functions"]  # type: ignore[index]
            if f["kind"] == "python" and f["qualname"] in PROGRAM_CALLS}


def metadata_start(trace_dir: Path) -> bytes:
    [metadata] = trace_dir.rglob("metadata")
    return metadata.read_bytes()[:16]


def the_machines_daemon() -> Dict[str, str]:
    """The machine's LTTng 2.13 environment, its root session daemon running (started
    as every stage starts it when it does not run)."""
    env = system_lttng_env()
    if subprocess.run(["lttng", "list"], env=env, capture_output=True, check=False).returncode:
        subprocess.run(["lttng-sessiond", "--daemonize"], env=env, check=True)
    return env


def test_trace_writes_ctf_1_8_that_babeltrace2_2_0_our_reader_and_flamegraph_read(
    tmp_path: Path,
) -> None:
    run = trace(tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "done\n"
    assert not metadata_start(tmp_path / "out").startswith(b"\x1e"), "CTF 2's metadata"
    # Debian 12's babeltrace2 2.0, through its Python bindings: every begin has its end.
    events = read_trace(tmp_path / "out")
    begins = [e.fields["qualname"] for e in events.named("function_begin")]
    assert {q: begins.count(q) for q in PROGRAM_CALLS} == PROGRAM_CALLS
    assert len(events.named("function_end")) == len(begins) and events.discarded == 0
    # Our reader, on the babeltrace2 this process loaded (2.1 here), as a user runs it.
    assert _pinsight_reader.reads_ctf2()
    assert program_calls(report_json(tmp_path / "out", "--top", "0")) == PROGRAM_CALLS
    svg, chrome = tmp_path / "prog.svg", tmp_path / "prog.json"
    for command in (["flamegraph", "-o", str(svg)], ["export", "-o", str(chrome)]):
        done = subprocess.run([*CLI, *command, str(tmp_path / "out")], capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
    assert "fib" in svg.read_text() and '"fib"' in chrome.read_text()


def test_ctf_2_when_asked_is_read_by_babeltrace2_2_1_and_refused_clearly_by_2_0(
    tmp_path: Path,
) -> None:
    run = trace(tmp_path, "--trace-format", "ctf-2")
    assert run.returncode == 0, run.stderr
    assert metadata_start(tmp_path / "out").startswith(b"\x1e{"), "not CTF 2's metadata"
    # babeltrace2 2.1 (MIP 1): the counts of the CTF 1.8 trace.
    assert program_calls(report_json(tmp_path / "out", "--top", "0")) == PROGRAM_CALLS
    # babeltrace2 2.1's own Python bindings (sid's python3-bt2) agree.
    dist = next((PREFIX / "usr/lib/python3/dist-packages").glob("bt2"), None)
    assert dist is not None, f"{PREFIX} has no python3-bt2: bash scripts/sid-prefix.sh lttng"
    dump = subprocess.run([sys.executable, str(HERE / "bt2_dump.py"), str(tmp_path / "out")],
                          env={**os.environ, "PYTHONPATH": str(dist.parent)},
                          capture_output=True, text=True, check=False)
    assert dump.returncode == 0, dump.stderr
    begins = [e["fields"]["qualname"] for e in map(json.loads, dump.stdout.splitlines())
              if e.get("name") == f"{lttng.PROVIDER}:function_begin"]
    assert {q: begins.count(q) for q in PROGRAM_CALLS} == PROGRAM_CALLS
    # The machine's babeltrace2 2.0: one line that says what to do, from report and the
    # summary alike.
    report = subprocess.run([*CLI, "report", str(tmp_path / "out")], env=system_lttng_env(),
                            capture_output=True, text=True, check=False)
    assert report.returncode != 0
    assert "this trace is CTF 2; babeltrace2 2.0 cannot read it; record with " \
        "--trace-format=ctf-1.8 or install babeltrace2 2.1" in report.stderr, report.stderr


def test_a_program_whose_lttng_ust_cannot_reach_the_runs_daemon_is_named_by_trace(
    tmp_path: Path,
) -> None:
    # The program loads the machine's LTTng-UST 2.13 (no LD_LIBRARY_PATH): it registers
    # on lttng-ust-sock-8, where the run's LTTng 2.16 daemon serves lttng-ust-sock-11.
    # (Not `env -u`: under trace, a program of Debian 12's glibc cannot load the
    # preloaded descriptor guard against the prefix's LTTng-UST, which needs sid's.)
    unset = tmp_path / "machines_lttng_ust.py"
    unset.write_text("import os, sys\nos.environ.pop('LD_LIBRARY_PATH')\n"
                     "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")
    run = trace(tmp_path, command=[sys.executable, str(unset)])
    assert run.returncode == 0, run.stderr
    assert run.stdout == "done\n"
    lines = [ln for ln in run.stderr.splitlines() if "cannot talk to" in ln]
    # The process's own line, and trace's.
    assert len(lines) == 2, run.stderr
    rundir = os.environ["LTTNG_RUNDIR"]
    for line in lines:
        assert "/liblttng-ust.so.1.0.0, LTTng 2.12 or 2.13, registering on lttng-ust-sock-8) " \
            "cannot talk to the session daemon in " in line and str(PREFIX) not in line, line
        assert f"{rundir} (LTTng 2.16.0, pid " in line and "lttng-ust-sock-11)" in line, line
    assert "no LTTng session records" not in run.stderr


def test_an_application_of_another_lttng_says_so_at_start_up(tmp_path: Path) -> None:
    # LTTng-UST 2.16 where the machine's LTTng 2.13 daemon runs (no LTTNG_UST_APP_PATH:
    # it looks where LTTng-UST always looks).
    env = the_machines_daemon()
    env.update({"LD_LIBRARY_PATH": os.environ["LD_LIBRARY_PATH"], "HOME": str(tmp_path),
                "PINSIGHT_TRACE_PYTHON": "TRACING"})
    run = subprocess.run([sys.executable, "-c", "print('ok')"], env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert (run.returncode, run.stdout) == (0, "ok\n"), run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith("pinsight-python: tracing is active in process ")
    assert ", but no LTTng session can record its events: its LTTng-UST (" in line
    assert "LTTng 2.15 or later, registering on lttng-ust-sock-11) cannot talk to the session " \
        "daemon in /var/run/lttng (LTTng 2.13." in line and "lttng-ust-sock-8)" in line, line


def test_liblttng_ctl_2_16_against_the_machines_2_13_daemon_names_both(tmp_path: Path) -> None:
    env = the_machines_daemon()
    env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]  # liblttng-ctl 2.16, no LTTNG_RUNDIR
    run = trace(tmp_path, env=env)
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""  # nothing ran
    [line] = [ln for ln in run.stderr.splitlines() if "different LTTng versions" in ln]
    assert f"this liblttng-ctl ({PREFIX}" in line and ", LTTng 2.16) and the session daemon " \
        "in /var/run/lttng (LTTng 2.13." in line, line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ------------------------------------------------ liblttng-ctl 2.13 against a 2.16 daemon


def as_user(*command: str, env: Dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    home = pwd.getpwnam(USER).pw_dir
    base = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", **(env or {})}
    runuser = shutil.which("runuser", path=SBIN_PATH) or "runuser"
    # env -i: runuser keeps the caller's environment (the private daemon's LTTNG_RUNDIR).
    return subprocess.run([runuser, "-u", USER, "--", "env", "-i",
                           *(f"{k}={v}" for k, v in base.items()), *command],
                          cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def stop_user_daemon() -> None:
    """The user's session daemon (by its pid file) and its consumer daemons (children
    it ends as it exits)."""
    pid_file = Path(pwd.getpwnam(USER).pw_dir) / ".lttng" / "lttng-sessiond.pid"
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 15)
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, f"the user's session daemon {pid} did not stop"
        time.sleep(0.1)


def test_the_machines_liblttng_ctl_against_a_users_2_16_daemon_names_both() -> None:
    """The issue's case: a user whose session daemon is LTTng 2.16 runs the site install
    (Debian's CPython: liblttng-ctl 2.13), which found "no session daemon" before."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create the unprivileged user (CI runs as root)")
    assert (SITE / "bin" / "pinsight-python").exists(), f"no site install in {SITE}"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        useradd = shutil.which("useradd", path=SBIN_PATH) or "useradd"
        subprocess.run([useradd, "--create-home", "--shell", "/bin/bash", USER], check=True)
    stop_user_daemon()  # left by an earlier run that was killed
    work = Path(tempfile.mkdtemp(prefix="pinsight-lttng-versions-"))
    os.chmod(work, 0o777)
    try:
        started = as_user("bash", "-c", f"source {PREFIX}/env.sh && lttng-sessiond --daemonize")
        assert started.returncode == 0, started.stderr
        run = as_user(str(SITE / "bin" / "pinsight-python"), "trace", "-o", str(work / "out"),
                      "--", str(SITE / "bin" / "python"), "-c", "pass", cwd=work)
        assert run.returncode == 1, run.stderr
        [line] = [ln for ln in run.stderr.splitlines() if "different LTTng versions" in ln]
        home = pwd.getpwnam(USER).pw_dir
        assert "/liblttng-ctl.so.0, LTTng 2.13 or earlier) and the session daemon in " \
            f"{home}/.lttng (LTTng 2.16.0, pid " in line and str(PREFIX) not in line, line
    finally:
        stop_user_daemon()
        shutil.rmtree(work, ignore_errors=True)
