"""LTTng's session control through liblttng-ctl (src/control, recording/lttng.py):
failures carry LTTng's own words and say what was expected, a session made here is
the daemon's until destroyed, and a stopped session's trace is complete (issue 36:
no `lttng` process per step, no 200 ms poll on stop)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_stop_returns_with_every_event_written(tmp_path: Path) -> None:
    # The process ends just before the stop: its last events are still in the
    # per-user buffers, and the trace must hold every one once stop() returns.
    out = tmp_path / "t"
    code = ("import time, pinsight_python\n"
            "from pinsight_python import _pinsight_python as core\n"
            "def f(n): return n\n"
            "pinsight_python.activate(payload='full')\n"
            "deadline = time.monotonic() + 60\n"
            "while not core.recording() and time.monotonic() < deadline: time.sleep(0.002)\n"
            "[f(i) for i in range(5000)]\n")
    with lttng.Session(out, track_nobody=True) as session:
        proc = subprocess.Popen([sys.executable, "-c", code], env=clean_env())
        lttng.track_vpids(session.name, [proc.pid])
        assert proc.wait(60) == 0
    trace = read_trace(out)
    assert trace.functions()["f"] == 5000
    assert trace.functions("function_end")["f"] == 5000
    assert trace.discarded == 0


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
