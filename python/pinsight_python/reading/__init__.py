"""Reading: a recorded trace, read once and rendered.

``analysis`` (one read through the compiled reader, ``_pinsight_reader``, into a
``TraceData``), ``report``, ``flamegraph``, ``export`` and ``summary`` (its renderings),
``native``, ``gil`` and ``resources`` (their sections: native regions, the GIL, imports
and allocations).
Never imports ``recording``: a trace is read wherever it was recorded.
"""
