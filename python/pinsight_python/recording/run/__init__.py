"""One ``pinsight-python trace`` run, a module per concern.

``plan`` (every option, variable and file checked into one frozen Plan), ``session``
(the LTTng session's lifecycle, shared with attach; the sweep of abandoned runs),
``keeper`` (the keeper's end of the protocol whose other end, ``activation/join.py``,
runs in each process of the run; the processes that could not be recorded),
``supervisor`` (signals; the run's processes in /proc) and ``trace`` (the run from
its options to its exit status). Imports nothing here: the watchdog imports ``keeper``
alone.
"""
