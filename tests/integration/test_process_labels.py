"""Processes are labelled as users know them, in a real trace read back by report."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

from tests.tracing import clean_env, isolated_session, report_json

MODULE = """
import multiprocessing as mp
import sys

def square(x):
    return x * x

if __name__ == "__main__":
    with mp.get_context("spawn").Pool(1) as pool:
        print(pool.map(square, [1, 2, 3]))
"""


def labels_of(trace: Path) -> List[str]:
    return [p["label"] for p in report_json(str(trace))["processes"]]


def test_python_m_and_spawn_workers_are_labelled_as_users_know_them(tmp_path: Path) -> None:
    (tmp_path / "labelled_app.py").write_text(textwrap.dedent(MODULE))
    env = clean_env(PINSIGHT_PYTHON="1", PINSIGHT_TRACE_PYTHON="TRACING",
                    PYTHONPATH=str(tmp_path))
    out = tmp_path / "trace"
    with isolated_session(out) as run_as:
        proc = subprocess.run([sys.executable, "-m", "labelled_app", "--steps", "3"],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120, check=False, preexec_fn=run_as)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[1, 4, 9]\n"
    labels = labels_of(out)
    assert any(label.startswith("python -m labelled_app --steps 3 (pid ") for label in labels), \
        labels
    worker = [label for label in labels if label.startswith("spawn worker of ")]
    assert worker and worker[0].startswith("spawn worker of python -m labelled_app"), labels
    assert not any("--multiprocessing-fork" in label for label in labels), labels
