"""The subcommands of ``pinsight-python``, one module each; :mod:`pinsight_python.cli`
assembles them into the command."""
