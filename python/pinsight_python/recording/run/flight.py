"""The flight recorder's dumps, ``trace``'s side (``trace --flight-recorder``).

A flight-recorder run records into an LTTng snapshot session: its channel
overwrites its oldest sub-buffers, in memory (the session daemon's shared
memory: the buffers outlive a process that crashes), and nothing is written
until a dump (``lttng snapshot record``) writes what the buffers hold into
``OUTPUT/dump-N-REASON/``, a complete trace, with ``dump.json`` in it (why,
when, who asked). docs/flight_recorder.md says what a user sees; the processes'
side is src/activation/flight_recorder.h.

The keeper (keeper.py) serves the connections; :class:`Dumps` takes the dumps,
one at a time, on the keeper's thread. Its protocol, lines of text on the
keeper's socket, whose first line names the connection:

- ``PID``: a process joining the run (keeper.py), answered and closed;
- ``recorder PID``: a traced process's recorder thread, kept for the run. The
  process asks ``dump TAG REASON FLAGS DETAIL`` (FLAGS ``flushed`` when it wrote
  its own records and stacks first, else ``-``) and is answered ``dumped TAG N
  WHERE`` or ``failed TAG WHY``; before each dump it is asked ``flush N REASON``
  and answers ``flushed N STATUS`` (the dump_marker's status bits);
- ``last-words PID``: made in advance, used once by a fatal signal's handler or
  the exit (a single ``dump`` request, then a bounded wait for the answer).

Before a dump, every recorder but a requester that flushed itself is asked to
flush, and the dump waits for the answers at most :data:`FLUSH_WAIT` (a process
that does not answer is named in dump.json). Requests that come while a dump is
taken wait for the next; stall requests that come during a stall dump, or
shortly after it, join it (every rank of a hung job stalls at once: one dump).
"""

from __future__ import annotations

import json
import queue
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ...reading.dump_folders import DUMP_FILE, DUMP_PREFIX
from .. import lttng

SCHEMA = "pinsight-python.dump/1"
# How long a dump waits for the processes' flushes (each waits at most 1 s for
# the GIL: src/activation/flight_recorder.cpp).
FLUSH_WAIT = 3.0
# A stall request within this long after a stall dump ended joins it.
STALL_JOIN = 5.0
# Disk is bounded too: a run takes at most this many dumps (each at most SIZE).
MAX_DUMPS = 32
# The command's bad end right after a process's own end dump (a rank's crash,
# then the launcher's failure): one dump, the process's.
END_DUMP_WINDOW = 30.0
# The reasons of a process's end: its dump stands for the command's end too.
END_REASONS = ("exception", "exit-", "signal-")


class Request:
    """A dump asked for: by a process of the run (its connection, pid and tag) or
    by trace itself (SIGUSR2, the command's end: `done` is set once answered)."""

    def __init__(self, reason: str, detail: str = "", pid: int = 0, tag: str = "0",
                 conn: Optional[socket.socket] = None, flushed: bool = False,
                 by: str = "") -> None:
        self.reason = reason
        self.detail = detail
        self.pid = pid
        self.tag = tag
        self.conn = conn
        self.flushed = flushed
        self.by = by
        self.asked_at = time.time()
        self.done = threading.Event()
        self.where: Optional[str] = None
        self.error: Optional[str] = None


class Peer:
    """One kept connection of a traced process."""

    def __init__(self, conn: socket.socket, kind: str, pid: int) -> None:
        self.conn = conn
        self.kind = kind  # "recorder" | "last-words"
        self.pid = pid
        self.pending = b""
        self.argv = _command_line(pid)


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return " ".join(w.decode(errors="replace") for w in f.read().split(b"\0") if w)
    except OSError:
        return ""


def _mpi_rank(pid: int) -> Optional[int]:
    """The MPI rank a launcher gave the process (its environment), else None."""
    from ...activation.api import _mpi_rank_and_size

    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            pairs = (item.partition(b"=") for item in f.read().split(b"\0") if item)
            environ = {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}
    except OSError:
        return None
    rank, _size = _mpi_rank_and_size(environ)
    return rank if rank >= 0 else None


def dump_name(number: int, reason: str) -> str:
    return f"{DUMP_PREFIX}{number}-{reason}"


class Dumps:
    """A run's dumps: the processes' kept connections, the requests, and the
    dumps themselves, taken on the keeper's thread. `note` says one line on
    trace's stderr."""

    def __init__(self, session: lttng.Session, output: Optional[Path], size_bytes: int,
                 note: Callable[[str], None]) -> None:
        self.session = session
        self.output = output  # None: streamed to a relay daemon
        self.size_bytes = size_bytes
        self.note = note
        self.peers: Dict[int, Peer] = {}  # by the connection's descriptor
        self.pending: List[Request] = []
        self.requests: queue.Queue[Request] = queue.Queue()  # from trace's main thread
        self.wake: Callable[[], None] = lambda: None  # set by the keeper
        self.taken: List[Dict[str, Any]] = []
        self.attempts = 0
        self._stall_dump: Optional[Tuple[float, Dict[str, Any]]] = None
        self._told_limit = False

    # ------------------------------------------------------------ connections

    def adopt(self, conn: socket.socket, kind: str, pid: int) -> None:
        """A recorder's or last words' connection, kept for the run."""
        conn.setblocking(False)
        self.peers[conn.fileno()] = Peer(conn, kind, pid)

    def descriptors(self) -> List[int]:
        return list(self.peers)

    def readable(self, fd: int) -> None:
        """Lines from a kept connection: requests, answers."""
        peer = self.peers.get(fd)
        if peer is None:
            return
        for line in self._read_lines(peer):
            self._on_line(peer, line)

    def _read_lines(self, peer: Peer) -> List[str]:
        try:
            chunk = peer.conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            chunk = b""
        if not chunk:
            self._forget(peer)
            return []
        peer.pending += chunk
        *lines, peer.pending = peer.pending.split(b"\n")
        return [ln.decode(errors="replace") for ln in lines]

    def _forget(self, peer: Peer) -> None:
        self.peers.pop(peer.conn.fileno(), None)
        peer.conn.close()

    def _on_line(self, peer: Peer, line: str) -> Optional[Tuple[str, str]]:
        """A request is queued; a flush's answer is returned as (N, STATUS)."""
        words = line.split(" ", 4)
        if words[0] == "dump" and len(words) >= 4:
            detail = words[4] if len(words) > 4 and words[4] != "-" else ""
            self.pending.append(Request(words[2], detail, peer.pid, words[1], peer.conn,
                                        flushed=words[3] == "flushed"))
        elif words[0] == "flushed" and len(words) >= 3:
            return words[1], words[2]
        return None

    # ------------------------------------------------------------ requests

    def request(self, reason: str, detail: str, by: str) -> Request:
        """A dump asked for by trace itself (any thread); wait on its `done`."""
        request = Request(reason, detail, by=by)
        self.requests.put(request)
        self.wake()
        return request

    def on_usr2(self, sender: int) -> None:
        """SIGUSR2 sent to trace (the supervisor's thread)."""
        self.note("SIGUSR2 received: taking a dump of the flight recorder")
        self.request("usr2", "", f"SIGUSR2 from process {sender}")

    def recent_end_dump(self) -> bool:
        """Whether a process of the run dumped its own bad end moments ago."""
        now = time.time()
        return any(d["reason"].startswith(END_REASONS) and d["requested_by"].get("pid")
                   and now - d["unix_time"] < END_DUMP_WINDOW for d in self.taken)

    def run_pending(self) -> None:
        """Takes the dumps asked for so far (keeper's thread)."""
        while True:
            while True:
                try:
                    self.pending.append(self.requests.get_nowait())
                except queue.Empty:
                    break
            if not self.pending:
                return
            first = self.pending.pop(0)
            joined = [first]
            if first.reason == "stall":
                # Every process of a hung job stalls at once: one dump for them all.
                joined += [r for r in self.pending if r.reason == "stall"]
                self.pending = [r for r in self.pending if r.reason != "stall"]
                recent = self._stall_dump
                if recent is not None and time.time() - recent[0] < STALL_JOIN:
                    self._answer(joined, recent[1], None)
                    continue
            self._take(first, joined)

    # ------------------------------------------------------------ a dump

    def _take(self, first: Request, joined: List[Request]) -> None:
        if self.attempts >= MAX_DUMPS:
            why = f"the run took {MAX_DUMPS} dumps, its limit"
            if not self._told_limit:
                self._told_limit = True
                self.note(f"dump not taken ({first.reason}): {why}; no more dumps in this run")
            self._answer(joined, None, why)
            return
        self.attempts += 1
        number = self.attempts
        name = dump_name(number, first.reason)
        started = time.monotonic()
        flushes = self._flush_all(number, first.reason,
                                  {r.pid for r in joined if r.flushed and r.pid})
        try:
            try:
                where = self._record(name)
            finally:
                self._resume_all(number)
        except (lttng.LttngError, OSError) as e:
            self.note(f"dump {number} ({first.reason}) could not be written: {e}")
            self._answer(joined, None, str(e))
            return
        record = self._describe(number, name, where, first, joined, flushes,
                                time.monotonic() - started)
        self.taken.append(record)
        if first.reason == "stall":
            self._stall_dump = (time.time(), record)
        self._answer(joined, record, None)

    def _flush_all(self, number: int, reason: str, flushed: Set[int]) -> Dict[int, str]:
        """Asks every recorder (but those that flushed for this dump themselves) to
        flush, and waits for their answers at most FLUSH_WAIT: pid -> STATUS, or
        "none" when it did not answer in time, "gone" when its process ended."""
        import select

        asked: Dict[int, Peer] = {}
        for fd, peer in list(self.peers.items()):
            if peer.kind != "recorder" or peer.pid in flushed:
                continue
            try:
                peer.conn.sendall(f"flush {number} {reason}\n".encode())
                asked[fd] = peer
            except OSError:
                self._forget(peer)
        answers: Dict[int, str] = {p.pid: "none" for p in asked.values()}
        deadline = time.monotonic() + FLUSH_WAIT
        waiting = dict(asked)
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select(list(waiting), [], [], left)
            for fd in ready:
                peer = waiting[fd]
                lines = self._read_lines(peer)
                if fd not in self.peers:
                    answers[peer.pid] = "gone"
                    waiting.pop(fd)
                    continue
                for line in lines:
                    answer = self._on_line(peer, line)
                    if answer is not None and answer[0] == str(number):
                        answers[peer.pid] = answer[1]
                        waiting.pop(fd, None)
        return answers

    def _resume_all(self, number: int) -> None:
        """Tells every recorder that the snapshot is taken: from its flush until
        now each held its blocks back, which would have overwritten in the ring what
        it wrote for the dump."""
        for peer in list(self.peers.values()):
            if peer.kind != "recorder":
                continue
            try:
                peer.conn.sendall(f"resume {number}\n".encode())
            except OSError:
                self._forget(peer)

    def _record(self, name: str) -> str:
        """The snapshot, as OUTPUT/NAME (written into a hidden folder, then moved:
        a dump folder is whole when it appears); streamed: its name on the relay
        host."""
        if self.output is None:
            self.session.record_snapshot(name)
            return f"{name}-YYYYmmdd-HHMMSS-N under the session's folder on the relay host"
        self.output.mkdir(parents=True, exist_ok=True)
        scratch = self.output / f".{name}.incomplete"
        final = self.output / name
        try:
            scratch.mkdir()
            self.session.record_snapshot(name, scratch)
            written = [d for d in scratch.iterdir() if d.is_dir()]
            if len(written) != 1:
                raise OSError(f"LTTng wrote {len(written)} folders into {scratch}, not one")
            written[0].rename(final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return str(final)

    def _describe(self, number: int, name: str, where: str, first: Request,
                  joined: List[Request], flushes: Dict[int, str], seconds: float
                  ) -> Dict[str, Any]:
        def who(r: Request) -> Dict[str, Any]:
            if not r.pid:
                return {"trace": r.by}
            peer = next((p for p in self.peers.values() if p.pid == r.pid), None)
            return {"pid": r.pid, "argv": peer.argv if peer else _command_line(r.pid),
                    "mpi_rank": _mpi_rank(r.pid)}

        record: Dict[str, Any] = {
            "schema": SCHEMA,
            "dump": number,
            "name": name,
            "reason": first.reason,
            "detail": first.detail or None,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(first.asked_at)),
            "unix_time": first.asked_at,
            "requested_by": who(first),
            "also_requested_by": [who(r) for r in joined[1:]],
            "session": self.session.name,
            "flight_recorder_bytes": self.size_bytes,
            "processes": [
                {"pid": pid, "flush": status} for pid, status in sorted(flushes.items())
            ] + [{"pid": r.pid, "flush": "self"} for r in joined if r.flushed and r.pid],
            "seconds": round(seconds, 3),
            "where": where,
        }
        size = ""
        if self.output is not None:
            folder = Path(where)
            record["bytes"] = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            size = f", {record['bytes'] / (1 << 20):,.1f} MiB"
            (folder / DUMP_FILE).write_text(json.dumps(record, indent=1) + "\n")
        asked = record["requested_by"]
        by = asked.get("trace") or (f"process {asked['pid']}"
                                    + (f" (rank {asked['mpi_rank']})"
                                       if asked.get("mpi_rank") is not None else ""))
        late = [str(p["pid"]) for p in record["processes"] if p["flush"] in ("none",)]
        self.note(f"dump {number} ({first.reason}{': ' + first.detail if first.detail else ''}; "
                  f"asked by {by}) written to {where}{size} in {seconds:.1f} s"
                  + (f"; no flush answer from process(es) {', '.join(late)}" if late else ""))
        return record

    def _answer(self, joined: List[Request], record: Optional[Dict[str, Any]],
                error: Optional[str]) -> None:
        for r in joined:
            if record is not None:
                r.where = record["where"]
                line = f"dumped {r.tag} {record['dump']} {record['where']}\n"
            else:
                r.error = error
                line = f"failed {r.tag} {error}\n"
            if r.conn is not None:
                try:
                    r.conn.sendall(line.encode(errors="replace"))
                except OSError:
                    pass
            r.done.set()

    def close(self) -> None:
        for peer in list(self.peers.values()):
            self._forget(peer)
