"""`pinsight-python unbatch` on the committed batched trace (tests/unit/traces/batched,
scripts/make_unit_traces.py): no LTTng, so scripts/test.sh also runs it under the
sanitizers with the rest of tests/unit. The event-by-event comparison with the
Python conversion it replaced is tests/integration/test_unbatch.py."""

from __future__ import annotations

import io
from contextlib import redirect_stderr
from pathlib import Path
from typing import Tuple

from pinsight_python import cli
from pinsight_python.exit_status import EXIT_FAILED, EXIT_USAGE
from tests.tracing import PROGRAM_CALLS, TRACES, native_calls, program_functions, report_json

BATCHED = TRACES / "batched"


def unbatch(*args: str) -> Tuple[int, str]:
    err = io.StringIO()
    with redirect_stderr(err):
        code = cli.main(["unbatch", "--progress", "never", *args])
    return code, err.getvalue()


def test_unbatched_trace_reads_as_the_batched_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, err = unbatch("-o", str(out), str(BATCHED))
    assert code == 0, err
    assert "(422 events in" in err  # the records, names and process events
    batched, unbatched = (report_json(p, "--top", "0") for p in (BATCHED, out))
    functions = program_functions(unbatched)
    assert {name: f["calls"] for name, f in functions.items()} == PROGRAM_CALLS
    assert native_calls(unbatched) == native_calls(batched)
    assert unbatched["event_counts"] == batched["event_counts"]
    assert unbatched["event_counts"]["function_begin"] == 96
    # No block left to merge, and every record has its name.
    assert not unbatched["missing_events"]
    # One stream per thread: the main thread and two workers.
    assert sorted(p.name for p in out.iterdir()) == ["metadata", "stream", "stream-0", "stream-1"]
    [proc] = unbatched["processes"]
    assert len(proc["threads"]) == 3


def test_output_must_be_absent_or_empty(tmp_path: Path) -> None:
    (tmp_path / "kept").write_text("not a trace")
    code, err = unbatch("-o", str(tmp_path), str(BATCHED))
    assert code == EXIT_USAGE
    assert "exists and is not an empty directory" in err
    assert (tmp_path / "kept").read_text() == "not a trace"
    # An empty directory is written into.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert unbatch("-o", str(empty), str(BATCHED))[0] == 0
    assert (empty / "metadata").is_file()


def test_unreadable_trace_leaves_nothing_behind(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "metadata").write_text("/* CTF 1.8 */\nnot metadata\n")
    out = tmp_path / "out"
    code, err = unbatch("-o", str(out), str(trace))
    assert code == EXIT_FAILED
    assert f"could not rewrite {trace}" in err
    assert not out.exists()
