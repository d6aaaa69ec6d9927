"""Reading: a recorded trace, read once and rendered.

``analysis`` (one read through the compiled reader, ``_pinsight_reader``, into a
``TraceData``), ``report``, ``flamegraph``, ``export`` and ``summary`` (its renderings);
the report's sections, each its JSON and its text: ``native``, ``gil``, ``resources``
(imports and allocations), ``mpi`` (the ranks) and ``rates`` (rate control), over
``totals`` (sums over threads) and ``tables`` (the text's columns).
Never imports ``recording`` or ``activation``: a trace is read wherever it was recorded.
"""
