"""What the baselines' placements cost, in USD/h at the request's prices (the same accounting as
the solver's own answer: nodes x price, storage, egress between sites)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from broker.solver.baselines.greedy import greedy_cheapest_fit, unshared_nodes
from broker.solver.baselines.home import kubernetes_packer
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays
from broker.solver.costs import egress_cost, placement_nodes, storage_cost
from broker.solver.prepare.candidates import Prepared, prepare
from broker.solver.prepare.classes import WorkloadData
from broker.solver.problem import PlacementProblem
from broker.solver.types import Placement


def priced(problem: PlacementProblem, workloads: Sequence[WorkloadData], x: Placement, nodes: dict[int, int]) -> float:
    """USD/h of a placement `x` on `nodes` (pool -> count)."""
    t = problem.table
    name_index = {w.name: i for i, w in enumerate(problem.request.workloads)}
    return (
        sum(n * float(t.price[p]) for p, n in nodes.items())
        + storage_cost(problem, list(workloads), x)
        + egress_cost(problem, list(workloads), x, name_index)
    )


def greedy_cost(problem: PlacementProblem, workloads: Sequence[WorkloadData], x: Placement) -> float:
    """The per-workload greedy pays for nodes of its own per workload (it shares none)."""
    t = problem.table
    return priced(problem, workloads, x, unshared_nodes(workloads, x, vcpus=t.vcpus, mem=t.memory_gib, gpus=t.gpus))


def packer_cost(
    problem: PlacementProblem, workloads: Sequence[WorkloadData], x: Placement, opened: dict[int, int]
) -> float:
    """A scheduler's nodes are what it pays for; they always cover the contract's aggregate rule."""
    t = problem.table
    shared = placement_nodes(workloads, x, vcpus=t.vcpus, mem=t.memory_gib, gpus=t.gpus)
    return priced(problem, workloads, x, {p: max(opened.get(p, 0), n) for p, n in shared.items()})


def usd_arrays(problem: PlacementProblem) -> PoolArrays:
    """The pool arrays with node prices in USD (what an autoscaler's price expander compares)."""
    t = problem.table
    return PoolArrays(t.price, t.vcpus, t.memory_gib, t.gpus, t.max_nodes, t.site_idx, t.cap_idx)


def declared_workloads(problem: PlacementProblem, prep: Prepared) -> list[WorkloadData] | None:
    """The workloads as the user declared them (a request sized from forecasts carries its declared
    form in `problem.declared`); None when the declared request has no candidates."""
    if problem.declared is None:
        return prep.workloads
    declared = prepare(replace(problem, request=problem.declared, declared=None))
    return None if declared.conflicts else declared.workloads


def kubernetes_packer_cost(problem: PlacementProblem, prep: Prepared) -> float | None:
    """USD/h of the home cloud's Kubernetes packer on the declared requests (home.py)."""
    workloads = declared_workloads(problem, prep)
    if workloads is None:
        return None
    site_provider = [str(p) for p in problem.table.site_provider]
    found = kubernetes_packer(workloads, usd_arrays(problem), site_provider)
    return None if found is None else packer_cost(problem, workloads, *found)


def baseline_costs(problem: PlacementProblem) -> dict[str, float | None]:
    """USD/h of each project baseline's placement (None where the baseline finds none): the home
    cloud's packer, the per-workload greedy, and the packer across every allowed pool (the
    search's start)."""
    t = problem.table
    prep = prepare(problem)
    wl = prep.workloads
    arrays = PoolArrays(prep.node_cost, t.vcpus, t.memory_gib, t.gpus, t.max_nodes, t.site_idx, t.cap_idx)
    out: dict[str, float | None] = {"kubernetes_packer": kubernetes_packer_cost(problem, prep)}
    greedy = greedy_cheapest_fit(wl, arrays)
    out["cheapest_fit"] = None if greedy is None else greedy_cost(problem, wl, greedy)
    k8s = kubernetes_filter_score(wl, arrays)
    out["kubernetes"] = None if k8s is None else packer_cost(problem, wl, *k8s)
    return out
