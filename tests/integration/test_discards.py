"""A discard is impossible to miss; the channel's size is the user's to raise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.tracing import CLI, clean_env

TRACE = [*CLI, "trace"]

HOT = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
fib(22)
"""


def test_discards_come_first_in_the_summary_and_every_view_warns(tmp_path: Path) -> None:
    (tmp_path / "hot.py").write_text(HOT)
    out = tmp_path / "t"
    # A deliberately tiny channel: 2 sub-buffers of 4 KiB per CPU.
    run = subprocess.run(
        [*TRACE, "-o", str(out), "--subbuf-size", "4k", "--num-subbuf", "2", "--",
         sys.executable, str(tmp_path / "hot.py")],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=180, check=False,
    )
    assert run.returncode == 0, run.stderr
    summary = [ln.strip() for ln in run.stderr.splitlines() if ln.startswith("  ")]
    assert summary[0].startswith("WARNING: LTTng discarded "), run.stderr
    assert "--num-subbuf" in summary[0]
    for view in (["report", str(out)], ["flamegraph", "--folded", str(out), "-o", "-"],
                 ["export", str(out), "-o", str(tmp_path / "t.json")]):
        proc = subprocess.run([*CLI, *view], capture_output=True, text=True, check=True)
        assert "warning: LTTng discarded" in proc.stderr, (view, proc.stderr)


def test_channel_size_options_are_checked(tmp_path: Path) -> None:
    run = subprocess.run(
        [*TRACE, "--subbuf-size", "3M", "--num-subbuf", "3", "--", sys.executable, "-c", "pass"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60, check=False,
    )
    assert run.returncode == 2
    assert "--subbuf-size '3M': expected a power of two" in run.stderr
    assert "--num-subbuf '3': expected a power of two" in run.stderr
