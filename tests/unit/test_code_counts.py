"""CodeInfo's counts (src/tracer/code_info.h): a traced begin increments 32-bit words
kept in the code object's hot cache line, carried into high words, so lexgions() and
lexgion_counts still report executions and traces past 2^32 exactly."""

from __future__ import annotations

from pinsight_python import _pinsight_python_testing as testing


def test_counts_carry_past_32_bits() -> None:
    assert testing._code_counts_past_32_bits() == (2**32 + 1, 2**32)
