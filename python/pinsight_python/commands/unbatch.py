"""``pinsight-python unbatch``: a batched trace rewritten as an ordinary per-event
(compact) one, for Trace Compass and other CTF tools (the conversion itself:
``pinsight_python/reading/unbatch_bt2.py``, a babeltrace2 graph run by the interpreter of
babeltrace2's Python bindings)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from ..exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ..reading.analysis import find_trace_dirs
from ..recording.run import session as run_session

HELP = "rewrite a batched trace (payload = batched) as a per-event one for Trace Compass"
PROG = "pinsight-python unbatch"
EXAMPLES = (
    "pinsight-python unbatch -o sim-unbatched sim-trace   # then open sim-unbatched",
)
# The interpreter babeltrace2's Python bindings (python3-bt2) belong to.
BT2_PYTHON = os.environ.get("PINSIGHT_BT2_PYTHON", "/usr/bin/python3")
SCRIPT = Path(__file__).resolve().parent.parent / "reading" / "unbatch_bt2.py"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace_dir", metavar="TRACE",
                        help="the batched trace (a directory holding one CTF trace)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="the directory to write the per-event trace to (must not exist "
                        "or be empty)")


def run(args: argparse.Namespace) -> int:
    dirs = find_trace_dirs(args.trace_dir)  # raises TraceNotFoundError: exit status 2
    if len(dirs) != 1:
        run_session.error(PROG, f"{args.trace_dir} holds {len(dirs)} CTF traces; give one of "
                        + ", ".join(str(d) for d in dirs))
        return EXIT_USAGE
    out = Path(args.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        run_session.error(PROG, f"{out} exists and is not an empty directory")
        return EXIT_USAGE
    proc = subprocess.run([BT2_PYTHON, str(SCRIPT), str(dirs[0]), str(out)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        # The traceback's last line says what went wrong (bt2 missing, an unreadable trace).
        cause = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        run_session.error(PROG, f"could not rewrite {dirs[0]}: {cause} (run by {BT2_PYTHON}, "
                        "which needs babeltrace2's Python bindings, python3-bt2; "
                        "PINSIGHT_BT2_PYTHON names another interpreter)")
        return EXIT_FAILED
    print(f"wrote {out}: {dirs[0]} with its blocks as per-event compact events",
          file=sys.stderr)
    return EXIT_OK
