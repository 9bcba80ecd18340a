"""The baselines an answer is compared with, named and priced (solve.py reports them).

The headline (`baseline`, which `savings_pct` compares with) is what the user would otherwise
run, and the strictest such comparison: for a re-plan the placement in force, kept as it is;
otherwise a Kubernetes-style packer (kube-scheduler filter and LeastAllocated score, a cluster
autoscaler adding nodes) over every pool the request allows (every allowed site, spot where
tolerated: the search's start). The same packer confined to the home cloud, on demand, at
declared requests (`kubernetes-packer-home-cloud`, home.py: what the simulator's `kube-default`
runs) follows as a second figure, and the per-workload greedy, which shares no node, as a third. The headline is the
smallest saving the broker can claim against a packer: a FinOps team that rebuilds it with its
own scheduler gets the same figure, not a strawman's.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.core.domain import Baseline
from broker.core.pooltable import BoolArray
from broker.solver.baselines.costs import greedy_cost, kubernetes_packer_cost, packer_cost, priced
from broker.solver.baselines.home import KUBERNETES_PACKER, KUBERNETES_PACKER_DESCRIPTION
from broker.solver.costs import placement_nodes
from broker.solver.prepare.candidates import Prepared
from broker.solver.prepare.filters import combine
from broker.solver.problem import PlacementProblem
from broker.solver.types import Placement

GREEDY = "greedy-cheapest-fit"
GREEDY_DESCRIPTION = (
    "each workload alone on its cheapest feasible offer across every allowed site and capacity type "
    "(SkyPilot-style), sharing no node with other workloads"
)
ANYWHERE = "kubernetes-packer"
ANYWHERE_DESCRIPTION = (
    "Kubernetes-style packing over every pool the request allows (every allowed site, provider and "
    "capacity type, spot where tolerated), requests as solved: kube-scheduler filter and "
    "LeastAllocated score replica by replica, a cluster autoscaler opening the cheapest node that fits"
)
IN_FORCE = "placement-in-force"
IN_FORCE_DESCRIPTION = (
    "the placement running now (the request's `current`, or the stored placement a re-plan "
    "replaces), every replica left where it runs, priced at today's prices"
)


def in_force(problem: PlacementProblem, prep: Prepared, running: Sequence[tuple[int, int, int]]) -> float | None:
    """USD/h of keeping the running placement (`running`: workload, pool or -1 when gone,
    replicas), when it still runs the whole request: every workload's replicas on pools still
    offered that its constraints allow (a dominated pool is fine: it runs). None otherwise."""
    workloads = prep.workloads
    if not running:
        return None
    x: Placement = {}
    per_w = [0] * len(workloads)
    allowed: dict[int, BoolArray] = {}
    for k, p, r in running:
        if k not in allowed:
            allowed[k] = combine(prep.masks_by_w[k], problem.table.n_pools)
        if p < 0 or not allowed[k][p]:
            return None
        x[(k, p)] = x.get((k, p), 0) + r
        per_w[k] += r
    if any(n != wd.w.replicas for n, wd in zip(per_w, workloads, strict=True)):
        return None
    t = problem.table
    return priced(problem, workloads, x, placement_nodes(workloads, x, vcpus=t.vcpus, mem=t.memory_gib, gpus=t.gpus))


def _rounded(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 6)


def baselines(
    problem: PlacementProblem,
    prep: Prepared,
    greedy: Placement | None,
    anywhere: tuple[Placement, dict[int, int]] | None,
    running: Sequence[tuple[int, int, int]],
) -> tuple[Baseline, ...]:
    """(headline, the others): see the module. `anywhere` is the packer's answer over every
    allowed pool (None: not built, the home-cloud packer heads instead)."""
    kept = in_force(problem, prep, running)
    home = Baseline(KUBERNETES_PACKER, _rounded(kubernetes_packer_cost(problem, prep)), KUBERNETES_PACKER_DESCRIPTION)
    cheapest = None if greedy is None else greedy_cost(problem, prep.workloads, greedy)
    second: tuple[Baseline, ...] = (home, Baseline(GREEDY, _rounded(cheapest), GREEDY_DESCRIPTION))
    if anywhere is not None:
        packer = packer_cost(problem, prep.workloads, *anywhere)
        second = (Baseline(ANYWHERE, _rounded(packer), ANYWHERE_DESCRIPTION), *second)
    if kept is not None:
        return (Baseline(IN_FORCE, _rounded(kept), IN_FORCE_DESCRIPTION), *second)
    return second
