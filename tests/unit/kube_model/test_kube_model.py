"""The kube-scheduler and cluster-autoscaler rules both Kubernetes baselines and the simulator's
`kube-default` read (broker/kube_model)."""

from __future__ import annotations

import numpy as np
import pytest

from broker.kube_model import (
    ScaleDown,
    by_price,
    cheapest_node_group,
    first_fit_decreasing,
    fits,
    least_allocated,
    select_node,
    utilisation,
)


def test_filter_keeps_nodes_with_room_for_every_resource():
    free = np.array([[4.0, 1.0, 4.0, 2.0], [8.0, 8.0, 1.0, 4.0], [0.0, 0.0, 0.0, 1.0]])
    assert fits(free, np.array([2.0, 4.0, 0.0])).tolist() == [True, False, False, True]
    # a GPU request passes only nodes with a free GPU
    assert fits(free, np.array([1.0, 1.0, 1.0])).tolist() == [False, False, False, True]


def test_filter_admits_a_request_that_exactly_fills_the_node_after_rounding():
    free = np.array([[1.0 - 0.9 - 0.1 + 0.1], [1.0], [0.0]])  # 0.1 left, as sums of requests round it
    assert fits(free, np.array([0.1, 1.0, 0.0])).tolist() == [True]


def test_least_allocated_scores_the_emptiest_node_highest_on_arrays_and_floats():
    cpu_free, mem_free = np.array([1.0, 3.0, 2.0]), np.array([2.0, 6.0, 8.0])
    cap_cpu, cap_mem = np.array([4.0, 4.0, 4.0]), np.array([8.0, 8.0, 8.0])
    score = least_allocated(cpu_free, mem_free, cap_cpu, cap_mem)
    assert score.tolist() == pytest.approx([0.25, 0.75, 0.75])
    # the packer reads one node at a time as floats: the same figure
    assert least_allocated(3.0, 6.0, 4.0, 8.0) == score[1]
    # a node without memory (none in a catalog, possible in a test table) scores that share 0
    odd = least_allocated(np.array([2.0]), np.array([0.0]), np.array([4.0]), np.array([0.0]))
    assert odd.tolist() == [0.25]


def test_select_node_takes_the_first_of_equal_best_scores_and_none_without_a_fit():
    assert select_node(np.array([0.2, 0.75, 0.75])) == 1
    assert select_node(np.array([-np.inf, -np.inf])) == -1
    assert select_node(np.array([])) == -1
    assert select_node(np.array([-np.inf, 0.0])) == 1


def test_price_expander_opens_the_cheapest_group_that_may_take_the_pod():
    price = np.array([0.40, 0.10, 0.20, 0.10])
    order = by_price(price)
    assert order.tolist() == [1, 3, 2, 0]  # ties by position
    full = {1}  # group 1 is at its maximum
    assert cheapest_node_group(order.tolist(), lambda g: g not in full) == 3
    assert cheapest_node_group(order.tolist(), lambda g: False) == -1


def test_estimator_packs_largest_first_onto_as_few_nodes_as_it_can():
    where, bins = first_fit_decreasing(np.array([[3, 1, 0], [1, 1, 0], [2, 1, 0], [5, 1, 0]]), np.array([4.0, 8, 0]))
    assert bins == 2
    assert where[0] == where[1] != where[2]  # 3 + 1 fill a node, 2 opens the second
    assert where[3] == -1  # larger than a node


def test_estimator_keeps_a_workloads_per_node_limit():
    sizes = np.array([[1.0, 1, 0]] * 4)
    where, bins = first_fit_decreasing(sizes, np.array([8.0, 8, 0]), np.array([0, 0, 0, 1]), np.array([2, 2]))
    assert bins == 2
    assert sorted(where[:3].tolist()) == [0, 0, 1]
    assert where[3] == 0


def test_utilisation_is_the_larger_of_cpu_and_memory_shares():
    held = np.array([[1.0, 3.0], [6.0, 1.0], [1.0, 0.0]])
    cap = np.array([[4.0, 4.0], [8.0, 8.0]])
    assert utilisation(held, cap).tolist() == [0.75, 0.75]


def test_scale_down_waits_for_the_unneeded_time_and_after_a_scale_up():
    rules = ScaleDown(utilization=0.5, unneeded_s=600.0, delay_after_add_s=600.0)
    nodes = np.array([0, 1, 2])
    use = np.array([0.2, 0.9, 0.0])
    assert rules.due(nodes, use, 0.0) == []  # unneeded since now
    assert rules.due(nodes, use, 599.0) == []
    assert rules.due(nodes, use, 600.0) == [2, 0]  # least used first
    rules.scaled_up(700.0)
    assert rules.due(nodes, use, 1200.0) == []  # within 10 minutes of the scale-up
    # node 0 got busy: its clock restarts
    assert rules.due(nodes, np.array([0.6, 0.9, 0.0]), 1300.0) == [2]
    assert rules.due(nodes, use, 1400.0) == [2]
    assert rules.due(nodes, use, 1999.0) == [2]
    assert rules.due(nodes, use, 2000.0) == [2, 0]


def test_scale_down_removes_empty_nodes_in_bulk_and_one_busy_node_per_loop():
    rules = ScaleDown()
    drained: list[int] = []
    tried: list[int] = []

    def move_off(node: int) -> bool:
        tried.append(node)
        return node != 3  # node 3's pods fit nowhere else

    rules.remove([1, 3, 2, 4, 5, 6], empty=lambda n: n in {1, 5}, drain=drained.append, move_off=move_off)
    # 1 and 5 are empty; 3 cannot be emptied; 2 is; 4 and 6 wait for the next loop
    assert drained == [1, 2, 5]
    assert tried == [3, 2]
