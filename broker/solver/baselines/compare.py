"""The baselines an answer is compared with, named and priced (solve.py reports them).

The headline (`baseline`, which `savings_pct` compares with) is what the user would otherwise
run: for a re-plan the placement in force, kept as it is; otherwise the home cloud's Kubernetes
packer (home.py). The per-workload greedy, which shares no node, follows as a second figure, and
the same packer let loose on every pool the request allows (every site, spot where tolerated: the
search's start) as a third, the strictest comparison.
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
ANYWHERE = "kubernetes-packer-any-site"
ANYWHERE_DESCRIPTION = (
    "the kubernetes-packer's scheduler and autoscaler over every pool the request allows: every "
    "allowed site, provider and capacity type (spot where tolerated), requests as solved"
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
    """(headline, greedy, packer on any site): see the module. `anywhere` is the packer's answer
    over every allowed pool (None: not built, the figure is left out)."""
    kept = in_force(problem, prep, running)
    if kept is not None:
        head = Baseline(IN_FORCE, _rounded(kept), IN_FORCE_DESCRIPTION)
    else:
        packer = kubernetes_packer_cost(problem, prep)
        head = Baseline(KUBERNETES_PACKER, _rounded(packer), KUBERNETES_PACKER_DESCRIPTION)
    cheapest = None if greedy is None else greedy_cost(problem, prep.workloads, greedy)
    out: tuple[Baseline, ...] = (head, Baseline(GREEDY, _rounded(cheapest), GREEDY_DESCRIPTION))
    if anywhere is not None:
        out += (Baseline(ANYWHERE, _rounded(packer_cost(problem, prep.workloads, *anywhere)), ANYWHERE_DESCRIPTION),)
    return out
