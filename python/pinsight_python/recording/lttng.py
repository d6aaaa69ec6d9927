"""Drive LTTng: session daemon, sessions, channels, process tracking.

Used by ``pinsight-python trace``, the test suite and the benchmarks. Every
session made here has a unique name, so nobody else's sessions are touched. Each
step is one request to the session daemon through liblttng-ctl
(``_pinsight_control``, src/control): the ``lttng`` command cost a process per step,
about 30 ms to set a session up, and its ``stop`` polls the daemon every 200 ms.

A session writes its trace locally (``Session(output)``) or streams it to an
LTTng relay daemon (``Session(set_url=relayd_url("collector"))``), which writes
it under its own output directory as ``BASE/HOSTNAME/SESSION-YYYYmmdd-HHMMSS``
(:func:`find_relayd_traces`). :class:`RelayDaemon` runs a relay daemon of our
own, e.g. on loopback for tests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from types import ModuleType
from typing import IO, Any, Iterable, List, Optional, Sequence, Tuple

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


def fit_channel(subbuf_bytes: int, num_subbuf: int, cpus: int, budget: int) -> Tuple[int, int]:
    """The largest channel, at most the one asked for, whose sub-buffers on every CPU
    fit the budget: fewer sub-buffers first (down to 2), then smaller ones (down to a
    page). The smallest channel when even that does not fit."""
    while subbuf_bytes * num_subbuf * cpus > budget:
        if num_subbuf > 2:
            num_subbuf //= 2
        elif subbuf_bytes > MIN_SUBBUF_BYTES:
            subbuf_bytes //= 2
        else:
            break
    return subbuf_bytes, num_subbuf


def default_num_subbuf() -> int:
    """Sub-buffers per CPU for ``trace``'s channel. Buffers are per CPU: with fewer
    CPUs each one takes the events of more threads, while the consumer daemon that
    empties them competes with the program for the same CPUs. One full-trace run in
    sixteen discarded events with 8 x 4 MiB on 2 CPUs: twice that below 8 CPUs
    (128 MiB on 2 CPUs, 32 MiB per CPU from 8 on)."""
    return NUM_SUBBUF if (os.cpu_count() or 1) >= 8 else 2 * NUM_SUBBUF
# lttng-relayd's default ports (lttng-create(1), lttng-relayd(8)).
RELAYD_CTRL_PORT = 5342
RELAYD_DATA_PORT = 5343
RELAYD_LIVE_PORT = 5344
RELAYD_SPEC_HELP = "HOST[:CTRL_PORT[:DATA_PORT]]"
_NETWORK_SCHEMES = ("net", "net6", "tcp", "tcp6")


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


# ---------------------------------------------------------------------------- relay daemon

_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?")


def _port(text: str, what: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise ValueError(f"{what} {text!r} is not a port number (1-65535)")
    return int(text)


def _split_bracketed(rest: str) -> Tuple[str, List[str]]:
    """``[IPV6][:CTRL[:DATA]]`` -> ("[IPV6]", the ports' texts)."""
    end = rest.find("]")
    if end < 0:
        raise ValueError("'[' without ']' around the IPv6 address")
    host, ports_text = rest[1:end], rest[end + 1 :]
    if not _IPV6.fullmatch(host) or ":" not in host:
        raise ValueError(f"{host!r} is not an IPv6 address")
    if ports_text and not ports_text.startswith(":"):
        raise ValueError(f"unexpected {ports_text!r} after the address")
    return f"[{host}]", ports_text[1:].split(":") if ports_text else []


def _split_plain(rest: str) -> Tuple[str, List[str]]:
    """``HOST[:CTRL[:DATA]]`` -> (HOST, the ports' texts)."""
    host, *ports = rest.split(":")
    if "::" in rest or (len(ports) > 2 and _IPV6.fullmatch(rest)):
        raise ValueError("an IPv6 address goes in brackets: [ADDRESS]")
    if len(ports) > 2:
        raise ValueError("too many ':' (HOST, then at most a control and a data port)")
    if not _HOSTNAME.fullmatch(host):
        raise ValueError(f"{host!r} is not a host name or address")
    return host, ports


def parse_relayd(spec: str) -> Tuple[str, int, int]:
    """``HOST[:CTRL_PORT[:DATA_PORT]]`` -> (host, control port, data port).

    HOST is a host name, an IPv4 address or an IPv6 address in brackets
    (``[fd00::5]:5342``); the ports default to lttng-relayd's, 5342 and 5343.
    A ``net://`` or ``net6://`` prefix is accepted. Raises ValueError saying
    what is wrong (the caller adds what was expected).
    """
    rest = spec.strip()
    for scheme in ("net://", "net6://"):
        if rest.startswith(scheme):
            rest = rest[len(scheme) :]
            break
    if not rest:
        raise ValueError("no host given")
    host, ports = _split_bracketed(rest) if rest.startswith("[") else _split_plain(rest)
    if len(ports) > 2:
        raise ValueError("too many ports (at most a control and a data port)")
    ctrl = _port(ports[0], "control port") if ports else RELAYD_CTRL_PORT
    data = _port(ports[1], "data port") if len(ports) > 1 else RELAYD_DATA_PORT
    if ctrl == data:
        raise ValueError(f"the control and data ports are both {ctrl}")
    return host, ctrl, data


def relayd_url(
    host: str, ctrl_port: int = RELAYD_CTRL_PORT, data_port: int = RELAYD_DATA_PORT
) -> str:
    """The ``lttng create --set-url`` URL of a relay daemon: ``net://HOST:CTRL:DATA``
    (``net6://[ADDRESS]:CTRL:DATA`` for an IPv6 address)."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in bare:
        return f"net6://[{bare}]:{ctrl_port}:{data_port}"
    return f"net://{host}:{ctrl_port}:{data_port}"


def _url_endpoint(url: str, default_port: int) -> Tuple[str, int]:
    """(host, port) of ``SCHEME://HOST[:PORT...][/TRACEDIR]``; ValueError if unclear."""
    rest = url.split("://", 1)[1].split("/", 1)[0]
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port = rest.partition(":")
    if not host:
        raise ValueError(f"no host in {url!r}")
    return host, _port(port, "port") if port else default_port


def check_relayd_reachable(
    set_url: Optional[str] = None,
    ctrl_url: Optional[str] = None,
    data_url: Optional[str] = None,
    timeout: float = 5.0,
) -> None:
    """Raise LttngError unless a TCP connection to the relay daemon's control and
    data ports succeeds within `timeout` (lttng's own connection attempts have no
    time limit by default, and a failure is reported late and tersely)."""
    import socket  # here: trace imports this module at its start

    endpoints: List[Tuple[str, int]] = []
    try:
        if set_url is not None:
            rest = set_url.split("://", 1)[1].split("/", 1)[0]
            host, ctrl, data = parse_relayd(rest)
            endpoints = [(host.strip("[]"), ctrl), (host.strip("[]"), data)]
        elif ctrl_url is not None and data_url is not None:
            endpoints = [
                _url_endpoint(ctrl_url, RELAYD_CTRL_PORT),
                _url_endpoint(data_url, RELAYD_DATA_PORT),
            ]
    except (ValueError, IndexError):
        return  # a form we do not parse: lttng judges it
    for host, port in endpoints:
        try:
            # A bare connection is harmless to the relay daemon (it just closes it).
            socket.create_connection((host, port), timeout=timeout).close()
        except OSError as e:
            reason = "timed out" if isinstance(e, socket.timeout) else (e.strerror or str(e))
            raise LttngError(
                f"cannot reach the LTTng relay daemon at {host} port {port}: {reason} "
                "(is lttng-relayd running there, listening on that port, and is the port "
                "open in the firewall?)"
            ) from None


def is_network_url(url: str) -> bool:
    """True for a URL that streams to a relay daemon (net://, net6://, tcp://, tcp6://)."""
    return url.split("://", 1)[0] in _NETWORK_SCHEMES and "://" in url


def find_relayd_traces(
    relayd_output: Path, session: str, hostname: Optional[str] = None
) -> List[Path]:
    """The directories where a relay daemon wrote the traces of the sessions named
    `session` (one per host that streamed such a session), oldest first.

    `relayd_output` is the relay daemon's base output directory (its ``--output``,
    default ``~/lttng-traces``). Both of its layouts are searched:
    ``BASE/HOSTNAME/SESSION-YYYYmmdd-HHMMSS`` (the default, ``--group-output-by-host``)
    and ``BASE/SESSION/HOSTNAME-YYYYmmdd-HHMMSS`` (``--group-output-by-session``).
    `hostname` keeps only that host's (the one that ran the session daemon).
    """
    root = Path(relayd_output)
    stamp = r"-\d{8}-\d{6}"
    found: List[Path] = []
    by_host = re.compile(re.escape(session) + stamp)
    if root.is_dir():
        for host_dir in root.iterdir():
            if not host_dir.is_dir() or (hostname is not None and host_dir.name != hostname):
                continue
            found.extend(d for d in host_dir.iterdir() if d.is_dir() and by_host.fullmatch(d.name))
    session_dir = root / session
    if session_dir.is_dir():
        host_pattern = re.escape(hostname) if hostname is not None else r".+"
        by_session = re.compile(host_pattern + stamp)
        found.extend(
            d for d in session_dir.iterdir() if d.is_dir() and by_session.fullmatch(d.name)
        )
    return sorted(found, key=lambda d: (d.name[-15:], str(d)))


def _free_ports(host: str, count: int) -> List[int]:
    """`count` distinct TCP ports free on `host` right now (bound together, then released)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((host.strip("[]"), 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


class RelayDaemon:
    """An ``lttng-relayd`` of our own, run in the foreground as our child.

    It listens on `host` only; a port of 0 means a free port chosen at start
    (other relay daemons, on their own ports, are never disturbed). The traces
    it receives land under `output`. Use as a context manager, or start()/stop().
    """

    def __init__(
        self,
        output: Path,
        host: str = "127.0.0.1",
        ctrl_port: int = 0,
        data_port: int = 0,
        live_port: int = 0,
    ) -> None:
        self.output = Path(output)
        self.host = host
        self.ctrl_port = ctrl_port
        self.data_port = data_port
        self.live_port = live_port
        self.process: Optional[subprocess.Popen[bytes]] = None
        self._log: Optional[IO[bytes]] = None

    @property
    def url(self) -> str:
        """What ``lttng create --set-url`` takes to stream to this daemon."""
        return relayd_url(self.host, self.ctrl_port, self.data_port)

    @property
    def spec(self) -> str:
        """``HOST:CTRL:DATA``, what ``pinsight-python trace --relayd`` takes."""
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"{host}:{self.ctrl_port}:{self.data_port}"

    @property
    def live_url(self) -> str:
        """The LTTng live URL of this daemon (``babeltrace2 --input-format=lttng-live``)."""
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"net://{host}:{self.live_port}"

    def start(self, timeout: float = 10.0) -> RelayDaemon:
        binary = shutil.which("lttng-relayd")
        if binary is None:
            raise LttngError(
                "'lttng-relayd' was not found on PATH: install lttng-tools "
                "(Debian: apt-get install lttng-tools)"
            )
        self.output.mkdir(parents=True, exist_ok=True)
        chosen = (self.ctrl_port, self.data_port, self.live_port)
        # A free port may be taken between our check and the daemon's bind: retry.
        attempts = 5 if 0 in chosen else 1
        for attempt in range(attempts):
            free = iter(_free_ports(self.host, chosen.count(0)))
            self.ctrl_port, self.data_port, self.live_port = (p or next(free) for p in chosen)
            error = self._launch(binary, timeout)
            if error is None:
                return self
            if attempt == attempts - 1:
                self.ctrl_port, self.data_port, self.live_port = chosen
                raise LttngError(error)
        raise AssertionError("unreachable")

    def _launch(self, binary: str, timeout: float) -> Optional[str]:
        """Start the daemon; None once it listens, else why it did not."""
        import socket
        import tempfile

        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        args = [
            binary,
            f"--control-port=tcp://{host}:{self.ctrl_port}",
            f"--data-port=tcp://{host}:{self.data_port}",
            f"--live-port=tcp://{host}:{self.live_port}",
            f"--output={self.output}",
        ]
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        waiting = [self.ctrl_port, self.data_port, self.live_port]
        while waiting:
            if self.process.poll() is not None:
                # It exits (with status 0) when it cannot bind a port.
                detail = self._log_text()
                self._reap()
                return f"{' '.join(args)} exited before listening: {detail or '(no message)'}"
            if time.monotonic() > deadline:
                self.stop()
                return f"{' '.join(args)} did not listen within {timeout:.0f} s"
            try:
                # A bare connection is harmless to the daemon (it just closes it).
                socket.create_connection((self.host.strip("[]"), waiting[0]), timeout=1).close()
                waiting.pop(0)
            except OSError:
                time.sleep(0.02)
        return None

    def _log_text(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").splitlines()
        return "; ".join(ln.strip() for ln in lines if ln.strip())

    def _reap(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        self.process = None

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the daemon (SIGTERM, then SIGKILL) and wait for it."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._reap()

    def __enter__(self) -> RelayDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
    sub-buffers and nothing reaches ``output`` until :meth:`record_snapshot`
    writes the buffers' current content there: hours of events, bounded memory
    and disk.
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
        if snapshot and (self.network or output is None):
            raise ValueError("a snapshot session writes to a local output directory")
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
            check_relayd_reachable(self.set_url, self.ctrl_url, self.data_url)
        if self.ctrl_url is not None:
            _ctl("create_session", self.name, ctrl_url=self.ctrl_url, data_url=self.data_url,
                 trace_format=self.trace_format)
        elif self.set_url:
            _ctl("create_session", self.name, url=self.set_url, trace_format=self.trace_format)
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

    def record_snapshot(self) -> None:
        """Write the snapshot session's buffers under ``output``."""
        if not self.snapshot:
            raise LttngError(f"session {self.name} is not a snapshot session")
        _ctl("record_snapshot", self.name)

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

