"""Running a request inside a Python process that is already running: what
``pinsight-python attach`` and ``detach`` (recording/attach.py) do to switch tracing
on and off there, once ``target.py`` checked the process.

How the code gets in (docs/activation.md, "Attaching to a running process"), by the
way the target's version allows (:func:`mechanism`):

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

The interpreter runs the code on its main thread at its next check between two
bytecodes, GIL held, never inside a C call: it calls
``pinsight_python.activation.remote.run(request)``, which activates or deactivates as the
request file says and writes the outcome beside it.

A main thread blocked in a long C call (``time.sleep(60)``, a blocking read) runs the
code when that call returns: ``attach`` waits ``--timeout`` seconds for the result, then
withdraws the request, and the late code does nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, Optional, Sequence

from ..activation import remote as _remote
from ..activation import settings
from . import elf_symbols
from .native_files import beside_extension
from .target import REMOTE_EXEC, AttachError, Target, alive, inspect

GDB_TIMEOUT = 60.0
INJECTOR_TIMEOUT = 60.0
# Test hooks of the injector (tests/integration/test_attach_safety.py): a stage to
# fail at, and one to pause at (STAGE[:SECONDS]); attach passes them on as arguments.
INJECTOR_TEST_HOOKS = ("PINSIGHT_PYTHON_INJECT_FAIL", "PINSIGHT_PYTHON_INJECT_PAUSE")
INJECTOR = "pinsight-python-inject"
_MARKER = re.compile(r"^PINSIGHT-INJECT rc=(-?\d+) page=(\d+)$", re.M)


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


def checked(pid: int) -> Target:
    """Everything checked before the target is touched (target.inspect), and that a
    way in exists for it (:func:`mechanism`); AttachError says what is wrong."""
    target = inspect(pid)
    mechanism(target)
    return target


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
