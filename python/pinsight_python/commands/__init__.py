"""The subcommands of ``pinsight-python``: one module each, the command line only.

``cli.py`` assembles them into one parser. What several share lives beside them:
``reading_options`` (reading a trace back, for report, flamegraph and export),
``recording_options`` (the trace format, for trace and attach). The
work itself is in the subpackages: ``activation``, ``recording`` (LTTng, a trace run
in ``recording/run``, attach's injection) and ``reading`` (the views); the exit
statuses in ``exit_status.py``, at the package's root.
"""
