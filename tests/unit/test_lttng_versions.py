"""Telling LTTng versions apart from what the machine shows (activation/lttng_versions.py),
on run directories and libraries made here: no LTTng, no daemon. The end-to-end
checks against real daemons of two versions are tests/integration/test_lttng_versions.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinsight_python.activation import lttng_versions as versions

UST_213 = b"\0lttng-ust-sock-8\0/var/run/lttng/lttng-ust-sock-8\0"
UST_216 = b"\0lttng-ust-sock-11\0LTTNG_UST_APP_PATH\0"


def fake_library(tmp_path: Path, content: bytes, name: str = "liblttng-ust.so.1") -> Path:
    """A library file and a /proc/self/maps that maps it, as loaded_ust_library() reads them."""
    lib = tmp_path / name
    lib.write_bytes(b"\x7fELF" + content)
    maps = tmp_path / "maps"
    maps.write_text(f"7f0000000000-7f0000001000 r-xp 00000000 08:01 42   {lib}\n"
                    "7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n")
    return maps


def rundir(path: Path, *abis: int, client: bool = True, pid: int = 0) -> Path:
    """A session daemon's run directory: its client and registration sockets (plain files
    stand for them: only their names are read) and its pid file."""
    path.mkdir(parents=True)
    if client:
        (path / versions.CLIENT_SOCKET).touch()
    for abi in abis:
        (path / f"lttng-ust-sock-{abi}").touch()
    if pid:
        (path / versions.PID_FILE).write_text(f"{pid}\n")
    return path


@pytest.fixture
def system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Root's run directory, moved under tmp_path."""
    path = tmp_path / "run-lttng"
    monkeypatch.setattr(versions, "SYSTEM_RUNDIR", path)
    return path


def test_the_library_tells_its_socket_and_whether_it_reads_the_app_path(tmp_path: Path) -> None:
    old = versions.loaded_ust_library(str(fake_library(tmp_path, UST_213)))
    assert old is not None and (old.abi, old.honours_app_path) == (8, False)
    assert old.release == "LTTng 2.12 or 2.13" and old.socket == "lttng-ust-sock-8"
    new = versions.loaded_ust_library(str(fake_library(tmp_path, UST_216)))
    assert new is not None and (new.abi, new.honours_app_path) == (11, True)
    assert new.release == "LTTng 2.15 or later"
    (tmp_path / "empty").write_text("")
    assert versions.loaded_ust_library(str(tmp_path / "empty")) is None  # not loaded yet


def test_a_daemon_of_the_same_abi_anywhere_the_library_looks_is_no_problem(
    tmp_path: Path, system: Path
) -> None:
    library = versions.UstLibrary("/lib/liblttng-ust.so.1", 8, False)
    rundir(system, 11)
    rundir(tmp_path / "home" / ".lttng", 8)
    assert versions.registration_problem({"HOME": str(tmp_path / "home")}, library) == ""
    # No daemon at all: the general line says it, not this one.
    assert versions.registration_problem({"HOME": str(tmp_path / "nobody")},
                                         versions.UstLibrary("x", 11, True)) == ""


def test_a_daemon_of_another_abi_is_named_with_both_versions(tmp_path: Path, system: Path) -> None:
    rundir(system, 8, pid=os.getpid())  # this interpreter: no lttng-sessiond version in it
    library = versions.UstLibrary("/opt/lttng/liblttng-ust.so.1", 11, True)
    problem = versions.registration_problem({"HOME": str(tmp_path)}, library)
    assert "/opt/lttng/liblttng-ust.so.1, LTTng 2.15 or later, registering on lttng-ust-sock-11" \
        in problem
    assert f"the session daemon in {system} (LTTng 2.12 to 2.14, pid {os.getpid()}, " \
        "lttng-ust-sock-8)" in problem
    assert "different LTTng versions" in problem and "LD_LIBRARY_PATH" in problem
    assert "\n" not in problem


def test_the_app_path_replaces_the_usual_places_for_a_library_that_reads_it(
    tmp_path: Path, system: Path
) -> None:
    rundir(system, 8)
    private = rundir(tmp_path / "private", 11)
    env = {"HOME": str(tmp_path), "LTTNG_UST_APP_PATH": str(private)}
    assert versions.registration_problem(env, versions.UstLibrary("x", 11, True)) == ""
    # LTTng-UST 2.13 never reads it: it registers with root's daemon, of its own ABI.
    assert versions.registration_problem(env, versions.UstLibrary("x", 8, False)) == ""
    assert "lttng-ust-sock-8" in versions.registration_problem(
        {**env, "LTTNG_UST_APP_PATH": str(rundir(tmp_path / "old", 8))},
        versions.UstLibrary("x", 11, True))


def test_under_trace_the_runs_daemon_is_the_one_that_counts(tmp_path: Path) -> None:
    daemon = rundir(tmp_path / "run", 11)
    socket = str(daemon / "lttng-ust-sock-11")
    assert versions.run_daemon_problem(socket, versions.UstLibrary("x", 11, True)) == ""
    problem = versions.run_daemon_problem(socket, versions.UstLibrary("/lib/l.so", 8, False))
    assert "LTTng 2.12 or 2.13, registering on lttng-ust-sock-8" in problem
    assert f"the session daemon in {daemon} (LTTng 2.15 or later," in problem


def test_a_client_and_a_daemon_of_other_releases_are_named(tmp_path: Path) -> None:
    env = {"LTTNG_RUNDIR": str(rundir(tmp_path / "run", 11))}
    assert versions.client_problem(("/x/liblttng-ctl.so.0", 16), env) == ""
    problem = versions.client_problem(("/x/liblttng-ctl.so.0", 14), env)
    assert problem.startswith("this liblttng-ctl (/x/liblttng-ctl.so.0, LTTng 2.14) and the "
                              f"session daemon in {tmp_path / 'run'} (LTTng 2.15 or later,")
    # LTTNG_RUNDIR is read from 2.14 on: 2.13's client goes to root's daemon, or the user's.
    home = rundir(tmp_path / "home" / ".lttng", 8)
    assert versions.client_rundir(13, {**env, "HOME": str(home.parent)}) in (
        versions.SYSTEM_RUNDIR, home)
    assert versions.client_problem(("x", 16), {"LTTNG_RUNDIR": str(tmp_path / "none")}) == ""


def test_an_exact_daemon_version_is_compared_with_the_clients_release(tmp_path: Path) -> None:
    daemon = versions.Daemon(tmp_path, (8,), "2.13.9", 0)
    assert versions._ctl_speaks(13, daemon) is True
    assert versions._ctl_speaks(16, daemon) is False
    assert versions._ctl_speaks(13, daemon._replace(version="2.12.4")) is True
    assert versions._ctl_speaks(16, daemon._replace(version="2.16.0", abis=(11,))) is True
    assert versions._ctl_speaks(15, daemon._replace(version="2.16.0", abis=(11,))) is False
    assert versions._ctl_speaks(16, daemon._replace(version="", abis=())) is None


def test_the_daemons_exact_version_comes_from_its_program(tmp_path: Path) -> None:
    program = tmp_path / "lttng-sessiond"
    # What `lttng-sessiond --version` prints is a string of its own; glibc's are not.
    program.write_bytes(b"\x7fELF\0GLIBC_2.38\0libc.so.6\0x2.4.1 \0" b"2.16.0\0--help\0")
    assert versions.sessiond_version(str(program)) == "2.16.0"
    program.write_bytes(b"\x7fELF\0GLIBC_2.34\0")
    assert versions.sessiond_version(str(program)) == ""
    assert versions.sessiond_version(str(tmp_path / "gone")) == ""
    daemon = versions.Daemon(tmp_path, (11,), "2.16.0", 42)
    assert daemon.describe() == f"the session daemon in {tmp_path} (LTTng 2.16.0, pid 42, " \
        "lttng-ust-sock-11)"


def test_the_registration_socket_of_the_daemon_trace_talks_to(tmp_path: Path) -> None:
    daemon = rundir(tmp_path / "run", 11)
    assert versions.daemon_socket(16, {"LTTNG_RUNDIR": str(daemon)}) == \
        str(daemon / "lttng-ust-sock-11")
    assert versions.daemon_socket(16, {"LTTNG_RUNDIR": str(tmp_path / "none")}) == ""
