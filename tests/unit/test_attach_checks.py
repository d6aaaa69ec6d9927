"""attach's and detach's checks that need no target: the versions and settings it
refuses, its usage errors. Attaching to real processes: tests/integration/test_attach.py
and test_attach_safety.py.
"""

from __future__ import annotations

import os

import pytest

from pinsight_python.recording import target
from tests.tracing import cli_process


def test_free_threaded_is_refused() -> None:
    # Free-threaded builds cannot be had here.
    with pytest.raises(target.AttachError, match="free-threaded"):
        target.check_version(1, (3, 13), free_threaded=True)


def test_remote_debugging_disabled_is_refused() -> None:
    """3.14+: what stops sys.remote_exec is named before anything touches the target:
    the -X option on its command line, or what its interpreter said in the probe
    (PYTHON_DISABLE_REMOTE_DEBUG in its environment, a build without it)."""
    refusal = target.remote_debug_refusal
    assert refusal(["python3.14", "-X", "disable_remote_debug", "app.py"], True) == (
        "it was started with -X disable_remote_debug"
    )
    assert "-X disable_remote_debug" in str(refusal(["python3", "-Xdisable_remote_debug"], True))
    assert "PYTHON_DISABLE_REMOTE_DEBUG" in str(refusal(["python3.14", "app.py"], False))
    assert refusal(["python3.14", "app.py", "-X", "disable_remote_debug"], True) is None
    assert refusal(["python3.14", "-X", "dev", "app.py"], True) is None


def test_bad_arguments() -> None:
    res = cli_process("attach", "12x")
    assert res.returncode == 2 and "expected a process id" in res.stderr
    res = cli_process("attach", str(os.getpid()), "--duration", "0")
    assert res.returncode == 2 and "--duration" in res.stderr
    res = cli_process("attach", str(os.getpid()), "--mode", "FAST")
    assert res.returncode == 2 and "unknown trace mode" in res.stderr
