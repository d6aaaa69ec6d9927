"""Which LTTng a process and its session daemon are, told from what the machine
shows, never by asking the daemon (a client of another version cannot talk to it).

LTTng's programs and libraries work together only within one release family. An
application's LTTng-UST registers with the session daemon on a Unix socket named for
its ABI: ``lttng-ust-sock-8`` from LTTng-UST 2.12 to 2.14, ``lttng-ust-sock-11`` from
2.15 on; an application of one never registers with a daemon of the other, and records
nothing. liblttng-ctl (``trace``'s session control) and the session daemon speak one
protocol per release: across releases, requests fail with words that mislead ("No
session daemon is available", "Fatal error of the session daemon"). Both cases are
said here in one line that names the two versions.

Only failure paths come here (a request that failed, a process no session records):
a started process and a working ``trace`` never read a file for it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import List, Mapping, NamedTuple, Optional, Tuple

# The session daemon's run directory for root (CONFIG_LTTNG_SYSTEM_RUNDIR), and a
# user's under $LTTNG_HOME or $HOME (LTTng's own rules, lttng-ctl and LTTng-UST).
SYSTEM_RUNDIR = Path("/var/run/lttng")
HOME_RUNDIR = ".lttng"
CLIENT_SOCKET = "client-lttng-sessiond"
PID_FILE = "lttng-sessiond.pid"
_UST_SOCKET = re.compile(r"lttng-ust-sock-(\d+)")
# The LTTng releases of each registration socket (LTTNG_UST_ABI_MAJOR_VERSION_OLDEST_COMPATIBLE).
_UST_ABI_RELEASES = {8: "LTTng 2.12 to 2.14", 11: "LTTng 2.15 or later"}
# lttng-sessiond's version, as `lttng-sessiond --version` prints it, is a string of its own.
_VERSION_STRING = re.compile(rb"\x00(2\.\d{1,3}\.\d{1,3}(?:-rc\d+|-pre)?)\x00")
# LTTng 2.14 and later run their daemon where LTTNG_RUNDIR says, and their
# applications register where LTTNG_UST_APP_PATH says.
_RUNDIR_ENV = "LTTNG_RUNDIR"
_APP_PATH_ENV = "LTTNG_UST_APP_PATH"


def ust_abi_release(abi: int) -> str:
    """The LTTng releases whose LTTng-UST registers on ``lttng-ust-sock-ABI``."""
    return _UST_ABI_RELEASES.get(abi, f"LTTng-UST ABI {abi}")


def served_abis(directory: Path) -> List[int]:
    """The registration sockets (their ABI numbers) a session daemon serves in
    `directory`: empty when none runs there."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in map(_UST_SOCKET.fullmatch, names) if m)


class Daemon(NamedTuple):
    """A session daemon as its run directory shows it."""

    rundir: Path
    abis: Tuple[int, ...]  # the registration sockets it serves
    version: str  # "2.16.0" when its program could be read, else ""
    pid: int  # 0 when unknown

    @property
    def release(self) -> str:
        """Its exact version, else its release family (from its registration socket)."""
        if self.version:
            return f"LTTng {self.version}"
        if self.abis:
            return " and ".join(ust_abi_release(abi) for abi in self.abis)
        return "an LTTng of unknown version"

    def describe(self) -> str:
        sockets = ", ".join(f"lttng-ust-sock-{abi}" for abi in self.abis)
        sockets = sockets or "no registration socket"
        pid = f" pid {self.pid}," if self.pid else ""
        return f"the session daemon in {self.rundir} ({self.release},{pid} {sockets})"


def sessiond_version(program: str) -> str:
    """The version an lttng-sessiond program says it is ("2.16.0"), "" when unreadable."""
    try:
        with open(program, "rb") as f:
            found = _VERSION_STRING.search(f.read())
    except OSError:
        return ""
    return found.group(1).decode() if found else ""


def daemon_in(rundir: Path) -> Daemon:
    """What `rundir` shows of the session daemon that runs there: its program's version
    where it can be read (this user's daemon, or any for root)."""
    try:
        pid = int((rundir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        pid = 0
    version = sessiond_version(f"/proc/{pid}/exe") if pid else ""
    return Daemon(rundir, tuple(served_abis(rundir)), version, pid)


def _home(env: Mapping[str, str]) -> Optional[Path]:
    home = env.get("LTTNG_HOME") or env.get("HOME")
    return Path(home) if home else None


# ------------------------------------------------------------------ the application's side


class UstLibrary(NamedTuple):
    """The liblttng-ust this process loaded."""

    path: str
    abi: int  # its registration socket's number (0: not found in it)
    honours_app_path: bool  # LTTNG_UST_APP_PATH (LTTng-UST 2.14 and later)

    @property
    def release(self) -> str:
        if self.abi == 8:
            return "LTTng 2.14" if self.honours_app_path else "LTTng 2.12 or 2.13"
        return ust_abi_release(self.abi)

    @property
    def socket(self) -> str:
        return f"lttng-ust-sock-{self.abi}"


_loaded: List[UstLibrary] = []  # once found: a process loads one liblttng-ust


def loaded_ust_library(maps: str = "/proc/self/maps") -> Optional[UstLibrary]:
    """The liblttng-ust mapped into this process (None before it is loaded): its
    registration socket's name and whether it reads LTTNG_UST_APP_PATH, both strings
    of the library itself."""
    if _loaded and maps == "/proc/self/maps":
        return _loaded[0]
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            paths = [ln.split(None, 5)[-1].strip() for ln in f if "/liblttng-ust.so" in ln]
        if not paths:
            return None
        with open(paths[0], "rb") as lib:
            data = lib.read()
    except OSError:
        return None
    at = data.find(b"lttng-ust-sock-") + len(b"lttng-ust-sock-")
    digits = data[at:at + 4].split(b"\0", 1)[0] if at >= len(b"lttng-ust-sock-") else b""
    library = UstLibrary(paths[0], int(digits) if digits.isdigit() else 0,
                         data.find(_APP_PATH_ENV.encode()) >= 0)
    if maps == "/proc/self/maps":
        _loaded.append(library)
    return library


def registration_dirs(library: UstLibrary, env: Mapping[str, str]) -> List[Path]:
    """Where this LTTng-UST looks for session daemons: LTTNG_UST_APP_PATH alone where it
    reads it and it is set, else the system's (root's) daemon and the user's own."""
    app_path = env.get(_APP_PATH_ENV)
    if library.honours_app_path and app_path:
        return [Path(app_path.split(":", 1)[0])]
    home = _home(env)
    return [SYSTEM_RUNDIR, *([home / HOME_RUNDIR] if home is not None else [])]


def _cannot_register(library: UstLibrary, daemon: Daemon) -> str:
    return (
        f"its LTTng-UST ({library.path}, {library.release}, registering on {library.socket}) "
        f"cannot talk to {daemon.describe()}: they are different LTTng versions; run it with "
        "the liblttng-ust of the daemon's LTTng (LD_LIBRARY_PATH), or under a session daemon "
        "of its own LTTng"
    )


def registration_problem(env: Mapping[str, str] = os.environ,
                         library: Optional[UstLibrary] = None) -> str:
    """Why this process's LTTng-UST registered with no session daemon although one runs
    where it looks: a daemon of another LTTng-UST ABI (one line naming both). "" when a
    daemon of its own ABI serves it, when none runs, or when LTTng-UST is not loaded."""
    # Where any LTTng-UST could look first: no daemon there, nothing to read.
    app_path = env.get(_APP_PATH_ENV)
    anywhere = [*([Path(app_path.split(":", 1)[0])] if app_path else []),
                *registration_dirs(UstLibrary("", 0, False), env)]
    if not any(served_abis(d) for d in anywhere):
        return ""
    library = library or loaded_ust_library()
    if library is None or not library.abi:
        return ""
    others: List[Path] = []
    for directory in registration_dirs(library, env):
        abis = served_abis(directory)
        if library.abi in abis:
            return ""
        if abis:
            others.append(directory)
    return _cannot_register(library, daemon_in(others[0])) if others else ""


def run_daemon_problem(daemon_socket: str, library: Optional[UstLibrary] = None) -> str:
    """Under ``trace``: why this process cannot register with the run's session daemon,
    whose registration socket is `daemon_socket` (a path); "" when it can."""
    library = library or loaded_ust_library()
    found = _UST_SOCKET.fullmatch(os.path.basename(daemon_socket))
    if library is None or not library.abi or found is None or int(found.group(1)) == library.abi:
        return ""
    return _cannot_register(library, daemon_in(Path(os.path.dirname(daemon_socket))))


# --------------------------------------------------------------------- the client's side


def client_rundir(ctl_minor: int, env: Mapping[str, str] = os.environ) -> Optional[Path]:
    """The run directory of the session daemon liblttng-ctl talks to (its own rules:
    LTTNG_RUNDIR from 2.14 on; root's daemon for root and, when it runs, for the
    tracing group; else the user's own)."""
    rundir = env.get(_RUNDIR_ENV)
    if rundir and ctl_minor >= 14:
        return Path(rundir)
    if os.geteuid() == 0:
        return SYSTEM_RUNDIR
    try:
        import grp

        tracing = grp.getgrnam("tracing").gr_gid in os.getgroups()
    except (KeyError, ImportError):
        tracing = False
    if tracing and (SYSTEM_RUNDIR / CLIENT_SOCKET).exists():
        return SYSTEM_RUNDIR
    home = _home(env)
    return home / HOME_RUNDIR if home is not None else None


def ctl_release(minor: int) -> str:
    return f"LTTng 2.{minor}" + (" or earlier" if minor <= 13 else "")


def _ctl_speaks(ctl_minor: int, daemon: Daemon) -> Optional[bool]:
    """Whether liblttng-ctl of that release and this daemon are one LTTng (None: cannot tell)."""
    if daemon.version:
        # ctl_minor 13 stands for 2.13 or earlier: a daemon of 2.12 is its own too.
        return max(int(daemon.version.split(".")[1]), 13) == ctl_minor
    if daemon.abis:  # the release family of its registration socket
        return (max(daemon.abis) >= 11) == (ctl_minor >= 15)
    return None


def client_problem(ctl: Tuple[str, int], env: Mapping[str, str] = os.environ) -> str:
    """Why liblttng-ctl (`ctl`: its path and release, _pinsight_control.ctl_library())
    cannot talk to the session daemon it reaches: one line naming both versions, or
    "" when they are one LTTng (or no daemon runs there)."""
    path, minor = ctl
    rundir = client_rundir(minor, env)
    if rundir is None or not (rundir / CLIENT_SOCKET).exists():
        return ""
    daemon = daemon_in(rundir)
    if _ctl_speaks(minor, daemon) is not False:
        return ""
    return (
        f"this liblttng-ctl ({path}, {ctl_release(minor)}) and {daemon.describe()} are "
        "different LTTng versions, which cannot talk to each other: load the liblttng-ctl "
        "of the daemon's LTTng (LD_LIBRARY_PATH), or stop that daemon and let one of this "
        "LTTng start"
    )


def daemon_socket(ctl_minor: int, env: Mapping[str, str] = os.environ) -> str:
    """The registration socket of the session daemon liblttng-ctl talks to (a path), or
    "" when it cannot be told (several, or none in its run directory)."""
    rundir = client_rundir(ctl_minor, env)
    abis = served_abis(rundir) if rundir is not None else []
    if rundir is None or len(abis) != 1:
        return ""
    return str(rundir / f"lttng-ust-sock-{abis[0]}")

