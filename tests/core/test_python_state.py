"""The callbacks find the running frame through libpython's thread-state variable
read directly (src/tracer/thread_state.cpp, python_state_slot), not through a call
into libpython on every event: where that path is taken, it must name the very
frame libpython's own call names, on the main thread and on a thread started later.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from tests.tracing import clean_env

PROGRAM = """
import threading, pinsight_python
from pinsight_python import _pinsight_python_testing as t

def probe():
    # The shadow stack's top is this frame, as the PY_START callback found it;
    # _debug_current_frame asks libpython (PyThreadState_GetUnchecked).
    stack = t._debug_stack()
    return t._debug_python_state_direct(), stack[-1][0] == t._debug_current_frame(), stack[-1][1]

pinsight_python.activate(("function",), payload="batched")
results = [probe()]
worker = threading.Thread(target=lambda: results.append(probe()))
worker.start()
worker.join()
pinsight_python.deactivate()
for direct, same, name in results:
    print(direct, same, name)
"""


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring backend only")
def test_frame_through_the_thread_state_variable() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert [(same, name) for _, same, name in rows] == [("True", "probe"), ("True", "probe")]
    # x86-64 Linux: the shared libpython's general-dynamic sequence (pyenv's
    # builds) and the static executable's local-exec load (Debian's) are both
    # recognised; elsewhere the callbacks keep libpython's call.
    expected = "1" if platform.machine() == "x86_64" and sys.platform == "linux" else "0"
    assert [direct for direct, _, _ in rows] == [expected, expected]
