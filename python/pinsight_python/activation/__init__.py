"""Activation: what runs inside the traced process.

``api`` (activate(), deactivate(), status()... over the compiled core; the package's
root shows them as ``pinsight_python.activate()``), ``settings`` (every mode, payload,
event, option and variable, resolved once), ``startup`` (the ``.pth`` shim,
``activate.py`` and ``python -m pinsight_python``), ``join`` (a process's end of a
``pinsight-python trace`` run), ``lttng_versions`` (which LTTng a process and its session
daemon are, when no session can record it; trace's checks use it too),
``subinterpreter`` (the API, untraced, inside a sub-interpreter) and ``remote`` (an
attach request's side in the target). Imports
nothing here, and never ``recording`` or ``reading``: the start-up shim reads these
modules before it knows whether tracing is wanted.
"""
