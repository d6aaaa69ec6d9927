"""Exit statuses of every ``pinsight-python`` subcommand, defined once.

0 success, 1 a failure (LTTng could not be set up, a trace could not be read, an
output not written), 2 bad arguments (including a path that holds no trace), 126/127
a command that cannot run / was not found (the shell's numbers), 128+N ended by
signal N (130: interrupted); ``trace`` otherwise exits with its command's status.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
EXIT_INTERRUPTED = 130  # 128 + SIGINT


def signalled(signo: int) -> int:
    """The status a shell gives a command ended by signal `signo`."""
    return 128 + signo
