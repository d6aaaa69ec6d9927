"""CPython versions, at unit level: which versions the build was verified against
(3.8 to 3.15, with the GIL), and that setup and the README name only those
(tests/core/test_cpython_versions.py checks activate()'s refusal end to end)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pinsight_python import _pinsight_python_testing as testing

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("version", "free_threaded", "refused"),
    [
        ((3, 8, 0), False, False),
        ((3, 11, 7), False, False),
        ((3, 13, 9), False, False),
        ((3, 14, 10), False, False),
        ((3, 15, 2), False, False),
        ((3, 16, 0), False, True),
        ((3, 7, 9), False, True),
        ((3, 13, 0), True, True),
        ((3, 14, 10), True, True),
    ],
)
def test_verified_versions(version, free_threaded: bool, refused: bool) -> None:
    major, minor, micro = version
    hexversion = (major << 24) | (minor << 16) | (micro << 8) | 0xF0
    reason = testing._unverified_cpython(hexversion, free_threaded)
    assert bool(reason) is refused
    if refused:
        shown = f"{major}.{minor}.{micro}{'t' if free_threaded else ''}"
        assert shown in reason and "3.8 to 3.15" in reason


def test_this_interpreter_is_verified() -> None:
    assert testing._unverified_cpython(sys.hexversion, False) == ""


def test_setup_and_readme_name_only_verified_versions() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert re.search(r"find_python 12 13\b", setup), "setup.sh must not pick an unverified CPython"
    readme = (ROOT / "README.md").read_text()
    assert "3.8 to 3.15" in readme
