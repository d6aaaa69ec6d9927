"""pinsight-python: trace Python calls and calls into native code into LTTng-UST.

    import pinsight_python
    pinsight_python.activate()

inside an LTTng session (``lttng create``; ``lttng enable-event -u
'python_pinsight_lttng_ust:*'``; ``lttng start``), or without changing the
program: ``pinsight-python trace -- python sim.py``.

This module is the package's face: the public API, defined in
``activation/api.py``, and ``__version__``; nothing else. The API is imported
here, whole, before any of it can be called: a program's signal handler that
switches tracing on or off must never find it half-imported.
"""

from __future__ import annotations

__version__ = "0.1.0"  # the one definition: pyproject.toml reads it

from .activation.api import (
    ActivationError,
    ConfigError,
    activate,
    deactivate,
    dump,
    lexgions,
    reload,
    set_mode,
    status,
)

__all__ = [
    "ActivationError",
    "ConfigError",
    "activate",
    "deactivate",
    "dump",
    "lexgions",
    "reload",
    "set_mode",
    "status",
]
