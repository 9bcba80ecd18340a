"""Costs of the two project baselines for a request (used by bench/solver.py and reports)."""

from __future__ import annotations

from broker.solver.baselines.greedy import greedy_cheapest_fit, unshared_nodes
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays
from broker.solver.costs import egress_cost, placement_nodes, storage_cost
from broker.solver.prepare.candidates import prepare
from broker.solver.problem import PlacementProblem


def baseline_costs(problem: PlacementProblem) -> dict[str, float | None]:
    """USD/h of each baseline's placement (None where the baseline finds none)."""
    t = problem.table
    prep = prepare(problem)
    wl = prep.workloads
    arrays = PoolArrays(prep.node_cost, t.vcpus, t.memory_gib, t.gpus, t.max_nodes, t.site_idx, t.cap_idx)
    out: dict[str, float | None] = {}
    greedy = greedy_cheapest_fit(wl, arrays)
    if greedy is None:
        out["cheapest_fit"] = None
    else:
        nodes = unshared_nodes(wl, greedy, vcpus=t.vcpus, mem=t.memory_gib, gpus=t.gpus)
        out["cheapest_fit"] = (
            sum(n * float(t.price[p]) for p, n in nodes.items())
            + storage_cost(problem, wl, greedy)
            + egress_cost(problem, wl, greedy, prep.name_index)
        )
    k8s = kubernetes_filter_score(wl, arrays)
    if k8s is None:
        out["kubernetes"] = None
    else:
        placement, opened = k8s
        # the scheduler's nodes are what it pays for; they always cover the contract's aggregate rule
        shared = placement_nodes(wl, placement, vcpus=t.vcpus, mem=t.memory_gib, gpus=t.gpus)
        nodes = {p: max(opened.get(p, 0), n) for p, n in shared.items()}
        out["kubernetes"] = (
            sum(n * float(t.price[p]) for p, n in nodes.items())
            + storage_cost(problem, wl, placement)
            + egress_cost(problem, wl, placement, prep.name_index)
        )
    return out
