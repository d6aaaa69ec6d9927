"""Running a request inside a Python process that is already running: what
``pinsight-python attach`` and ``detach`` (commands/attach.py, commands/detach.py) do
to switch tracing on and off there.

How the code gets in (docs/activation.md, "Attaching to a running process"):

1. Checks, before anything touches the target: the process exists and is a CPython
   interpreter (3.8 or later, not free-threaded), we may ptrace it (owner, capabilities,
   Yama's ptrace_scope, no other tracer), and its own interpreter, started with its
   environment, working directory and path options, imports pinsight_python.
2. The request's code is queued in the target by the way its version allows:

   - CPython 3.14 and later: ``sys.remote_exec(pid, script)`` (PEP 768), run by an
     interpreter of the target's own version; the target runs the script at its next
     safe point. Nothing of ours touches its registers or memory. A target started with
     remote debugging disabled is refused.
   - CPython 3.8 to 3.13 on x86-64: our injector (src/inject/injector.c) borrows one
     thread at a safe point, maps a page holding the code and has the thread call
     ``Py_AddPendingCall(PyRun_SimpleString, page)`` through a trampoline that puts
     every register back and restarts its system call; it changes no extended register
     state (which Debian 12's gdb cannot write on processors with AMX) and lets the
     thread go before the call, so that a killed attach cannot leave it half-way.
   - Elsewhere (3.8 to 3.13 on another architecture): gdb, which calls ``mmap`` and
     ``Py_AddPendingCall`` in the target.
3. The interpreter runs the code on its main thread at its next check between two
   bytecodes, GIL held, never inside a C call: it calls
   ``pinsight_python.activation.remote.run(request)``, which activates or deactivates as the
   request file says and writes the outcome beside it.

A main thread blocked in a long C call (``time.sleep(60)``, a blocking read) runs the
code when that call returns: ``attach`` waits ``--timeout`` seconds for the result, then
withdraws the request, and the late code does nothing.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..activation import remote as _remote
from ..activation import settings
from ..activation import startup as _startup
from . import elf_symbols
from .native_files import beside_extension

GDB_TIMEOUT = 60.0
INJECTOR_TIMEOUT = 60.0
# Test hooks of the injector (tests/integration/test_attach_safety.py): a stage to
# fail at, and one to pause at (STAGE[:SECONDS]); attach passes them on as arguments.
INJECTOR_TEST_HOOKS = ("PINSIGHT_PYTHON_INJECT_FAIL", "PINSIGHT_PYTHON_INJECT_PAUSE")
PROBE_TIMEOUT = 60.0
OLDEST = (3, 8)
REMOTE_EXEC = (3, 14)  # sys.remote_exec (PEP 768) from here on
INJECTOR = "pinsight-python-inject"
CAP_SYS_PTRACE = 19
_PYTHON_NAME = re.compile(r"python\d*(\.\d+)?[a-z]*$")
_LIBPYTHON = re.compile(r"/libpython(\d+)\.(\d+)[a-z]*\.so[.\d]*$")
_MARKER = re.compile(r"^PINSIGHT-INJECT rc=(-?\d+) page=(\d+)$", re.M)


class AttachError(Exception):
    """A target refused or an injection that failed: one line for the user."""


# ---------------------------------------------------------------------------- checks


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
    mechanism(target)  # what attach needs is there, before anything touches the target


# ---------------------------------------------------------------------------- injection


def injector_path() -> Optional[str]:
    """Our injector, installed beside the extension (x86-64 builds only)."""
    path = str(beside_extension(INJECTOR))
    return path if os.access(path, os.X_OK) else None


def mechanism(target: Target) -> str:
    """How a request gets into this target: "remote_exec", "injector" or "gdb"."""
    if target.version >= REMOTE_EXEC:
        return "remote_exec"
    if injector_path() is not None:
        return "injector"
    if shutil.which("gdb") is None:
        raise AttachError(
            f"process {target.pid} runs CPython {target.version[0]}.{target.version[1]} on "
            f"{os.uname().machine}, where attach needs gdb (Debian: apt-get install gdb); "
            "on x86-64, or with CPython 3.14 and later, it needs nothing more"
        )
    return "gdb"


def gdb_path() -> str:
    path = shutil.which("gdb")
    if path is None:
        raise AttachError("gdb was not found on PATH (Debian: apt-get install gdb)")
    return path


PAGE_PLACEHOLDER = "0x0000000000000000"


def _injected_code(request: str, page: str = PAGE_PLACEHOLDER) -> str:
    # Expression statements only: nothing is bound in __main__, whose namespace this
    # runs in. `page` is where the code itself lies (the injector or gdb fills it in),
    # released by the next request once its trampoline is done with it.
    return (
        f"try:\n __import__('os').path.exists({request!r}) and __import__("
        f"'pinsight_python.activation.remote', fromlist=['run']).run({request!r}, {page})\n"
        "except Exception:\n pass\n"
    )


_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]+")


def gdb_script(code: str) -> str:
    """gdb commands that copy `code` into a fresh page and queue it; the page's own
    address is formatted into the code where it has ``%016lx``."""
    size = len(code % 0) + 1
    # Two levels of C string syntax (eval's format, then the string constant): the
    # code holds no quote or backslash (checked by the caller), only newlines.
    escaped = code.replace("\n", "\\\\n")
    return f"""\
set $page = (long) mmap((void *) 0, (unsigned long) 4096, 3, 34, -1, (long) 0)
if $page != -1 && $page != 0
  eval "set {{char[{size}]}} %lu = \\"{escaped}\\"", $page, $page
  if *(char *) $page == {ord(code[0])}
    set $rc = (int) Py_AddPendingCall((void *) PyRun_SimpleString, (void *) $page)
    printf "PINSIGHT-INJECT rc=%d page=%lu\\n", $rc, $page
  end
end
detach
"""


def inject(target: Target, request: str) -> None:
    """Queue the code that runs _remote.run(request) in the target."""
    if not _SAFE_PATH.fullmatch(request) or len(request) > 1000:
        raise AttachError(f"the request path {request!r} must be plain (letters, digits, ./_+-)")
    how = mechanism(target)
    if how == "remote_exec":
        _remote_exec(target, request)
    elif how == "injector":
        _inject_with_injector(target, request)
    else:
        _inject_with_gdb(target, request)


def _queue_full(target: Target) -> AttachError:
    return AttachError(
        f"process {target.pid}: Py_AddPendingCall refused the call (its queue is full); "
        "nothing else was changed; try again"
    )


def _inject_with_injector(target: Target, request: str) -> None:
    """Our injector, in a session of its own: a signal meant for attach (Ctrl-C, a
    killed job) does not cut it short between two steps; it notices attach's death
    itself and lets the target go at the next step."""
    try:
        addresses, syscall, _ = elf_symbols.resolve(
            target.pid, ("Py_AddPendingCall", "PyRun_SimpleString")
        )
    except (OSError, elf_symbols.ElfError) as e:
        raise AttachError(f"process {target.pid}: cannot find CPython's functions: {e}") from None
    cmd = [
        str(injector_path()),
        str(target.pid),
        f"{addresses['Py_AddPendingCall']:x}",
        f"{addresses['PyRun_SimpleString']:x}",
        f"{syscall:x}",
        _injected_code(request),
        # The injector's test hooks (src/inject/injector.c), which it reads from us.
        *(os.environ.get(hook, "") for hook in INJECTOR_TEST_HOOKS),
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=INJECTOR_TIMEOUT, check=False,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise AttachError(
            f"process {target.pid}: the injector did not finish within {INJECTOR_TIMEOUT:.0f} s"
        ) from None
    lines = proc.stdout.strip().splitlines()
    last = lines[-1] if lines else proc.stderr.strip() or f"exit status {proc.returncode}"
    if proc.returncode != 0 or not last.startswith("ok "):
        reason = last[len("error: ") :] if last.startswith("error: ") else last
        raise AttachError(f"process {target.pid}: could not inject: {reason}")
    fields = dict(field.split("=", 1) for field in last.split()[1:])
    if int(fields.get("rc", "-1")) != 0:
        raise _queue_full(target)


def _remote_exec(target: Target, request: str) -> None:
    """CPython 3.14+: the target's own kind of interpreter asks it to run a script."""
    script = request + ".py"
    with open(script, "w", encoding="utf-8") as f:
        f.write(_injected_code(request, "0"))
    os.chmod(script, 0o644)
    call = f"import sys; sys.remote_exec({target.pid}, {script!r})"
    try:
        proc = subprocess.run(
            [target.executable, "-I", "-S", "-c", call], capture_output=True, text=True,
            timeout=INJECTOR_TIMEOUT, check=False, stdin=subprocess.DEVNULL,
            start_new_session=True, env={settings.ENV_SWITCH: "0"},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        detail = getattr(e, "strerror", None) or "timed out"
        raise AttachError(f"process {target.pid}: sys.remote_exec: {detail}") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise AttachError(
            f"process {target.pid}: sys.remote_exec failed: "
            f"{lines[-1] if lines else proc.returncode}"
        )


def _inject_with_gdb(target: Target, request: str) -> None:
    script = request + ".gdb"
    with open(script, "w", encoding="ascii") as f:
        f.write(gdb_script(_injected_code(request, "0x%016lx")))
    cmd = [
        gdb_path(), "-nx", "-batch", "-q", "--readnever",
        "-iex", "set debuginfod enabled off",
        "-iex", "set auto-load off",
        "-iex", "set auto-solib-add off",
        "-iex", "set pagination off",
        "-iex", "set confirm off",
        "-p", str(target.pid),
        # Only the symbols needed: reading every library's would cost seconds.
        "-ex", "sharedlibrary libc",
        "-ex", "sharedlibrary libpython",
        # A failing command ends the script: nothing after it runs, gdb detaches.
        "-x", script,
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=GDB_TIMEOUT, check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise AttachError(
            f"process {target.pid}: gdb did not finish within {GDB_TIMEOUT:.0f} s"
        ) from None
    m = _MARKER.search(proc.stdout)
    if m is None:
        raise AttachError(f"process {target.pid}: gdb could not inject: {_gdb_reason(proc)}")
    if int(m.group(1)) != 0:
        raise _queue_full(target)


def _gdb_reason(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines()]
    for key in ("ptrace:", "Could not attach", "No symbol", "Cannot access memory", "rror"):
        for line in lines:
            if key in line:
                return line
    return next((ln for ln in reversed(lines) if ln), f"gdb exit status {proc.returncode}")


# ---------------------------------------------------------------------------- requests


class Channel:
    """The directory where requests and results meet (the target may be another user's
    process when we are root: it must be able to read and write there)."""

    def __init__(self, target: Target) -> None:
        self.dir = tempfile.mkdtemp(prefix=f"pinsight-attach-{target.pid}-")
        if os.geteuid() == 0 and target.uid not in (-1, 0):
            os.chown(self.dir, target.uid, target.gid)
        self.count = 0

    def new_request(self, request: Dict[str, Any]) -> str:
        self.count += 1
        path = os.path.join(self.dir, f"request-{self.count}")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(request, f)
        os.chmod(path + ".tmp", 0o644)
        os.replace(path + ".tmp", path)
        return path

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def alive(pid: int) -> bool:
    try:
        return not _status_fields(pid).get("State", "").startswith(("Z", "X"))
    except OSError:
        return False


def _wait_result(target: Target, request: str, timeout: float, prog: str) -> Dict[str, Any]:
    result_path = request + _remote.RESULT_SUFFIX
    deadline = time.monotonic() + timeout
    told = False
    while True:
        if os.path.exists(result_path):
            with open(result_path, encoding="utf-8") as f:
                result: Dict[str, Any] = json.load(f)
            return result
        if not alive(target.pid):
            raise AttachError(f"process {target.pid} exited before it ran the request")
        now = time.monotonic()
        if now >= deadline:
            try:
                os.rename(request, request + ".withdrawn")
            except FileNotFoundError:
                deadline = now + 5.0  # claimed this very moment: the result is coming
                continue
            raise AttachError(
                f"process {target.pid}: its main thread ran no Python code for {timeout:g} s "
                "(it is blocked in a C call, e.g. time.sleep or a read); the request was "
                "withdrawn and the process left as it was; try again, or with a longer --timeout"
            )
        if not told and now + timeout - deadline > 2.0:
            told = True
            print(
                f"{prog}: waiting for process {target.pid}'s main thread to run Python code "
                f"(up to {timeout:g} s)...",
                file=sys.stderr,
            )
        time.sleep(0.05)


def request_action(
    target: Target, channel: Channel, request: Dict[str, Any], timeout: float, prog: str
) -> Dict[str, Any]:
    """Inject one request and wait for its result; AttachError on failure."""
    path = channel.new_request(request)
    inject(target, path)
    result = _wait_result(target, path, timeout, prog)
    if not result.get("ok"):
        raise AttachError(f"process {target.pid}: {result.get('error', 'failed')}")
    return result


def for_each(targets: Sequence[Target], action: Any) -> Dict[int, Any]:
    """Run action(target) for every target at once (one gdb each); AttachError or result."""
    results: Dict[int, Any] = {}

    def one(target: Target) -> None:
        try:
            results[target.pid] = action(target)
        except AttachError as e:
            results[target.pid] = e

    threads = [threading.Thread(target=one, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
