"""Class placements read against the model: their nodes, their rules, their cost.

A class placement maps (class, pool) to replicas. The search keeps its incumbent in this form
and compares candidates by `objective`, with egress as solve() reports it.
"""

from __future__ import annotations

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver import costs
from broker.solver.model.columns import XColumns
from broker.solver.model.layout import Layout, ModelInput, egress_values
from broker.solver.types import ClassPlacement


def class_nodes(mi: ModelInput, x: ClassPlacement) -> dict[int, int]:
    """Nodes per pool: the aggregate capacity rule, one node per `fit` replicas of each class, the
    sum of the replicas' large-replica weights (ModelInput.large_weights) and, where the model
    has them, the pattern counts of pools several classes share (ModelInput.pattern_nodes)."""
    if not x:
        return {}
    pairs = np.array(list(x), dtype=np.int64).reshape(-1, 2)
    cls, pool = pairs[:, 0], pairs[:, 1]
    r = np.fromiter(x.values(), dtype=np.float64, count=len(x))
    fit = mi.fit(cls, pool)[0].astype(np.float64)
    pools, at = np.unique(pool, return_inverse=True)
    load = np.zeros((len(pools), 3))
    np.add.at(load, at, r[:, None] * mi.class_demand[cls])
    large = np.zeros((len(pools), mi.large_kinds))
    np.add.at(large, at, r[:, None] * mi.large_weights(cls, pool))
    need = np.zeros(len(pools))
    np.maximum.at(need, at, np.ceil(r / fit - 1e-9))
    if mi.pattern_nodes is not None:  # pools several classes share: what their patterns need
        order = np.argsort(at, kind="stable")
        first = np.searchsorted(at[order], np.arange(len(pools) + 1))
        for i in np.flatnonzero(np.diff(first) >= 2):
            on = order[first[i] : first[i + 1]]
            p = int(pools[i])
            cap = np.array([mi.vcpus[p], mi.mem[p], mi.gpus[p]], dtype=np.float64)
            need[i] = max(need[i], mi.pattern_nodes.need(mi.class_demand[cls[on]], cap, fit[on], r[on]))
    return costs.nodes_needed(pools, load, large, need, vcpus=mi.vcpus, mem=mi.mem, gpus=mi.gpus)


def feasible(mi: ModelInput, x: ClassPlacement, nodes: dict[int, int]) -> bool:
    """Whether x, running `nodes`, keeps owned capacity, the tenant's family quotas, the cap on
    moves and every class's rules."""
    if any(n > mi.max_nodes[p] for p, n in nodes.items()):
        return False
    if (mi.quota_use(nodes) > mi.quota_vcpus + 1e-9).any():
        return False
    if mi.max_moves is not None and kept(mi, x) < mi.current_total - mi.max_moves - 1e-9:
        return False
    return not broken_classes(mi, x)


def broken_classes(mi: ModelInput, x: ClassPlacement) -> set[int]:
    """Classes whose own rules x breaks: replicas, spot cap, distinct sites."""
    per_class: dict[int, int] = {}
    spot: dict[int, int] = {}
    at_site: dict[tuple[int, int], int] = {}
    for (c, p), r in x.items():
        per_class[c] = per_class.get(c, 0) + r
        if mi.cap_idx[p] == 1:
            spot[c] = spot.get(c, 0) + r
        key = (c, int(mi.site_idx[p]))
        at_site[key] = at_site.get(key, 0) + r
    slots: dict[int, int] = {}  # distinct-site slots per class: sum_s min(x_cs, K_c)
    for (c, _s), r in at_site.items():
        slots[c] = slots.get(c, 0) + min(r, mi.classes[c].size)
    return {
        i
        for i, cl in enumerate(mi.classes)
        if per_class.get(i, 0) != cl.replicas
        or (cl.spot_cap is not None and spot.get(i, 0) > cl.spot_cap)
        or (cl.min_sites > 1 and slots.get(i, 0) < cl.min_sites * cl.size)
    }


def repaired(mi: ModelInput, x: ClassPlacement, fallback: ClassPlacement) -> ClassPlacement:
    """x with each class whose own rules it breaks placed as in `fallback` (a feasible answer).
    The rounded LP breaks a few spot caps or spreads; repaired, it stays the incumbent, so RENS
    offers the LP's support alone. Unrepaired, a start far dearer than the LP became the
    incumbent and its columns doubled RENS' MIP, which then did not finish."""
    broken = broken_classes(mi, x)
    if not broken:
        return x
    out = {k: r for k, r in x.items() if k[0] not in broken}
    out.update({k: r for k, r in fallback.items() if k[0] in broken})
    return out


def objective(mi: ModelInput, lay: Layout, x: ClassPlacement, *, routed: bool = True) -> float:
    """What x costs: nodes, site costs, moves and egress, the egress as solve() reports it
    (`routed_egress`) or, with routed=False, as the model prices it (never more). Incumbents
    are compared by the first, so a placement the model likes only for a cheaper egress tier
    than the answer would report is not taken."""
    nodes = class_nodes(mi, x)
    value = sum(n * float(mi.node_cost[p]) for p, n in nodes.items())
    for (c, p), r in x.items():
        cl = mi.classes[c]
        value += r * float(cl.rep_cost[int(np.searchsorted(cl.cand, p))])
    value += routed_egress(mi, x) if routed else egress_values(mi, lay, x).cost(lay)
    if mi.current_total:
        value += mi.move_cost * (mi.current_total - kept(mi, x))
    return value


def routed_egress(mi: ModelInput, x: ClassPlacement) -> float:
    """costs.routed_egress of the classes (those with dependencies are single workloads)."""
    frac: list[dict[int, float]] = [{} for _ in mi.classes]
    for (c, p), r in x.items():
        s = int(mi.site_idx[p])
        frac[c][s] = frac[c].get(s, 0.0) + r / mi.classes[c].replicas
    deps = [(k, v, gib) for k, cl in enumerate(mi.classes) for v, gib in cl.deps]
    return mi.cost_weight * costs.routed_egress(frac, deps, mi.egress)


def kept(mi: ModelInput, x: ClassPlacement) -> float:
    """Replicas that stay on the pool they run on now."""
    return sum(
        min(float(x.get((int(c), int(p)), 0)), float(cur))
        for c, p, cur in zip(mi.keep_class, mi.keep_pool, mi.keep_cur, strict=True)
    )


def round_lp(mi: ModelInput, cls: IntArray, pool: IntArray, xv: FloatArray) -> ClassPlacement:
    """Largest-remainder rounding of the LP's replicas per class."""
    out: ClassPlacement = {}
    live = xv > 1e-7
    for c, cl in enumerate(mi.classes):
        idx = np.flatnonzero((cls == c) & live)
        if len(idx) == 0:
            continue
        vals = xv[idx]
        base = np.floor(vals + 1e-9)
        short = cl.replicas - int(base.sum())
        if short > 0:
            base[np.argsort(-(vals - base), kind="stable")[:short]] += 1
        for i, r in zip(idx, base, strict=True):
            if r > 0:
                out[(c, int(pool[i]))] = int(r)
    return out


def columns_of(x: ClassPlacement | None, cols: XColumns) -> IntArray:
    """Universe positions of a placement's (class, pool) pairs."""
    if not x:
        return np.zeros(0, dtype=np.int64)
    pairs = np.array(list(x), dtype=np.int64)
    pos = cols.position(pairs[:, 0], pairs[:, 1])
    return pos[pos >= 0]
