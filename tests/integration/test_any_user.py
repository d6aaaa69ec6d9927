"""An install made by root serves every user: `trace` and `report` as an unprivileged one.

scripts/setup.sh makes the site install ($PINSIGHT_PYTHON_SITE, default
/opt/pinsight-python) from Debian's CPython, readable by all; the editable
environments live in root's home and serve root only.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

SBIN_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"
SITE = Path(os.environ.get("PINSIGHT_PYTHON_SITE", "/opt/pinsight-python"))
USER = "pinsight-user"


def ensure_user() -> None:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        useradd = shutil.which("useradd", path=SBIN_PATH) or "useradd"
        subprocess.run([useradd, "--create-home", "--shell", "/bin/bash", USER], check=True)


def as_user(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    home = pwd.getpwnam(USER).pw_dir
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}
    runuser = shutil.which("runuser", path=SBIN_PATH) or "runuser"
    return subprocess.run([runuser, "-u", USER, "--", *command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180, check=False)


def stop_user_daemons() -> None:
    """The session daemon `trace` started for this user, who had none, and its
    consumer daemons: a consumer left behind keeps its socket, and the next session
    daemon of the user then has none ("No UST consumer detected")."""
    subprocess.run(["pkill", "-u", USER, "^lttng-"], check=False)
    deadline = time.monotonic() + 30
    while subprocess.run(["pgrep", "-u", USER, "^lttng-"], capture_output=True,
                         check=False).returncode == 0:
        assert time.monotonic() < deadline, "the user's LTTng daemons did not stop"
        time.sleep(0.1)


def test_trace_and_report_as_an_unprivileged_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create the unprivileged user (CI runs as root)")
    assert (SITE / "bin" / "pinsight-python").exists(), (
        f"no site install in {SITE}: run bash scripts/setup.sh"
    )
    ensure_user()
    stop_user_daemons()  # left by an earlier run that was killed
    # Not under pytest's tmp_path: root's, which others cannot enter.
    work = Path(tempfile.mkdtemp(prefix="pinsight-any-user-"))
    os.chmod(work, 0o777)
    (work / "prog.py").write_text(textwrap.dedent("""
        def user_work():
            return 1
        for _ in range(10):
            user_work()
        print("done")
    """))
    try:
        run = as_user(str(SITE / "bin" / "pinsight-python"), "trace", "-o", str(work / "out"),
                      "--", str(SITE / "bin" / "python"), str(work / "prog.py"), cwd=work)
        assert run.returncode == 0, run.stderr
        assert run.stdout == "done\n"
        report = as_user(str(SITE / "bin" / "pinsight-python"), "report", "--json", "--top", "0",
                         str(work / "out"), cwd=work)
        assert report.returncode == 0, report.stderr
        assert '"user_work"' in report.stdout
        owner = pwd.getpwuid((work / "out").stat().st_uid).pw_name
        assert owner == USER
    finally:
        stop_user_daemons()
        shutil.rmtree(work, ignore_errors=True)


def test_attach_as_an_unprivileged_user() -> None:
    """A user attaches to their own running program with the site install: no root,
    no debugger, no capability; the program ends as it would have."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create the unprivileged user (CI runs as root)")
    ensure_user()
    stop_user_daemons()
    work = Path(tempfile.mkdtemp(prefix="pinsight-any-user-"))
    os.chmod(work, 0o777)
    (work / "prog.py").write_text(textwrap.dedent("""
        import os, sys, time
        def tick():
            time.sleep(0.002)
        print("ready", flush=True)
        while not os.path.exists(sys.argv[1]):
            tick()
        print("done")
        sys.exit(4)
    """))
    (work / "job.sh").write_text(textwrap.dedent(f"""
        {SITE}/bin/python prog.py stop > prog.out &
        program=$!
        trap 'touch stop' EXIT  # whatever happens, the program ends
        until grep -q ready prog.out; do sleep 0.05; done
        timeout 120 {SITE}/bin/pinsight-python attach $program -o out --duration 1 \
          --no-summary || exit 90
        touch stop
        wait $program
        echo "program exited $?"
    """))
    try:
        job = as_user("bash", str(work / "job.sh"), cwd=work)
        assert job.returncode == 0, job.stderr
        assert job.stdout == "program exited 4\n", (job.stdout, job.stderr)
        assert (work / "prog.out").read_text() == "ready\ndone\n"
        report = as_user(str(SITE / "bin" / "pinsight-python"), "report", "--json", "--top", "0",
                         str(work / "out"), cwd=work)
        assert report.returncode == 0, report.stderr
        assert '"tick"' in report.stdout
    finally:
        stop_user_daemons()
        shutil.rmtree(work, ignore_errors=True)


def test_wheel_and_editable_builds_are_kept_apart() -> None:
    """The site install (a wheel, `pip install .`) was built in this checkout after the
    editable one: each keeps its own build directory and CMake options."""
    root = Path(__file__).resolve().parents[2]
    package = next((SITE / "lib").glob("python3*/site-packages/pinsight_python"), None)
    assert package is not None, f"no site install in {SITE}: run bash scripts/setup.sh"
    assert not list(package.glob("_pinsight_python_testing*")), "a wheel has no test hooks"
    editable = list((root / "build").glob("editable-*/CMakeCache.txt"))
    assert editable, "the editable builds are in build/editable-WHEEL_TAG"
    for cache in editable:
        assert "PINSIGHT_PYTHON_TESTING:BOOL=ON" in cache.read_text(), cache
    site_cache = root / "build" / "site" / "CMakeCache.txt"
    if site_cache.exists():  # this checkout made the site install
        assert "PINSIGHT_PYTHON_TESTING:BOOL=ON" not in site_cache.read_text()
