"""The LTTng relay daemon (lttng-relayd), which a session streams its trace to
instead of writing it here: its address as ``trace --relayd`` takes it
(``HOST[:CTRL_PORT[:DATA_PORT]]``, :func:`parse_relayd`), the URL a session is created
with (:func:`relayd_url`), whether it answers (:func:`check_relayd_reachable`), where it
writes a session's trace (``BASE/HOSTNAME/SESSION-YYYYmmdd-HHMMSS``,
:func:`find_relayd_traces`), and :class:`RelayDaemon`, a relay daemon of our own (on
loopback for tests). ``lttng.Session(set_url=relayd_url("collector"))`` streams to one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO, List, Optional, Tuple

# lttng-relayd's default ports (lttng-create(1), lttng-relayd(8)).
RELAYD_CTRL_PORT = 5342
RELAYD_DATA_PORT = 5343
RELAYD_LIVE_PORT = 5344
RELAYD_SPEC_HELP = "HOST[:CTRL_PORT[:DATA_PORT]]"
_NETWORK_SCHEMES = ("net", "net6", "tcp", "tcp6")


class RelaydError(RuntimeError):
    """A relay daemon that cannot be reached or started; the message says why."""


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
    """Raise RelaydError unless a TCP connection to the relay daemon's control and
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
            raise RelaydError(
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
            raise RelaydError(
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
                raise RelaydError(error)
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
