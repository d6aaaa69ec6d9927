from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pinsight_python import lttng

from .tracing import PINSIGHT_LIB, Tracer

REQUIRED_TOOLS = (
    "lttng", "lttng-sessiond", "lttng-relayd", "babeltrace2", "gcc", "clang", "mpirun", "setpriv",
)



def pytest_sessionstart(session: pytest.Session) -> None:
    # A missing dependency fails the run loudly; it never turns into skips.
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        raise pytest.UsageError(
            f"missing {', '.join(missing)}: run the README's setup command (scripts/setup.sh)"
        )
    if not Path("/usr/bin/python3").exists():
        raise pytest.UsageError(
            "/usr/bin/python3 (with python3-bt2) is missing: run scripts/setup.sh"
        )
    if not PINSIGHT_LIB.is_file():
        raise pytest.UsageError(
            f"{PINSIGHT_LIB} is missing: run scripts/setup.sh (it builds PInsight's "
            "libpinsight.so from ../shared/pinsight), or set PINSIGHT_LIB"
        )
    lttng.ensure_sessiond()


@pytest.fixture
def tracer(tmp_path: Path) -> Tracer:
    return Tracer(tmp_path)
