"""CPython versions: tracing starts only on versions whose private structures the
build was verified against (3.8 to 3.15, with the GIL); elsewhere activate()
refuses with one message, the program runs untraced and status() says why."""

from __future__ import annotations

from tests.tracing import Tracer


def test_activate_refuses_on_an_unverified_cpython(tracer: Tracer) -> None:
    # The interpreter reports a version the build was not verified against:
    # activate() must not trace, whatever the layout might be.
    run = tracer.run(
        """
        def work():
            return sum(range(10))
        print(work())
        status = pinsight_python.status()
        print(status["active"], status["refused"])
        pinsight_python.activate()  # again: no second message
        """,
        activate="import sys; sys.hexversion = 0x031000F0; pinsight_python.activate()",
    )
    lines = run.stdout.splitlines()
    assert lines[0] == "45"
    assert lines[1].startswith("False CPython 3.16.0 is not supported")
    messages = [line for line in run.stderr.splitlines() if "pinsight-python" in line]
    assert len(messages) == 1 and "runs untraced" in messages[0], run.stderr
    assert not run.trace.named("function_begin")
    assert not run.trace.named("process_info")
