"""The subcommands of ``pinsight-python``: one module each, the CLI glue only.

``cli.py`` assembles them into one parser. What several share lives beside them:
``exit_status`` (the numbers every command exits with), ``recording`` (the LTTng
session's lifecycle, for trace and attach) and ``reading_options`` (reading a trace
back, for report, flamegraph and export). The work itself is in the subpackages:
``activation``, ``recording`` (LTTng, runs, attach's injection) and ``reading`` (the
views).
"""
