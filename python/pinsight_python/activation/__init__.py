"""Activation: what runs inside the traced process.

``settings`` (every mode, payload, event, option and variable, resolved once),
``startup`` (the ``.pth`` shim, ``activate.py`` and ``python -m pinsight_python``),
``subinterpreter`` (the API, untraced, inside a sub-interpreter) and ``remote`` (an
attach request's side in the target). The API itself is the package's root
(``pinsight_python.activate()``). Imports nothing here: the start-up shim reads these
modules before it knows whether tracing is wanted.
"""
