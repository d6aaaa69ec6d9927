"""The subcommands of ``pinsight-python``: one module each, the CLI glue only.

``cli.py`` assembles them into one parser. What several share lives beside them:
``exit_status`` (the numbers every command exits with), ``recording`` (the LTTng
session's lifecycle, for trace and attach) and ``reading`` (reading a trace back,
for report, flamegraph and export). The work itself is in the package: the views
(``report.py``, ``flamegraph.py``, ``export.py``), ``lttng.py``, ``injection.py``.
"""
