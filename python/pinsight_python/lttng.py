"""Drive LTTng's command-line client: session daemon, sessions, channels.

Used by ``pinsight-python trace``, the test suite and the benchmarks. Every
session made here has a unique name, so nobody else's sessions are touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterable, Optional, Sequence

PROVIDER = "python_pinsight_lttng_ust"
CONTEXTS = ("vpid", "vtid", "procname")
# The default UST channel discarded up to 4.6% of events at recursive-fib
# rates on a 2-core machine; 8 sub-buffers of 4 MiB per CPU discarded none.
SUBBUF_SIZE = "4M"
NUM_SUBBUF = 8


class LttngError(RuntimeError):
    """An lttng command failed; the message carries lttng's own words."""


def lttng_binary() -> str:
    path = shutil.which("lttng")
    if path is None:
        raise LttngError(
            "the 'lttng' command was not found on PATH: install lttng-tools "
            "(Debian: apt-get install lttng-tools)"
        )
    return path


def _run(args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [lttng_binary(), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise LttngError(f"lttng {' '.join(args)} failed (exit {proc.returncode}): {detail}")
    return proc


def sessiond_running() -> bool:
    proc = subprocess.run(
        ["pgrep", "-x", "lttng-sessiond"], capture_output=True, text=True, check=False
    )
    return proc.returncode == 0


def ensure_sessiond(timeout: float = 10.0) -> bool:
    """Start a session daemon if none runs. Returns True if one was started."""
    if sessiond_running():
        return False
    binary = shutil.which("lttng-sessiond")
    if binary is None:
        raise LttngError(
            "no LTTng session daemon runs and 'lttng-sessiond' was not found: "
            "install lttng-tools (Debian: apt-get install lttng-tools)"
        )
    proc = subprocess.run(
        [binary, "--daemonize"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise LttngError(
            f"lttng-sessiond --daemonize failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()}"
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _run(["list"], check=False).returncode == 0:
            return True
        time.sleep(0.05)
    raise LttngError(f"lttng-sessiond did not answer within {timeout:.0f} s")


def unique_session_name(prefix: str = "pinsight-python") -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Session:
    """One LTTng tracing session, created on entry and destroyed on exit.

    The trace stays on disk in ``output`` after the session is destroyed.
    """

    def __init__(
        self,
        output: Path,
        name: Optional[str] = None,
        events: Iterable[str] = (f"{PROVIDER}:*",),
        contexts: Iterable[str] = CONTEXTS,
        subbuf_size: str = SUBBUF_SIZE,
        num_subbuf: int = NUM_SUBBUF,
        set_url: Optional[str] = None,
    ) -> None:
        self.output = Path(output)
        self.name = name or unique_session_name()
        self.events = list(events)
        self.contexts = list(contexts)
        self.subbuf_size = subbuf_size
        self.num_subbuf = num_subbuf
        self.set_url = set_url
        self.channel = "pinsight"
        self._created = False
        self._started = False

    def create(self) -> Session:
        ensure_sessiond()
        if self.set_url:
            _run(["create", self.name, f"--set-url={self.set_url}"])
        else:
            _run(["create", self.name, f"--output={self.output}"])
        self._created = True
        try:
            _run(
                [
                    "enable-channel",
                    "--userspace",
                    f"--session={self.name}",
                    f"--subbuf-size={self.subbuf_size}",
                    f"--num-subbuf={self.num_subbuf}",
                    self.channel,
                ]
            )
            for event in self.events:
                _run(
                    [
                        "enable-event",
                        "--userspace",
                        f"--session={self.name}",
                        f"--channel={self.channel}",
                        event,
                    ]
                )
            for ctx in self.contexts:
                _run(
                    [
                        "add-context",
                        "--userspace",
                        f"--session={self.name}",
                        f"--channel={self.channel}",
                        f"--type={ctx}",
                    ]
                )
        except Exception:
            self.destroy()
            raise
        return self

    def start(self) -> None:
        _run(["start", self.name])
        self._started = True

    def stop(self) -> None:
        if self._started:
            # --no-wait would leave buffers unflushed: wait for the data.
            _run(["stop", self.name])
            self._started = False

    def destroy(self) -> None:
        if self._created:
            self.stop()
            # stop has waited until the trace is valid. destroy's own wait never
            # ends when a traced process was killed while writing an event into
            # the per-user buffers (a sub-buffer that never completes).
            _run(["destroy", "--no-wait", self.name], check=False)
            self._created = False

    def __enter__(self) -> Session:
        self.create()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

