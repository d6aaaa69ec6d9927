"""``pinsight-python startup-file``: the path of activate.py, to name in PYTHONSTARTUP."""

from __future__ import annotations

import argparse
import os

from ..activation import startup as _startup
from ..exit_status import EXIT_FAILED, EXIT_OK
from ..recording.run import session as run_session

HELP = "print the path of activate.py, the file to name in PYTHONSTARTUP"
PROG = "pinsight-python startup-file"

_EPILOG = """\
examples:
  PYTHONSTARTUP=$(pinsight-python startup-file) python sim.py   # inside an LTTng session
  PYTHONSTARTUP=$(pinsight-python startup-file) python          # an interactive session
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = _EPILOG


def run(args: argparse.Namespace) -> int:
    path = _startup.startup_file()
    if not os.path.isfile(path):
        run_session.error(PROG, f"{path} is missing: reinstall pinsight-python")
        return EXIT_FAILED
    print(path)
    return EXIT_OK
