"""The report commands' command line and progress display, at unit level: usage
errors, paths that are no trace, a corrupt trace (no LTTng needed to make one), the
progress bar. Reports of real traces: tests/unit/test_reader.py (small committed
traces) and tests/integration/test_report*.py (traces recorded there and then).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import List

import pytest

from pinsight_python.reading.analysis import ProgressDisplay
from tests.tracing import cli_process


@pytest.mark.parametrize("command", [["report"], ["flamegraph"], ["export", "-o", "x.json"]])
def test_cli_missing_path(tmp_path: Path, command: List[str]) -> None:
    missing = tmp_path / "no-such-trace"
    proc = cli_process(*command, str(missing), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"pinsight-python {command[0]}: error: {missing}: no such file")
    assert "expected an LTTng trace" in line
    assert not (tmp_path / "x.json").exists()


def test_cli_not_a_trace(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = cli_process("report", str(empty))
    assert proc.returncode == 2
    assert f"{empty}: no CTF trace found" in proc.stderr and "metadata" in proc.stderr
    a_file = tmp_path / "file.txt"
    a_file.write_text("hello")
    proc = cli_process("report", str(a_file))
    assert proc.returncode == 2 and f"{a_file}: not a directory" in proc.stderr


def test_cli_corrupt_trace(tmp_path: Path) -> None:
    bad = tmp_path / "bad" / "ust"
    bad.mkdir(parents=True)
    (bad / "metadata").write_text("this is not CTF metadata\n")
    proc = cli_process("report", str(tmp_path / "bad"))
    assert proc.returncode == 1
    [line] = proc.stderr.splitlines()
    assert f"{tmp_path / 'bad'}: cannot read the trace" in line and str(bad) in line


def test_cli_usage_errors() -> None:
    proc = cli_process("report")
    assert proc.returncode == 2 and "TRACE_DIR" in proc.stderr
    proc = cli_process("report", ".", "--top", "-1")
    assert proc.returncode == 2 and "expected 0 or more" in proc.stderr
    proc = cli_process("--help")
    assert proc.returncode == 0
    for name in ("report", "flamegraph", "export"):
        assert name in proc.stdout


def test_progress_display() -> None:
    stream = io.StringIO()
    display = ProgressDisplay("always", stream, delay=0.0)
    display.update(2_500_000, 150, 100, 200)
    text = stream.getvalue()
    assert "[###############...............]  50%" in text and "2.5M events" in text
    display.close()
    assert stream.getvalue().endswith("\r\x1b[K")
    quiet = io.StringIO()
    auto = ProgressDisplay("auto", quiet, delay=0.0)  # StringIO is not a terminal
    auto.update(1, 1, 0, 2)
    assert quiet.getvalue() == ""


def test_filter_usage_errors() -> None:
    for args in (["--module", "numpy.*"], ["--exclude", ".x"], ["--pid", "x"],
                 ["--thread", "-3"]):
        proc = cli_process("report", ".", *args)
        assert proc.returncode == 2, args
        assert "expected" in proc.stderr
