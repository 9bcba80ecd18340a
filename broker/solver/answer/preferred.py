"""Why the plan put a workload on a pool that is not its cheapest home.

Explanations compare homes by what the workload's replicas cost alone on whole nodes of a
pool. The plan is solved as a whole, so a pool that is cheaper alone can lose to the chosen
one for reasons that couple workloads or sites: nodes shared with other workloads, egress
to dependencies, spread, owned capacity in use, spot caps, storage prices, objective
weights, a running placement. This names those that hold for one row; when none does, the
plan is simply not proven optimal (its gap).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from broker.core.domain import Workload
from broker.core.pooltable import FloatArray, PoolTable
from broker.solver.prepare.classes import SPOT
from broker.solver.problem import PlacementProblem


def reasons(
    problem: PlacementProblem,
    w: Workload,
    chosen: int,
    cheaper: int,
    *,
    sharers: Sequence[str],
    dependents: Sequence[str],
    nodes: Mapping[int, int],
    storage: FloatArray,
) -> list[str]:
    """What can make `chosen` the better pool for the plan although `cheaper` costs less alone."""
    t: PoolTable = problem.table
    here, there = int(t.site_idx[chosen]), int(t.site_idx[cheaper])
    out: list[str] = []
    if sharers:
        out.append(f"shares the nodes of {t.pools[chosen].id} with {_names(sharers)}")
    peers = sorted({d.workload for d in w.depends_on} | set(dependents))
    if peers and here != there:
        out.append(f"egress: traffic with {_names(peers)}")
    if w.min_sites > 1:
        out.append(f"spread.min_sites>={w.min_sites} on {w.name}")
    if np.isfinite(t.max_nodes[cheaper]) and nodes.get(cheaper, 0) >= t.max_nodes[cheaper]:
        out.append(f"capacity:{t.pools[cheaper].id} max_nodes={int(t.max_nodes[cheaper])} in use")
    if w.max_spot_fraction is not None and int(t.cap_idx[cheaper]) == SPOT:
        out.append(f"max_spot_fraction={w.max_spot_fraction:g} on {w.name}")
    if w.storage_gib > 0 and here != there and storage[here] < storage[there]:
        out.append(f"storage: {w.storage_gib:g} GiB {w.storage_tier.value} costs less at {t.sites[here].id}")
    weights = problem.request.objective
    if weights.latency > 0 or weights.carbon > 0:
        out.append(f"objective weights latency={weights.latency:g}, carbon={weights.carbon:g}")
    pool_id = t.pools[chosen].id
    running = any(cw == w.name and cp == pool_id for cw, cp, _ in problem.request.current) or bool(
        problem.current.get(pool_id, {}).get(w.name)
    )
    if running:
        out.append(f"{w.name} already runs on {pool_id} (moves cost migration)")
    return out or ["the plan is not proven optimal (see gap_pct)"]


def preferred_over(
    problem: PlacementProblem, cheaper: int, saving_per_hour: float, because: list[str]
) -> dict[str, Any]:
    return {"pool": problem.table.pools[cheaper].id, "saving_per_hour": round(saving_per_hour, 6), "because": because}


def _names(names: Sequence[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
