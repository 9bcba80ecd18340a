"""Greedy cheapest-fit baseline: how a per-workload scheduler would place the request.

Each workload on its own (no node sharing between workloads, as SkyPilot
places each task alone): take the pool with the lowest cost per replica when
a node holds floor(node / replica) replicas, spread over the cheapest
`min_sites` sites round-robin, respecting owned capacity and spot caps. Same
hard constraints as the solver, so the comparison is fair.
"""

from __future__ import annotations

import math

import numpy as np

from broker.solver.model import SPOT, ModelInput

Placement = dict[tuple[int, int], int]


def greedy_cheapest_fit(mi: ModelInput) -> Placement | None:
    """Returns (workload index, pool index) -> replicas, or None when greedy fails."""
    used_nodes: dict[int, int] = {}
    out: Placement = {}
    for k, wd in enumerate(mi.workloads):
        w = wd.w
        if len(wd.cand) == 0:
            return None
        cand = wd.cand
        per_node = np.floor(np.minimum(mi.vcpus[cand] / w.cpu, mi.mem[cand] / w.memory_gib) + 1e-9)
        if w.gpus > 0:
            per_node = np.minimum(per_node, np.floor(mi.gpus[cand] / w.gpus + 1e-9))
        cost_per_replica = mi.node_cost[cand] / per_node + wd.rep_cost
        order = np.argsort(cost_per_replica, kind="stable")
        # sites in order of their cheapest pool
        sites: list[int] = []
        for i in order:
            s = int(mi.site_idx[cand[i]])
            if s not in sites:
                sites.append(s)
        if len(sites) < w.min_sites:
            return None
        spot_left = (
            math.floor(w.max_spot_fraction * w.replicas + 1e-9)
            if w.max_spot_fraction is not None
            else w.replicas
        )
        # replicas per site: round-robin over the cheapest min_sites sites; what a
        # site cannot take (owned capacity, spot cap) carries over to the next site
        n_spread = w.min_sites
        quota = [w.replicas // n_spread + (1 if i < w.replicas % n_spread else 0) for i in range(n_spread)]
        carry = 0
        for pos, site in enumerate(sites):
            need = (quota[pos] if pos < n_spread else 0) + carry
            for i in order:
                if need <= 0:
                    break
                p = int(cand[i])
                if int(mi.site_idx[p]) != site or (mi.cap_idx[p] == SPOT and spot_left <= 0):
                    continue
                fit = int(per_node[i])
                free_nodes = mi.max_nodes[p] - used_nodes.get(p, 0)
                take = int(min(need, free_nodes * fit))
                if mi.cap_idx[p] == SPOT:
                    take = min(take, spot_left)
                    spot_left -= take
                if take <= 0:
                    continue
                used_nodes[p] = used_nodes.get(p, 0) + math.ceil(take / fit)
                out[(k, p)] = out.get((k, p), 0) + take
                need -= take
            carry = need
            if pos >= n_spread - 1 and carry == 0:
                break
        used_sites = {int(mi.site_idx[p]) for (kk, p) in out if kk == k}
        if len(used_sites) < w.min_sites:
            return None
        placed = sum(v for (kk, _), v in out.items() if kk == k)
        if placed != w.replicas:
            return None
    return out


def nodes_for(mi: ModelInput, placement: Placement, *, shared: bool) -> dict[int, int]:
    """Nodes per pool that a placement needs.

    shared=True packs all workloads of a pool together (the contract's
    aggregate rule); shared=False gives each workload its own nodes.
    """
    if shared:
        load: dict[int, np.ndarray] = {}
        for (k, p), r in placement.items():
            w = mi.workloads[k].w
            load.setdefault(p, np.zeros(3))
            load[p] += r * np.array([w.cpu, w.memory_gib, w.gpus])
        out = {}
        for p, ld in load.items():
            caps = np.array([mi.vcpus[p], mi.mem[p], mi.gpus[p]])
            need = [ld[i] / caps[i] for i in range(3) if ld[i] > 0]
            out[p] = max(1, math.ceil(max(need) - 1e-9))
        return out
    out2: dict[int, int] = {}
    for (k, p), r in placement.items():
        w = mi.workloads[k].w
        fit = min(
            math.floor(mi.vcpus[p] / w.cpu + 1e-9),
            math.floor(mi.mem[p] / w.memory_gib + 1e-9),
            math.floor(mi.gpus[p] / w.gpus + 1e-9) if w.gpus > 0 else 10**9,
        )
        out2[p] = out2.get(p, 0) + math.ceil(r / max(fit, 1))
    return out2
