"""A second sys.monitoring tool that does nothing: begins, ends and calls, on
every code object, callbacks returning None. CPython 3.12+ only.

    PYTHONPATH=tests/two_tools_probe python -m test test_pdb test_profile

reproduces, without pinsight-python, the failures test_cpython_suites.py leaves
out on 3.13 (TWO_TOOL_FAILURES): they are CPython's, with any two tools.
"""

import sys

monitoring = sys.monitoring
events = monitoring.events
TOOL = 4
NAMES = ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND")
NAMES += ("CALL", "C_RETURN", "C_RAISE")

monitoring.use_tool_id(TOOL, "two-tools probe")
mask = 0
for name in NAMES:
    monitoring.register_callback(TOOL, getattr(events, name), lambda *args: None)
    mask |= getattr(events, name)
monitoring.set_events(TOOL, mask)
