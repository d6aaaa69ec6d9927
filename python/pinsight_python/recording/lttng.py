"""Drive LTTng: session daemon, sessions, channels, process tracking.

Used by ``pinsight-python trace``, the test suite and the benchmarks. Every
session made here has a unique name, so nobody else's sessions are touched. Each
step is one request to the session daemon through liblttng-ctl
(``_pinsight_control``, src/control): the ``lttng`` command cost a process per step,
about 30 ms to set a session up, and its ``stop`` polls the daemon every 200 ms.

A session writes its trace locally (``Session(output)``) or streams it to an
LTTng relay daemon (``Session(set_url=relayd_url("collector"))``), which writes
it under its own output directory: the relay daemon's side is :mod:`relayd`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from .relayd import RelaydError, check_relayd_reachable, find_relayd_traces, is_network_url

PROVIDER = "python_pinsight_lttng_ust"
# PInsight's native domains (libpinsight.so, passlab/pinsight): their LTTng-UST providers.
NATIVE_DOMAINS = {
    "openmp": "ompt_pinsight_lttng_ust",
    "mpi": "pmpi_pinsight_lttng_ust",
    "cuda": "cupti_pinsight_lttng_ust",
}
# What the analyses need, and no more: every context is paid on every event
# (procname alone was 16 bytes of ~106); process_info carries the process name.
CONTEXTS = ("vpid", "vtid")
# The default UST channel discarded up to 4.6% of events at recursive-fib
# rates on a 2-core machine; 8 sub-buffers of 4 MiB per CPU discarded none.
SUBBUF_SIZE = "4M"
NUM_SUBBUF = 8


# What trace's channel may take in memory on one node, every CPU's sub-buffers
# together: per-CPU buffers of 8 x 4 MiB are 4 GiB on a 128-CPU node.
BUFFER_BUDGET = "1G"
MIN_SUBBUF_BYTES = 4096  # LTTng's smallest sub-buffer: a page


def possible_cpus() -> int:
    """The CPUs LTTng-UST makes per-CPU buffers for: every possible CPU
    (/sys/devices/system/cpu/possible, as LTTng-UST reads it), not only those online."""
    try:
        with open("/sys/devices/system/cpu/possible", encoding="ascii") as f:
            text = f.read().strip()
        count = 0
        for part in text.split(","):
            first, _, last = part.partition("-")
            count += int(last or first) - int(first) + 1
        return max(count, 1)
    except (OSError, ValueError):
        return os.cpu_count() or 1


def fit_channel(subbuf_bytes: int, num_subbuf: int, cpus: int, budget: int,
                reader_subbuf: bool = False) -> Tuple[int, int]:
    """The largest channel, at most the one asked for, whose sub-buffers on every CPU
    fit the budget: fewer sub-buffers first (down to 2), then smaller ones (down to a
    page). The smallest channel when even that does not fit. `reader_subbuf`: an
    overwrite channel (a snapshot session's), for which LTTng allocates one more
    sub-buffer per CPU, the reader's."""
    while subbuf_bytes * (num_subbuf + reader_subbuf) * cpus > budget:
        if num_subbuf > 2:
            num_subbuf //= 2
        elif subbuf_bytes > MIN_SUBBUF_BYTES:
            subbuf_bytes //= 2
        else:
            break
    return subbuf_bytes, num_subbuf


# The flight recorder (trace --flight-recorder[=SIZE]): SIZE bounds the memory of
# the whole node, and its default is this. What LTTng allocates for a snapshot
# session, measured in the traced process's mappings: the channel's sub-buffers
# and one more per CPU (an overwrite channel's reader's), and the metadata
# channel (16 KiB here), for which METADATA_BYTES is set apart.
FLIGHT_RECORDER_SIZE = "256M"
METADATA_BYTES = 64 << 10
MIN_STALL_SECONDS = 1.0
# Sub-buffers per CPU the flight recorder prefers: the ring drops a sub-buffer
# at a time, so more of them lose less of the history at each overwrite.
FLIGHT_NUM_SUBBUF = 16


def flight_channel_budget(size: int) -> int:
    """The bytes of SIZE left to the channel's sub-buffers."""
    return max(size - METADATA_BYTES, 0)


def flight_minimum_bytes(cpus: int) -> int:
    """The least SIZE the flight recorder takes on `cpus` possible CPUs."""
    return (2 + 1) * MIN_SUBBUF_BYTES * cpus + METADATA_BYTES


def flight_channel(size: int, cpus: int) -> Tuple[int, int]:
    """(sub-buffer bytes, sub-buffers per CPU) of the flight recorder's channel in
    SIZE bytes: the most history ((count) x bytes) whose memory, the reader's
    sub-buffer included, fits; of equals, the most sub-buffers (up to 16)."""
    per_cpu = flight_channel_budget(size) // max(cpus, 1)
    best = (MIN_SUBBUF_BYTES, 2)
    for count in (FLIGHT_NUM_SUBBUF, 8, 4, 2):
        room = per_cpu // (count + 1)
        if room < MIN_SUBBUF_BYTES:
            continue
        subbuf = 1 << (room.bit_length() - 1)
        if subbuf * count > best[0] * best[1]:
            best = (subbuf, count)
    return best


def default_num_subbuf() -> int:
    """Sub-buffers per CPU for ``trace``'s channel. Buffers are per CPU: with fewer
    CPUs each one takes the events of more threads, while the consumer daemon that
    empties them competes with the program for the same CPUs. One full-trace run in
    sixteen discarded events with 8 x 4 MiB on 2 CPUs: twice that below 8 CPUs
    (128 MiB on 2 CPUs, 32 MiB per CPU from 8 on)."""
    return NUM_SUBBUF if (os.cpu_count() or 1) >= 8 else 2 * NUM_SUBBUF


class LttngError(RuntimeError):
    """An LTTng request failed; the message carries LTTng's own words."""


# How often stop() asks the session daemon whether the consumer has written
# everything: the lttng command asks every 200 ms, most of a short run's cost.
STOP_POLL_US = 1000
# No switch timer on the metadata channel. With one (20 ms), LTTng-tools 2.13's
# consumer fetches new metadata while the program runs, which took its 200 ms
# metadata poll (DEFAULT_METADATA_AVAILABILITY_WAIT_TIME; a wait queue since 2.14.0,
# lttng-tools f40b76aed) out of most runs' ends; but its timer thread then waits in
# that poll while a channel's teardown holds the lock the metadata thread needs and
# waits for the timer thread: the consumer daemon deadlocked (found under the test
# suite's load; every later LTTng request of the user hung).
_SIZE = re.compile(r"(\d+)([kKmMgG]?)")


def size_bytes(text: str) -> int:
    """A size as LTTng's options write it: "4M" -> 4194304; 0 when malformed."""
    m = _SIZE.fullmatch(text)
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(m.group(1)) * scale[m.group(2).lower()] if m else 0


_control_module: Optional[ModuleType] = None


def _control() -> ModuleType:
    """The liblttng-ctl binding, loaded on first use: it is a library of lttng-tools,
    so a machine without LTTng's tools fails here, saying what to install."""
    global _control_module
    if _control_module is None:
        try:
            from .. import _pinsight_control
        except ImportError as e:
            raise LttngError(
                f"cannot load LTTng's control library ({e}): install lttng-tools "
                "(Debian: apt-get install lttng-tools)"
            ) from e
        _control_module = _pinsight_control
    return _control_module


def _ctl(request: str, *args: object, **kwargs: object) -> Any:
    """One request to the session daemon; its failure as LttngError, which names the
    two versions when liblttng-ctl and the daemon are of different LTTng releases
    (their requests then fail with words that mislead)."""
    control = _control()
    try:
        return getattr(control, request)(*args, **kwargs)
    except control.ControlError as e:
        mismatch = version_mismatch()
        raise LttngError(f"{e}: {mismatch}" if mismatch else str(e)) from None


def ctl_library() -> Tuple[str, int]:
    """(path, minor): the liblttng-ctl loaded, and the LTTng 2.x release it is at
    least (13: 2.13 or earlier)."""
    control = _control()
    return control.ctl_library(), control.ctl_release()


def version_mismatch() -> str:
    """"" when liblttng-ctl and the session daemon it reaches are one LTTng release (or
    none runs), else one line naming both (activation/lttng_versions.py)."""
    from ..activation import lttng_versions

    return lttng_versions.client_problem(ctl_library())


# `lttng create --trace-format`. LTTng 2.15 and later write CTF 2 by default, which
# babeltrace2 2.0 (Debian 12) cannot read and Trace Compass does not read reliably yet:
# every session made here asks for CTF 1.8 unless told otherwise.
TRACE_FORMATS = ("ctf-1.8", "ctf-2")
DEFAULT_TRACE_FORMAT = "ctf-1.8"


def trace_formats() -> List[str]:
    """The trace formats this LTTng writes: ctf-1.8, and ctf-2 from LTTng 2.15 on."""
    return list(_ctl("trace_formats"))


def _client_reaches_sessiond() -> bool:
    # The daemon this user's client talks to: root's (or, in the tracing group,
    # the system's), else the user's own ($LTTNG_HOME/.lttng). A daemon of another
    # user running on the machine does not count.
    return bool(_ctl("daemon_alive"))


def ensure_sessiond(timeout: float = 10.0) -> bool:
    """Start a session daemon for this user if the client reaches none. Returns
    True if one was started."""
    if _client_reaches_sessiond():
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
        if _client_reaches_sessiond():
            return True
        time.sleep(0.01)
    raise LttngError(f"lttng-sessiond did not answer within {timeout:.0f} s")


def unique_session_name(prefix: str = "pinsight-python") -> str:
    return f"{prefix}-{os.getpid()}-{os.urandom(4).hex()}"


_UNIQUE_NAME = re.compile(r"(.+)-([0-9]+)-[0-9a-f]{8}")


def session_name_owner(name: str, prefix: Optional[str] = None) -> Optional[int]:
    """The pid in a name unique_session_name made (with `prefix`, or any), else None."""
    made = _UNIQUE_NAME.fullmatch(name)
    if made is None or (prefix is not None and made.group(1) != prefix):
        return None
    return int(made.group(2))


def track_vpids(session: str, pids: Sequence[int]) -> None:
    """Let these processes record into the session (``lttng track --vpid``)."""
    _ctl("track_vpids", session, list(pids))


def destroy_session(name: str) -> None:
    """Stop (waiting for the buffered events) and destroy a session by name; a
    session already gone is not an error."""
    for request in ("stop", "destroy_no_wait"):
        try:
            _ctl(request, name)
        except LttngError:
            pass


def list_sessions() -> List[str]:
    """The names of the sessions the session daemon holds."""
    return list(_ctl("list_sessions"))


class Session:
    """One LTTng tracing session, created on entry and destroyed on exit.

    The trace stays on disk in ``output`` after the session is destroyed.

    Network streaming: with ``set_url="net://HOST[:CTRL[:DATA]]"`` (see
    :func:`relayd_url`), or ``ctrl_url`` and ``data_url`` together, the session
    sends its trace to a relay daemon instead (``output`` is then not used). The
    relay daemon writes it under its base output directory; when that is on this
    host, pass it as ``relayd_output`` and :meth:`trace_dir` finds the trace there.

    ``track_vgid``: record only processes of that group id (``lttng track
    --vgid``); ``track_vpids``: only those processes (``--vpid``); ``track_nobody``:
    none until :func:`track_vpids` lets them in; without any, every traced process
    of the user is recorded.

    ``trace_format``: ``ctf-1.8`` (the default: what Trace Compass and babeltrace2
    2.0 read) or ``ctf-2`` (LTTng 2.15 and later; read by babeltrace2 2.1).

    ``snapshot``: a flight recorder. The channel overwrites its oldest
    sub-buffers and nothing reaches ``output`` (or the relay daemon) until
    :meth:`record_snapshot` writes the buffers' current content there: hours of
    events, bounded memory and disk.
    """

    def __init__(
        self,
        output: Optional[Path] = None,
        name: Optional[str] = None,
        events: Iterable[str] = (f"{PROVIDER}:*",),
        contexts: Iterable[str] = CONTEXTS,
        subbuf_size: str = SUBBUF_SIZE,
        num_subbuf: int = NUM_SUBBUF,
        set_url: Optional[str] = None,
        *,
        ctrl_url: Optional[str] = None,
        data_url: Optional[str] = None,
        relayd_output: Optional[Path] = None,
        track_vgid: Optional[int] = None,
        track_vpids: Sequence[int] = (),
        track_nobody: bool = False,
        snapshot: bool = False,
        read_timer_us: Optional[int] = None,
        trace_format: str = DEFAULT_TRACE_FORMAT,
    ) -> None:
        if (ctrl_url is None) != (data_url is None):
            raise ValueError("ctrl_url and data_url go together")
        if ctrl_url is not None and set_url is not None:
            raise ValueError("set_url, or ctrl_url and data_url, not both")
        if output is None and set_url is None and ctrl_url is None:
            raise ValueError("a Session needs an output directory or a URL")
        self.output = Path(output) if output is not None else None
        self.ctrl_url = ctrl_url
        self.data_url = data_url
        self.relayd_output = Path(relayd_output) if relayd_output is not None else None
        self.name = name or unique_session_name()
        self.events = list(events)
        self.contexts = list(contexts)
        self.subbuf_size = subbuf_size
        self.num_subbuf = num_subbuf
        self.set_url = set_url
        self.channel = "pinsight"
        self.track_vgid = track_vgid
        self.track_vpids = list(track_vpids)
        self.track_nobody = track_nobody
        self.snapshot = snapshot
        # The consumer then reads the buffers on this period only, not when a
        # sub-buffer fills (lttng enable-channel --read-timer).
        self.read_timer_us = read_timer_us
        if trace_format not in TRACE_FORMATS:
            raise ValueError(f"trace format {trace_format!r}: expected one of "
                             f"{', '.join(TRACE_FORMATS)}")
        self.trace_format = trace_format
        self._created = False
        self._started = False

    @property
    def network(self) -> bool:
        """True when the session streams its trace to a relay daemon."""
        return self.ctrl_url is not None or (
            self.set_url is not None and is_network_url(self.set_url)
        )

    def trace_dir(self) -> Path:
        """Where the trace is: ``output`` for a local session; for a network
        session, its directory under ``relayd_output`` (which exists once the
        relay daemon has received the session, i.e. after :meth:`start`)."""
        if not self.network:
            if self.output is None:  # set_url=file://DIR
                assert self.set_url is not None
                return Path(self.set_url[len("file://") :])
            return self.output
        if self.relayd_output is None:
            raise LttngError(
                f"session {self.name} streams to {self.set_url or self.ctrl_url}: its trace "
                "is under that relay daemon's output directory (relayd_output not given)"
            )
        found = find_relayd_traces(self.relayd_output, self.name)
        if len(found) != 1:
            raise LttngError(
                f"expected one directory of session {self.name} under {self.relayd_output}, "
                f"found {len(found)}: {', '.join(map(str, found)) or 'none'}"
            )
        return found[0]

    def create(self) -> Session:
        ensure_sessiond()
        if self.network:
            # The session daemon accepts an unreachable relay daemon at creation and
            # first connects when the channel is enabled, where it may wait for ever
            # on a filtered port.
            try:
                check_relayd_reachable(self.set_url, self.ctrl_url, self.data_url)
            except RelaydError as e:
                raise LttngError(str(e)) from None
        if self.ctrl_url is not None:
            _ctl("create_session", self.name, ctrl_url=self.ctrl_url, data_url=self.data_url,
                 snapshot=self.snapshot, trace_format=self.trace_format)
        elif self.set_url:
            _ctl("create_session", self.name, url=self.set_url, snapshot=self.snapshot,
                 trace_format=self.trace_format)
        else:
            _ctl("create_session", self.name, path=str(self.output.absolute()),  # type: ignore[union-attr]
                 snapshot=self.snapshot, trace_format=self.trace_format)
        self._created = True
        try:
            self._configure()
        except Exception:
            self.destroy()
            raise
        return self

    def _configure(self) -> None:
        """The created session's channel, events, process tracking and contexts."""
        subbuf_bytes = size_bytes(self.subbuf_size)
        if subbuf_bytes == 0:
            raise LttngError(f"sub-buffer size {self.subbuf_size!r}: expected a size such as 4M")
        _ctl("enable_channel", self.name, self.channel, subbuf_bytes, self.num_subbuf,
             overwrite=self.snapshot, read_timer_us=self.read_timer_us or 0)
        for event in self.events:
            _ctl("enable_event", self.name, self.channel, event)
        if self.track_vgid is not None:
            _ctl("track_vgid", self.name, self.track_vgid)
        if self.track_nobody:
            # Processes are let in one by one (track_vpids): pinsight-python trace.
            _ctl("track_no_process", self.name)
        if self.track_vpids:
            _ctl("track_vpids", self.name, self.track_vpids)
        for ctx in self.contexts:
            _ctl("add_context", self.name, self.channel, ctx)

    def start(self) -> None:
        _ctl("start", self.name)
        self._started = True

    def record_snapshot(self, name: str = "", directory: Optional[Path] = None) -> None:
        """Write the snapshot session's buffers now, into a folder LTTng names
        ``NAME-YYYYmmdd-HHMMSS-N`` (``snapshot-N-...`` without a name) under
        ``directory``, else under the session's own output (its directory, or the
        relay daemon's). Returns once it is all written."""
        if not self.snapshot:
            raise LttngError(f"session {self.name} is not a snapshot session")
        _ctl("record_snapshot", self.name, name=name,
             local_path=str(Path(directory).absolute()) if directory is not None else "")

    def stop(self) -> None:
        if self._started:
            # Returns once the consumer has written every buffered event.
            _ctl("stop", self.name, poll_us=STOP_POLL_US)
            self._started = False

    def destroy(self) -> None:
        if self._created:
            self.stop()
            # stop has waited until the trace is valid. destroy's own wait never
            # ends when a traced process was killed while writing an event into
            # the per-user buffers (a sub-buffer that never completes).
            try:
                _ctl("destroy_no_wait", self.name)
            except LttngError:
                pass
            self._created = False

    def __enter__(self) -> Session:
        self.create()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

