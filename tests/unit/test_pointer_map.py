"""PointerMap (src/tracer/pointer_map.h), the generator table's hash map: open
addressing with backward-shift deletion, checked against std::map over random
operations. Small key spaces keep the table near its load limit, where probe runs
are long and wrap around the slot array's end; large ones make it grow."""

from __future__ import annotations

import pytest

from pinsight_python import _pinsight_python_testing as testing


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("key_space", [64, 70, 300, 5000])
def test_pointer_map_agrees_with_std_map(seed: int, key_space: int) -> None:
    mismatches, largest = testing._pointer_map_check(seed, 20000, key_space)
    assert mismatches == 0
    # Dense enough to matter: two thirds of the keys held at a time, near the 75%
    # load limit of 64 slots (64, 70 keys), or grown well past it.
    assert largest >= min(key_space // 2, 1000)
