"""The recording lifecycle that ``trace`` and ``attach`` share, and the sweep of
abandoned runs.

Both check a new output directory, create and start an LTTng session (starting a
session daemon when none runs; ``trace`` first destroys the sessions of runs whose
processes are all gone), destroy it whatever happened, say where the trace is, and
read it back for a short summary. How each decides what is recorded (a command it
runs, processes it attaches to) and how it waits is theirs: ``run.trace`` and
``commands.attach``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import List

from ...activation.join import say
from ...activation.settings import SettingsError
from .. import lttng

# What setting up a session may raise: lttng's failures, and OSError from a helper
# the daemon check runs.
SETUP_ERRORS = (lttng.LttngError, OSError)
# The summary reads the trace at babeltrace2's decoding speed: measured on 2 cores
# (sympy's core tests, 55 M events), 107 MB/s of full payload, 50 MB/s of compact.
SUMMARY_BYTES_PER_SECOND = 60e6
SUMMARY_NOTE_BYTES = 300e6  # about 5 s: below it, not worth a line


def note(prog: str, message: str) -> None:
    say(f"{prog}: {message}")


def error(prog: str, message: str) -> None:
    for line in message.splitlines() or [""]:
        say(f"{prog}: error: {line}")


def default_output() -> Path:
    """./pinsight-trace-YYYYmmdd-HHMMSS, with a -N suffix if that exists already."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path.cwd() / f"pinsight-trace-{stamp}"
    candidate, n = base, 1
    while candidate.exists():
        candidate = base.with_name(f"{base.name}-{n}")
        n += 1
    return candidate


def check_new_output(option_value: str) -> Path:
    """The -o directory as an absolute path; SettingsError if it holds anything."""
    output = Path(option_value).absolute()
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise SettingsError(
            f"-o {option_value}: exists and is not an empty directory (LTTng would mix "
            "this trace with what is there): choose another"
        )
    return output


class Recording:
    """One LTTng session from its creation to its destruction, and what the user is
    told about it on stderr, as ``prog``."""

    def __init__(self, prog: str, session: lttng.Session) -> None:
        self.prog = prog
        self.session = session
        # An empty directory the user named stays; one LTTng makes goes with discard().
        self.output_existed = session.output is not None and session.output.exists()

    def start(self, sweep_abandoned: bool = False) -> None:
        """Creates and starts the session; raises one of SETUP_ERRORS (then call
        :meth:`abandon`). ``sweep_abandoned``: destroy first the sessions of ``trace``
        runs whose processes are all gone."""
        started_daemon = lttng.ensure_sessiond()
        swept = sweep_abandoned_runs() if sweep_abandoned else []
        self.session.create()
        self.session.start()
        if started_daemon:
            note(self.prog, "started an LTTng session daemon")
        for name in swept:
            note(self.prog, f"destroyed the session {name} of a run whose trace process is gone")

    def abandon(self, cause: BaseException) -> None:
        """After a setup failure: says why, leaves no session behind (the command then
        exits with EXIT_FAILED)."""
        if isinstance(cause, lttng.LttngError):
            error(self.prog, str(cause))
        else:
            error(self.prog, f"cannot set up LTTng: {cause}")
        self.destroy()
        self.discard()

    def destroy(self) -> None:
        """Stops the session (which waits until LTTng has written every buffered event)
        and destroys it; a failure is reported, never raised: we are ending anyway."""
        try:
            self.session.destroy()
        except lttng.LttngError as e:
            error(self.prog, f"stopping the session {self.session.name}: {e}")

    def discard(self, quiet: bool = False) -> None:
        """After a destroy that recorded nothing (no target attached, a flight recorder
        that took no dump): leaves no output directory behind, or the user's empty one
        as it was."""
        output = self.session.output
        if output is None or not output.is_dir():
            return
        try:
            if self.output_existed:
                for entry in output.iterdir():
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
            else:
                shutil.rmtree(output)
        except OSError as e:
            error(self.prog, f"nothing was recorded, but {output} could not be removed: {e}")
            return
        if not quiet:
            what = "emptied" if self.output_existed else "removed"
            note(self.prog, f"nothing was recorded: {output} {what}")

    def tell_written(self, output: Path, ended: str = "") -> None:
        note(self.prog, f"trace written to {output} (LTTng session {self.session.name}, "
             f"now destroyed){ended}")

    def print_summary(self, output: Path) -> None:
        """The summary on stderr, after a note of its cost when it takes seconds; Ctrl-C
        skips it (the trace is complete)."""
        from ...reading.summary import summarize

        size = trace_bytes(output)
        if size >= SUMMARY_NOTE_BYTES:
            note(self.prog, f"reading the {size / 1e6:,.0f} MB trace back for the summary "
                 f"(about {size / SUMMARY_BYTES_PER_SECOND:,.0f} s; Ctrl-C skips it, the trace "
                 "is complete; --no-summary next time)")
        try:
            for line in summarize(output):
                print(f"  {line}", file=sys.stderr)
        except KeyboardInterrupt:
            note(self.prog, "summary interrupted (the trace is complete)")


def trace_bytes(directory: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return total



def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep_abandoned_runs() -> List[str]:
    """Destroy the sessions made here (lttng.unique_session_name: the owner's pid is in
    the name) whose owner process is gone: a ``trace`` run killed together with its
    keeper (a whole cgroup at once). A session whose owner still runs is never touched.
    Returns the names destroyed."""
    swept = []
    for name in lttng.list_sessions():
        owner = lttng.session_name_owner(name, "pinsight-python")
        if owner is None or _alive(owner):
            continue
        lttng.destroy_session(name)
        swept.append(name)
    return swept
