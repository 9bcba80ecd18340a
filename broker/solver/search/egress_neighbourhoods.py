"""Neighbourhoods that trade egress against compute: a service moved together with its callers.

Where the placement is cheapest per class, callers and the services they call often land in
different clouds, and their traffic leaves at the internet's rate instead of a cloud's own
inter-region one; moving one class alone rarely pays (its compute costs more elsewhere and the
other side of the traffic has not moved). These neighbourhoods free whole components of the
dependency graph, drawn by the egress they pay in the incumbent, and offer each free class,
beside what the other neighbourhoods offer, its cheapest columns in every cloud and at every
site where one of its peers runs: the MIP then chooses where the component lives together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver import costs
from broker.solver.model.columns import XColumns
from broker.solver.model.layout import ModelInput
from broker.solver.types import ClassPlacement


@dataclass(frozen=True)
class Dependencies:
    """The dependency graph of a request's classes: its components and each class's peers."""

    component: IntArray  # per class: its component (classes without traffic: their own)
    peers: list[list[int]]  # per class: the classes it sends to or receives from
    pairs: list[tuple[int, int, float]]  # (sender, peer, GiB/h)

    @property
    def any(self) -> bool:
        return bool(self.pairs)


def dependencies(mi: ModelInput) -> Dependencies:
    n = len(mi.classes)
    pairs = [(k, v, gib) for k, cl in enumerate(mi.classes) for v, gib in cl.deps]
    peers: list[list[int]] = [[] for _ in range(n)]
    for k, v, _ in pairs:
        peers[k].append(v)
        peers[v].append(k)
    ks = np.array([k for k, _, _ in pairs], dtype=np.int64)
    vs = np.array([v for _, v, _ in pairs], dtype=np.int64)
    graph = sp.coo_matrix((np.ones(len(ks)), (ks, vs)), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    return Dependencies(component.astype(np.int64), peers, pairs)


def egress_per_component(mi: ModelInput, deps: Dependencies, x: ClassPlacement) -> FloatArray:
    """What each component's traffic costs in x, as the answer reports it (routed)."""
    frac: list[dict[int, float]] = [{} for _ in mi.classes]
    for (c, p), r in x.items():
        s = int(mi.site_idx[p])
        frac[c][s] = frac[c].get(s, 0.0) + r / mi.classes[c].replicas
    out = np.zeros(int(deps.component.max()) + 1 if len(deps.component) else 0)
    for k, v, gib in deps.pairs:
        out[deps.component[k]] += mi.cost_weight * costs.routed_egress(frac, [(k, v, gib)], mi.egress)
    return out


def pick_components(
    deps: Dependencies, paid: FloatArray, rng: np.random.Generator, target: int, n_classes: int
) -> BoolArray:
    """Whole components drawn by the egress they pay, until `target` classes are free."""
    free = np.zeros(n_classes, dtype=bool)
    weights = paid.copy()
    members = np.bincount(deps.component, minlength=len(paid))
    while int(free.sum()) < target and weights.sum() > 0:
        k = int(rng.choice(len(weights), p=weights / weights.sum()))
        if free.any() and int(free.sum()) + members[k] > 1.5 * target:
            weights[k] = 0.0  # would overshoot the neighbourhood's size by far
            continue
        free |= deps.component == k
        weights[k] = 0.0
    return free


def co_location_columns(
    mi: ModelInput, cols: XColumns, deps: Dependencies, x: ClassPlacement, free: BoolArray, per_cloud: int
) -> IntArray:
    """Each free class's `per_cloud` cheapest columns in every cloud and its cheapest column at
    every site where a peer runs in x, by what a replica costs on a node shared at full use."""
    peer_sites: dict[int, set[int]] = {}
    for c, p in x:
        peer_sites.setdefault(c, set()).add(int(mi.site_idx[p]))
    prov = mi.site_provider if len(mi.site_provider) else np.zeros(mi.n_sites, dtype=np.int64)
    out: list[IntArray] = []
    for c in np.flatnonzero(free).tolist():
        cl = mi.classes[c]
        if not deps.peers[c]:
            continue
        cand = cl.cand
        cpu, mem, _gpu = cl.demand
        share = mi.node_cost[cand] * np.maximum(cpu / mi.vcpus[cand], mem / mi.mem[cand]) + cl.rep_cost
        site = mi.site_idx[cand]
        first = int(cols.starts[c])
        cloud = prov[site]
        for q in np.unique(cloud).tolist():
            at = np.flatnonzero(cloud == q)
            out.append(first + at[np.argsort(share[at], kind="stable")[:per_cloud]])
        wanted = set().union(*(peer_sites.get(v, set()) for v in deps.peers[c]))
        for s in wanted:
            at = np.flatnonzero(site == s)
            if len(at):
                out.append(first + at[[int(np.argmin(share[at]))]])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
