"""``pinsight-python unbatch``: a batched trace rewritten as an ordinary per-event
(compact) one, for Trace Compass and other CTF tools. The conversion is the
reader's (``_pinsight_reader.Unbatcher``, src/reader/unbatch.cpp): babeltrace2
reads the blocks, the compact events are written as CTF directly."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from ..exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ..reading.analysis import PROGRESS_MODES, ProgressDisplay, find_trace_dirs, run_with_progress
from ..reading.damage import damaged_files
from ..recording.run import session as run_session

HELP = "rewrite a batched trace (payload = batched) as a per-event one for Trace Compass"
PROG = "pinsight-python unbatch"
EXAMPLES = (
    "pinsight-python unbatch -o sim-unbatched sim-trace   # then open sim-unbatched",
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace_dir", metavar="TRACE",
                        help="the batched trace (a directory holding one CTF trace)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="the directory to write the per-event trace to (must not exist "
                        "or be empty)")
    parser.add_argument("--progress", choices=PROGRESS_MODES, default="auto",
                        help="progress bar on stderr for long conversions: auto (when stderr "
                        "is a terminal), always, never (default: %(default)s)")


def _remove_partial(out: Path, existed: bool) -> None:
    """What an interrupted or failed conversion wrote: a partial trace would read
    as a shorter run."""
    if not out.is_dir():
        return
    if not existed:
        shutil.rmtree(out, ignore_errors=True)
        return
    for entry in out.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def run(args: argparse.Namespace) -> int:
    from .. import _pinsight_reader  # compiled; imported late so `--help` never needs it

    dirs = find_trace_dirs(args.trace_dir)  # raises TraceNotFoundError: exit status 2
    if len(dirs) != 1:
        run_session.error(PROG, f"{args.trace_dir} holds {len(dirs)} CTF traces; give one of "
                        + ", ".join(str(d) for d in dirs))
        return EXIT_USAGE
    out = Path(args.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        run_session.error(PROG, f"{out} exists and is not an empty directory")
        return EXIT_USAGE
    existed = out.exists()
    display = ProgressDisplay(args.progress, label="unbatching")
    started = time.monotonic()
    try:
        unbatcher = _pinsight_reader.Unbatcher(str(dirs[0]), str(out))
        run_with_progress(unbatcher, display)
    except _pinsight_reader.ReaderError as error:
        _remove_partial(out, existed)
        run_session.error(PROG, f"could not rewrite {dirs[0]}: {error}")
        return EXIT_FAILED
    except BaseException:  # Ctrl-C included
        _remove_partial(out, existed)
        raise
    events = unbatcher.progress().events
    wall = time.monotonic() - started
    # The converted trace holds what could be read: say what could not.
    origin = unbatcher.progress().begin_ns
    for damaged in damaged_files(unbatcher.damaged()):
        print(f"{PROG}: warning: trace damaged: {damaged.describe(origin)}", file=sys.stderr)
    print(f"wrote {out}: {dirs[0]} with its blocks as per-event compact events "
          f"({events:,} events in {wall:.1f} s)", file=sys.stderr)
    return EXIT_OK
