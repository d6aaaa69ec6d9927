"""LTTng's session control through liblttng-ctl (src/control, recording/lttng.py):
failures carry LTTng's own words and say what was expected, a session made here is
the daemon's until destroyed, and a stopped session's trace is complete (issue 36:
no `lttng` process per step, no 200 ms poll on stop); its trace is CTF 1.8 unless CTF 2
is asked for, whatever the LTTng (issue 59: LTTng 2.15 writes CTF 2 by default)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pinsight_python.recording import lttng
from tests.tracing import clean_env, foreign_sessions, read_trace


def test_a_failed_request_says_what_lttng_says(tmp_path: Path) -> None:
    missing = lttng.unique_session_name("pinsight-test-missing")
    with pytest.raises(lttng.LttngError, match=f"starting the session {missing}: .*not found"):
        lttng._ctl("start", missing)
    session = lttng.Session(tmp_path / "t", contexts=("vpid", "no_such_context"))
    with pytest.raises(lttng.LttngError, match="context type 'no_such_context': expected one of "
                       "vpid, vtid, procname"):
        session.create()
    # A failed set-up leaves no session behind.
    assert session.name not in lttng.list_sessions()


def test_a_bad_channel_size_is_refused_before_lttng_sees_it(tmp_path: Path) -> None:
    session = lttng.Session(tmp_path / "t", subbuf_size="4 megabytes")
    with pytest.raises(lttng.LttngError, match="sub-buffer size '4 megabytes': expected"):
        session.create()
    assert session.name not in lttng.list_sessions()


def test_a_session_lives_from_create_to_destroy(tmp_path: Path) -> None:
    session = lttng.Session(tmp_path / "t", track_nobody=True)
    with session:
        assert session.name in lttng.list_sessions()
    assert session.name not in lttng.list_sessions()
    # Destroying it again, as the sweep of abandoned runs may, is not an error.
    lttng.destroy_session(session.name)


def record_calls(out: Path, calls: int, **session_args: Any) -> None:
    """A session writing to `out` (stopped and destroyed on return) in which a process,
    once recorded, called f() `calls` times, then ended at once."""
    code = ("import time, pinsight_python\n"
            "from pinsight_python import _pinsight_python as core\n"
            "def f(n): return n\n"
            "pinsight_python.activate(payload='full')\n"
            "deadline = time.monotonic() + 60\n"
            "while not core.recording() and time.monotonic() < deadline: time.sleep(0.002)\n"
            f"[f(i) for i in range({calls})]\n")
    with lttng.Session(out, track_nobody=True, **session_args) as session:
        proc = subprocess.Popen([sys.executable, "-c", code], env=clean_env())
        lttng.track_vpids(session.name, [proc.pid])
        assert proc.wait(60) == 0


def test_stop_returns_with_every_event_written(tmp_path: Path) -> None:
    # The process ends just before the stop: its last events are still in the
    # per-user buffers, and the trace must hold every one once stop() returns.
    out = tmp_path / "t"
    record_calls(out, 5000)
    trace = read_trace(out)
    assert trace.functions()["f"] == 5000
    assert trace.functions("function_end")["f"] == 5000
    assert trace.discarded == 0


def test_snapshots_named_into_a_folder(tmp_path: Path) -> None:
    # A flight recorder's dumps: each snapshot of the ring where it is asked for,
    # under its name; without a folder, under the session's own output.
    code = ("import time, pinsight_python\n"
            "from pinsight_python import _pinsight_python as core\n"
            "def f(n): return n\n"
            "pinsight_python.activate(payload='batched')\n"
            "deadline = time.monotonic() + 60\n"
            "while not core.recording() and time.monotonic() < deadline: time.sleep(0.002)\n"
            "[f(i) for i in range(5000)]\n")
    session = lttng.Session(tmp_path / "out", track_nobody=True, snapshot=True,
                            subbuf_size="64k", num_subbuf=4)
    with session:
        proc = subprocess.Popen([sys.executable, "-c", code], env=clean_env())
        lttng.track_vpids(session.name, [proc.pid])
        assert proc.wait(60) == 0
        session.record_snapshot("dump-1-test", tmp_path / "dumps")
        session.record_snapshot("dump-2-test")
    (first,) = (tmp_path / "dumps").iterdir()
    (second,) = (tmp_path / "out").iterdir()
    assert first.name.startswith("dump-1-test-") and second.name.startswith("dump-2-test-")
    for folder in (first, second):
        f_calls = [e for e in read_trace(folder).named("event_block")]
        assert f_calls, folder
    plain = lttng.Session(tmp_path / "plain")
    with pytest.raises(lttng.LttngError, match="not a snapshot session"):
        plain.record_snapshot("x")


def test_a_session_not_made_here_is_named_before_the_tests(tmp_path: Path) -> None:
    # A user's own `lttng create` (no pid and tag in its name) would record the
    # tests' traced programs too: conftest names it in a warning.
    name = f"users-own-{lttng.unique_session_name('x').rsplit('-', 1)[1]}"
    ours = lttng.Session(tmp_path / "ours", track_nobody=True)
    subprocess.run(["lttng", "create", name, f"--output={tmp_path / 'theirs'}"], check=True,
                   capture_output=True)
    try:
        with ours:
            foreign = foreign_sessions()
            assert name in foreign
            assert ours.name not in foreign
    finally:
        lttng.destroy_session(name)
    assert name not in foreign_sessions()


def traced_metadata(tmp_path: Path, **session_args: Any) -> bytes:
    """The first bytes of the metadata of a session in which a process traced 10 calls."""
    out = tmp_path / "t"
    record_calls(out, 10, **session_args)
    [metadata] = out.rglob("metadata")
    return metadata.read_bytes()[:16]


def test_sessions_are_ctf_1_8_whatever_lttng_writes_by_default(tmp_path: Path) -> None:
    # LTTng 2.15 and later write CTF 2 (JSON metadata, after a record separator) unless
    # told otherwise; 2.13 writes CTF 1.8 only (its metadata packetized, or plain TSDL).
    start = traced_metadata(tmp_path)
    assert start.startswith((b"/* CTF 1.8", b"\x57\x1d\xd1\x75")), start


def test_ctf_2_where_lttng_writes_it_and_a_clear_refusal_where_it_does_not(
    tmp_path: Path,
) -> None:
    path, minor = lttng.ctl_library()
    if minor >= 15:  # the LTTng 2.16 stage of scripts/test.sh
        assert lttng.trace_formats() == ["ctf-1.8", "ctf-2"]
        assert traced_metadata(tmp_path, trace_format="ctf-2").startswith(b"\x1e{")
        return
    assert lttng.trace_formats() == ["ctf-1.8"]
    session = lttng.Session(tmp_path / "t", trace_format="ctf-2")
    with pytest.raises(lttng.LttngError, match=f"CTF 2 needs LTTng 2.15 or later; this "
                       f"liblttng-ctl \\({path}, LTTng 2.1[34]"):
        session.create()
    assert session.name not in lttng.list_sessions()
