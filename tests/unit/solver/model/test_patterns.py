"""Pattern cuts (model/patterns.py): valid for every packing, and as strong as the pattern LP."""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.solver.model.patterns import PatternNodes, maximal_patterns, pattern_bound


def _feasible_patterns(demand: np.ndarray, cap: np.ndarray, upper: np.ndarray) -> list[tuple[int, ...]]:
    ranges = [range(int(u) + 1) for u in upper]
    return [q for q in itertools.product(*ranges) if (np.asarray(q) @ demand <= cap + 1e-9).all() and any(q)]


def _fewest_nodes(demand: np.ndarray, cap: np.ndarray, upper: np.ndarray, counts: tuple[int, ...]) -> int:
    """The optimal packing's node count, by exhaustive search over patterns."""
    patterns = _feasible_patterns(demand, cap, upper)

    @cache
    def fewest(left: tuple[int, ...]) -> int:
        if not any(left):
            return 0
        best = 10**9
        for q in patterns:
            taken = tuple(min(a, b) for a, b in zip(left, q, strict=True))
            if any(taken):
                best = min(best, 1 + fewest(tuple(a - b for a, b in zip(left, taken, strict=True))))
        return best

    return fewest(counts)


shapes = st.lists(
    st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 4.0]), st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0])),
    min_size=2,
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(
    shapes=shapes,
    cap=st.tuples(st.sampled_from([3.5, 3.82, 7.5, 7.82]), st.sampled_from([6.0, 13.05, 30.0])),
    counts=st.lists(st.integers(0, 4), min_size=3, max_size=3),
)
def test_cuts_are_valid_and_bound_every_packing(shapes, cap, counts) -> None:
    demand = np.array([[c, m, 0.0] for c, m in shapes])
    k = len(demand)
    capacity = np.array([cap[0], cap[1], 0.0])
    fits = demand[:, :2] <= capacity[:2]
    if not fits.all():
        return
    per_node = np.floor(np.min(capacity[:2] / demand[:, :2], axis=1) + 1e-9)
    upper = np.minimum(per_node, 4.0)
    x = np.array(counts[:k], dtype=float)
    if not x.any():
        return
    bound = pattern_bound(demand, capacity, upper, x)
    # valid: no pattern of the node earns more than one node
    for q in _feasible_patterns(demand, capacity, upper):
        assert np.asarray(q) @ bound.pi <= 1 + 1e-9
    # a bound on the optimal packing, and the cut's value at x is that bound
    fewest = _fewest_nodes(demand, capacity, upper, tuple(int(v) for v in x))
    assert bound.nodes <= fewest + 1e-9
    assert abs(float(bound.pi @ x) - bound.nodes) <= 1e-9
    # at least the aggregate rule's count
    assert bound.nodes >= (x @ demand[:, :2] / capacity[:2]).max() - 1e-7


def test_two_shapes_that_waste_a_node_need_more_than_their_sum() -> None:
    # a 4-core/32 GiB and 2-core replicas on a 7.5-core node: one of each per node (6 of 7.5
    # cores), or three 2-core ones; the aggregate rule counts 2 * 4 + 2 * 2 = 12 cores as 1.6 nodes
    demand = np.array([[4.0, 32.0, 0.0], [2.0, 4.0, 0.0]])
    cap = np.array([7.5, 62.0, 0.0])
    bound = pattern_bound(demand, cap, np.array([1.0, 3.0]), np.array([2.0, 2.0]))
    assert bound.nodes == 2.0
    assert PatternNodes().need(demand, cap, np.array([1.0, 3.0]), np.array([2.0, 2.0])) == 2


def test_maximal_patterns_leave_no_room_for_another_replica() -> None:
    demand = np.array([[1.0, 2.0, 0.0], [2.0, 8.0, 0.0]])
    limit = np.array([4.0, 16.0, 0.0])
    out = maximal_patterns(demand, limit, np.array([4.0, 2.0]), 1000)
    assert out is not None
    assert {tuple(q) for q in out.tolist()} == {(4.0, 0.0), (2.0, 1.0), (0.0, 2.0)}
    assert maximal_patterns(demand, limit, np.array([4.0, 2.0]), 2) is None  # too many to enumerate


def test_column_generation_agrees_with_enumeration() -> None:
    demand = np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [4.0, 32.0, 0.0], [8.0, 16.0, 0.0]])
    cap = np.array([47.0, 381.0, 0.0])
    upper = np.array([40.0, 20.0, 10.0, 5.0])
    x = np.array([13.0, 7.0, 3.0, 4.0])
    full = pattern_bound(demand, cap, upper, x)
    by_cg = pattern_bound(demand, cap, upper, x, max_patterns=1)
    assert abs(full.nodes - by_cg.nodes) <= 1e-6
