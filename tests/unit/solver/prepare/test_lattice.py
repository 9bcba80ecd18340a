"""Capacity rounded down to the request's common replica step: exact for every packing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.solver.prepare.lattice import common_step, round_down


@pytest.mark.parametrize(
    ("sizes", "step"),
    [
        ([0.25, 0.5, 1, 2, 16], 0.25),
        ([1, 2, 4], 1.0),
        ([0.5, 1.5], 0.5),
        ([0.1, 0.3], 0.1),
        ([3.14159265], None),  # no exact step: capacity left as it is
        ([], None),
    ],
)
def test_the_common_step_of_replica_sizes(sizes: list[float], step: float | None) -> None:
    got = common_step(sizes)
    assert got == pytest.approx(step) if step is not None else got is None


def test_a_fractional_allocatable_node_is_rounded_to_what_replicas_can_fill() -> None:
    # 3.82 allocatable vCPU: quarter-core replicas fill 3.75 of it at most
    assert round_down(np.array([3.82, 4.0, 7.3]), 0.25).tolist() == [3.75, 4.0, 7.25]
    assert round_down(np.array([3.82]), None).tolist() == [3.82]


@given(
    st.lists(st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0, 3.0]), min_size=1, max_size=6),
    st.floats(min_value=0.5, max_value=16.0),
)
def test_rounding_never_cuts_a_packing_that_fits(sizes: list[float], capacity: float) -> None:
    step = common_step(sizes)
    rounded = float(round_down(np.array([capacity]), step)[0])
    for n in range(1, len(sizes) + 1):
        for subset in itertools.combinations(sizes, n):
            fits = sum(subset) <= capacity + 1e-9
            assert fits == (sum(subset) <= rounded + 1e-9)
