"""Large-neighbourhood search: re-place a few classes around the open nodes, the rest held.

After column generation the incumbent is typically 1-2 % above the LP: whole nodes
half-used where a few classes could share them. One small MIP over every class frees
too much (HiGHS does not finish its root in time); a neighbourhood frees the classes
on the nodes that waste the most, at one site at a time, and offers them every pool the
incumbent runs (the idle room of open nodes), their LP columns and their best-priced
ones. Everything else keeps its replicas, so each MIP is small and fast.
"""

from __future__ import annotations

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver.model import ModelInput, XColumns

ClassPlacement = dict[tuple[int, int], int]


def idle_cost(mi: ModelInput, x: ClassPlacement, nodes: dict[int, int]) -> dict[int, float]:
    """Per open pool: what its nodes' unused share costs (by the busier of cpu and memory)."""
    load: dict[int, FloatArray] = {}
    for (c, p), r in x.items():
        load[p] = load.get(p, np.zeros(3)) + r * mi.classes[c].demand
    out: dict[int, float] = {}
    for p, n in nodes.items():
        used = max(load[p][0] / (n * mi.vcpus[p]), load[p][1] / (n * mi.mem[p]))
        out[p] = float(mi.node_cost[p]) * n * max(0.0, 1.0 - used)
    return out


def pick_classes(
    mi: ModelInput, x: ClassPlacement, nodes: dict[int, int], rng: np.random.Generator, target: int
) -> BoolArray:
    """Classes to free: those at a site drawn by its idle cost, then more sites the same way,
    until `target` classes are free. A site with more classes than that gives those on its
    idlest pools first: at 20,000 workloads one site held hundreds of classes, and their MIPs
    (245k-707k columns) never finished in their 1.5 s."""
    idle = idle_cost(mi, x, nodes)
    site_idle: dict[int, float] = {}
    for p, v in idle.items():
        s = int(mi.site_idx[p])
        site_idle[s] = site_idle.get(s, 0.0) + v + 1e-9
    on_pool: dict[int, list[int]] = {}
    for c, p in x:
        on_pool.setdefault(p, []).append(c)
    at_site: dict[int, list[int]] = {}  # a site's classes, those on its idlest pools first
    for p in sorted(on_pool, key=lambda q: -idle.get(q, 0.0)):
        at_site.setdefault(int(mi.site_idx[p]), []).extend(on_pool[p])
    free = np.zeros(len(mi.classes), dtype=bool)
    sites = list(site_idle)
    weights = np.array([site_idle[s] for s in sites])
    while (need := target - int(free.sum())) > 0 and weights.sum() > 0:
        k = int(rng.choice(len(sites), p=weights / weights.sum()))
        more = [c for c in dict.fromkeys(at_site[sites[k]]) if not free[c]]
        free[more[:need]] = True
        weights[k] = 0.0
    return free


def columns_on_pools(cols: XColumns, free: BoolArray, pools: IntArray) -> IntArray:
    """Every column (c, p) with c free and p in `pools` that is a candidate of c."""
    c = np.repeat(np.flatnonzero(free), len(pools))
    p = np.tile(pools, int(free.sum()))
    pos = cols.position(c, p)
    return pos[pos >= 0]
