"""The start-up shim as installed (pinsight_python.pth): where it lies, and that its
line, which runs in every interpreter, does nothing when nothing asks for tracing.
Needs the installed package only; what it does when asked is tests/core/test_activation.py's.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from tests.tracing import OWN_VARIABLES


def installed_pth() -> Path:
    """The shim as installed: at the root of this interpreter's site-packages (with
    an editable install too, where the package itself stays in the source tree)."""
    roots = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    found = [Path(r) / "pinsight_python.pth" for r in sorted(roots)]
    found = [p for p in found if p.is_file()]
    assert found, f"pinsight_python.pth is in none of {sorted(roots)}: the wheel must install it"
    return found[0]


def test_pth_is_installed_at_the_site_packages_root() -> None:
    lines = [ln for ln in installed_pth().read_text().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("import os;")


def test_pth_line_does_nothing_when_nothing_asks() -> None:
    """The line runs in every interpreter: when nothing asks, it imports nothing
    and leaves the process as it was. Its cost (about 1 µs, within a 2 ms budget for
    the whole start-up) is bench/bench_startup.py's to measure: no test asserts a
    timing, which a loaded machine could break."""
    pth = installed_pth()
    code = compile(pth.read_text(), str(pth), "exec")
    saved = {k: os.environ.pop(k) for k in OWN_VARIABLES if k in os.environ}
    modules = set(sys.modules)
    try:
        for _ in range(100):
            exec(code, {})
    finally:
        os.environ.update(saved)
    assert set(sys.modules) == modules
