"""A running Python process that ``pinsight-python attach`` and ``detach`` may
reach: everything checked before anything touches it (docs/activation.md,
"Attaching to a running process"). The process exists and is a CPython
interpreter (3.8 or later, not free-threaded), we may ptrace it (owner,
capabilities, Yama's ptrace_scope, no other tracer), and its own interpreter,
started with its environment, working directory and path options, imports
pinsight_python (:func:`inspect`, into a :class:`Target`). How a request then
gets in is ``injection.py``'s.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..activation import settings
from ..activation import startup as _startup

PROBE_TIMEOUT = 60.0
OLDEST = (3, 8)
REMOTE_EXEC = (3, 14)  # sys.remote_exec (PEP 768) from here on
CAP_SYS_PTRACE = 19
_PYTHON_NAME = re.compile(r"python\d*(\.\d+)?[a-z]*$")
_LIBPYTHON = re.compile(r"/libpython(\d+)\.(\d+)[a-z]*\.so[.\d]*$")


class AttachError(Exception):
    """A target refused or an injection that failed: one line for the user."""


@dataclass
class Target:
    pid: int
    executable: str = ""  # the path the target was started as (venvs depend on it)
    environ: Dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    uid: int = -1
    gid: int = -1
    version: Tuple[int, int] = (0, 0)
    package_dir: str = ""


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _status_fields(pid: int) -> Dict[str, str]:
    text = _read(f"/proc/{pid}/status").decode(errors="replace")
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def _has_capability(bit: int) -> bool:
    try:
        return bool(int(_status_fields(os.getpid()).get("CapEff", "0"), 16) >> bit & 1)
    except (OSError, ValueError):
        return False


def _is_descendant(pid: int) -> bool:
    me = os.getpid()
    while pid > 1:
        try:
            pid = int(_status_fields(pid).get("PPid", "0"))
        except (OSError, ValueError):
            return False
        if pid == me:
            return True
    return False


def yama_refusal(pid: int, scope_file: str = "/proc/sys/kernel/yama/ptrace_scope") -> str:
    """Why Yama's ptrace_scope forbids us to attach to pid, or "" (ptrace(2), Yama)."""
    try:
        scope = int(_read(scope_file).strip() or b"0")
    except (OSError, ValueError):
        return ""  # no Yama
    privileged = _has_capability(CAP_SYS_PTRACE)
    if scope == 1 and not privileged and not _is_descendant(pid):
        return (
            "Yama's ptrace_scope is 1 (a process may ptrace only its descendants): run "
            "attach as root, or with CAP_SYS_PTRACE, or set kernel.yama.ptrace_scope=0"
        )
    if scope == 2 and not privileged:
        return "Yama's ptrace_scope is 2 (only root may ptrace): run attach as root"
    if scope >= 3:
        return "Yama's ptrace_scope is 3: ptrace is disabled on this machine until reboot"
    return ""


def _exported(path: str, symbol: bytes) -> bool:
    """Whether the ELF file names the symbol (a dynamic string table holds it)."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return False
            f.seek(0)
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return data.find(b"\0" + symbol + b"\0") >= 0
    except (OSError, ValueError):
        return False


def _check_process(pid: int) -> Tuple[str, Dict[str, str]]:
    """Existence, state, tracer, permission. Returns (/proc/PID/exe, status fields)."""
    if pid == os.getpid():
        raise AttachError(f"{pid} is this attach command itself")
    try:
        status = _status_fields(pid)
    except FileNotFoundError:
        raise AttachError(f"no process {pid} (it has exited, or never existed)") from None
    except OSError as e:
        raise AttachError(f"process {pid}: cannot read /proc/{pid}/status: {e.strerror}") from None
    if status.get("State", "").startswith(("Z", "X")):
        raise AttachError(f"process {pid} has exited (it is a zombie awaiting its parent)")
    tracer = int(status.get("TracerPid", "0") or 0)
    if tracer:
        try:
            name = _read(f"/proc/{tracer}/comm").decode(errors="replace").strip()
        except OSError:
            name = "?"
        raise AttachError(
            f"process {pid} is already traced by process {tracer} ({name}): a process has "
            "one tracer; detach that debugger or tracer first"
        )
    uid = int(status.get("Uid", "-1").split()[0])
    if uid != os.geteuid() and not _has_capability(CAP_SYS_PTRACE):
        raise AttachError(
            f"process {pid} belongs to user id {uid}, not to you ({os.geteuid()}): "
            "ptrace is not permitted; run attach as that user or as root"
        )
    refusal = yama_refusal(pid)
    if refusal:
        raise AttachError(f"process {pid}: {refusal}")
    return _executable(pid), status


def _executable(pid: int) -> str:
    """/proc/PID/exe; AttachError when we may not read it (nor ptrace the process)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except PermissionError:
        raise AttachError(
            f"process {pid}: not permitted to inspect it (/proc/{pid}/exe): ptrace would be "
            "refused too; run attach as the process's user or as root"
        ) from None
    except FileNotFoundError:
        raise AttachError(f"process {pid} has exited, or is a kernel thread") from None


def _libpython(pid: int) -> Optional[Tuple[str, Tuple[int, int]]]:
    try:
        maps = _read(f"/proc/{pid}/maps").decode(errors="replace")
    except OSError:
        return None
    for line in maps.splitlines():
        m = _LIBPYTHON.search(line)
        if m:
            return line.split(None, 5)[-1], (int(m.group(1)), int(m.group(2)))
    return None


def _started_as(pid: int, exe: str, environ: Dict[str, str], cwd: str) -> str:
    """The path the interpreter was started as: CPython finds a venv (pyvenv.cfg) from
    argv[0] as found on PATH, not from the resolved /proc/PID/exe."""
    try:
        argv0 = _read(f"/proc/{pid}/cmdline").split(b"\0")[0].decode(errors="surrogateescape")
    except OSError:
        return exe
    candidates: List[str] = []
    if "/" in argv0:
        candidates.append(os.path.join(cwd, argv0))
    elif argv0:
        candidates += [os.path.join(d or ".", argv0) for d in environ.get("PATH", "").split(":")]
    for candidate in candidates:
        try:
            if os.path.samefile(candidate, exe):
                return candidate
        except OSError:
            continue
    return exe


def _path_options(argv: Sequence[str]) -> Tuple[List[str], str]:
    """The interpreter options that shape sys.path (-I -E -s -S -P) and the directory
    CPython puts first on sys.path for a script."""
    kind, value = _startup.python_target(argv)
    options = []
    for arg in argv[1:]:
        if arg == "--" or not arg.startswith("-") or arg.startswith("--"):
            break
        letters = arg[1:]
        cut = min((letters.index(c) for c in "cmWX" if c in letters), default=len(letters))
        options += [f"-{c}" for c in letters[:cut] if c in "IEsSP"]
        if cut < len(letters):
            break
    return options, (os.path.dirname(value) if kind == "script" else "")


_PROBE = """\
import json, sys, sysconfig
if {script_dir!r} and not (sys.flags.isolated or getattr(sys.flags, "safe_path", False)):
    sys.path.insert(0, {script_dir!r})
info = {{"version": list(sys.version_info[:2]),
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "remote_debug": getattr(sys, "is_remote_debug_enabled", lambda: None)()}}
try:
    import pinsight_python.activation.remote, pinsight_python._pinsight_python
    info["package_dir"] = pinsight_python.__path__[0]
except BaseException as e:
    info["error"] = (type(e).__name__ + ": " + " ".join(str(e).split()))
print(json.dumps(info))
"""


def inspect(pid: int) -> Target:
    """Everything checked before the target is touched; AttachError says what is wrong."""
    exe, status = _check_process(pid)
    lib = _libpython(pid)
    if lib is None and not _exported(exe, b"Py_AddPendingCall"):
        raise AttachError(f"process {pid} ({exe}) is not a Python interpreter")
    if not _PYTHON_NAME.search(os.path.basename(exe)):
        where = f" through {lib[0]}" if lib else ""
        raise AttachError(
            f"process {pid} ({exe}) embeds Python{where}: attach supports processes of the "
            "python interpreter only"
        )
    target = Target(pid)
    target.uid = int(status.get("Uid", "-1").split()[0])
    target.gid = int(status.get("Gid", "-1").split()[0])
    try:
        raw = _read(f"/proc/{pid}/environ")
        target.cwd = os.readlink(f"/proc/{pid}/cwd")
        argv = [a.decode(errors="surrogateescape") for a in _read(f"/proc/{pid}/cmdline")
                .split(b"\0")[:-1]]
    except OSError as e:
        raise AttachError(f"process {pid}: cannot read its environment: {e.strerror}") from None
    for entry in raw.split(b"\0"):
        name, eq, value = entry.decode(errors="surrogateescape").partition("=")
        if eq:
            target.environ[name] = value
    target.executable = _started_as(pid, exe, target.environ, target.cwd)
    _probe(target, argv)
    return target


def check_version(pid: int, version: Tuple[int, int], free_threaded: bool) -> None:
    name = f"CPython {version[0]}.{version[1]}"
    if version < OLDEST:
        raise AttachError(f"process {pid} runs {name}: pinsight-python needs 3.8+")
    if free_threaded:
        raise AttachError(f"process {pid} runs a free-threaded {name}: not supported")


def remote_debug_refusal(argv: Sequence[str], probed: Optional[bool]) -> Optional[str]:
    """Why CPython 3.14+'s sys.remote_exec cannot reach the target, or None. The probe
    ran its interpreter with its environment (PYTHON_DISABLE_REMOTE_DEBUG, the build);
    its -X options are read from its command line."""
    options = list(argv[1:])
    for i, arg in enumerate(options):
        if arg == "--" or not arg.startswith("-"):
            break
        value = arg[2:] or (options[i + 1] if i + 1 < len(options) else "")
        if arg.startswith("-X") and value == "disable_remote_debug":
            return "it was started with -X disable_remote_debug"
    if probed is False:
        return (
            "remote debugging is disabled in it (PYTHON_DISABLE_REMOTE_DEBUG is set, or its "
            "interpreter was built without it)"
        )
    return None


def _as_owner(target: Target) -> Optional[Callable[[], None]]:
    """Root probing another user's process runs that user's interpreter (and its
    site-packages' .pth files): as that user, never as root."""
    if os.geteuid() != 0 or target.uid in (-1, 0):
        return None

    def drop() -> None:
        os.setgroups([])
        os.setgid(target.gid)
        os.setuid(target.uid)

    return drop


def _probe(target: Target, argv: Sequence[str]) -> None:
    """Run the target's own interpreter, as it was started, to see that it imports us."""
    options, script_dir = _path_options(argv)
    if script_dir and not os.path.isabs(script_dir):
        script_dir = os.path.join(target.cwd, script_dir)
    env = dict(target.environ)
    env[settings.ENV_SWITCH] = "0"  # the probe must not trace itself
    cmd = [target.executable, *options, "-c", _PROBE.format(script_dir=script_dir)]
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=target.cwd, capture_output=True, text=True,
            timeout=PROBE_TIMEOUT, check=False, preexec_fn=_as_owner(target),
        )
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        detail = getattr(e, "strerror", None) or (
            proc.stderr.strip().splitlines()[-1:] if "proc" in locals() else ""
        ) or type(e).__name__
        raise AttachError(
            f"process {target.pid}: cannot run its interpreter {target.executable} to check "
            f"it: {detail}"
        ) from None
    target.version = (int(info["version"][0]), int(info["version"][1]))
    check_version(target.pid, target.version, bool(info.get("free_threaded")))
    if target.version >= REMOTE_EXEC:
        refusal = remote_debug_refusal(argv, info.get("remote_debug"))
        if refusal:
            raise AttachError(
                f"process {target.pid} runs CPython {target.version[0]}.{target.version[1]}, "
                f"which attach reaches through sys.remote_exec, but {refusal}; not attached"
            )
    if "error" in info:
        raise AttachError(
            f"process {target.pid}: its interpreter ({target.executable}, CPython "
            f"{target.version[0]}.{target.version[1]}) cannot "
            f"import pinsight_python ({info['error']}): install pinsight-python into the "
            "environment the program runs in; nothing was injected"
        )
    target.package_dir = info["package_dir"]


def alive(pid: int) -> bool:
    try:
        return not _status_fields(pid).get("State", "").startswith(("Z", "X"))
    except OSError:
        return False
