"""The exit status of every ``pinsight-python`` command, defined once.

``trace`` exits with its command's status instead when the command ran; 126 and
127 are the shell's numbers for a command that cannot run, 128+N its number for
signal N.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # a trace not read, an output not written, LTTng not set up, a target refused
EXIT_USAGE = 2  # bad arguments, settings or configuration; a path that holds no trace
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
EXIT_INTERRUPTED = 130  # 128 + SIGINT


def killed_by(signo: int) -> int:
    """The shell's status for a command that signal ``signo`` ended."""
    return 128 + signo
