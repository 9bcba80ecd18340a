"""Two baselines implemented in the project, to show what the broker saves.

- greedy cheapest fit (SkyPilot-style): each workload on its own, no node
  sharing between workloads: the pool with the lowest cost per replica when a
  node holds floor(node / replica) replicas, spread round-robin over the
  cheapest `min_sites` sites.
- Kubernetes-style filter/score: replicas are scheduled one at a time; nodes
  already open that fit and pass the workload's filters are scored
  (LeastAllocated, topology spread over sites) and the best one wins; when
  none fits, a cluster-autoscaler "price" expander opens a node of the
  cheapest node group (lowest node price) that fits the replica.

Both keep every hard constraint the solver keeps (filters, spread, spot caps,
owned capacity), so the comparison is fair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from broker.pooltable import FloatArray, IntArray
from broker.solver.classes import SPOT, WorkloadData, spot_cap

Placement = dict[tuple[int, int], int]  # (workload index, pool index) -> replicas


def _per_node(wd: WorkloadData, vcpus: FloatArray, mem: FloatArray, gpus: FloatArray) -> FloatArray:
    w, cand = wd.w, wd.cand
    per_node = np.floor(np.minimum(vcpus[cand] / w.cpu, mem[cand] / w.memory_gib) + 1e-9)
    if w.gpus > 0:
        per_node = np.minimum(per_node, np.floor(gpus[cand] / w.gpus + 1e-9))
    return np.maximum(per_node, 1.0)


@dataclass(frozen=True)
class PoolArrays:
    node_cost: FloatArray
    vcpus: FloatArray
    mem: FloatArray
    gpus: FloatArray
    max_nodes: FloatArray
    site_idx: IntArray
    cap_idx: IntArray


def greedy_cheapest_fit(
    workloads: Sequence[WorkloadData],
    arr: PoolArrays,
) -> Placement | None:
    """Returns (workload index, pool index) -> replicas, or None when greedy fails."""
    node_cost, vcpus, mem, gpus = arr.node_cost, arr.vcpus, arr.mem, arr.gpus
    max_nodes, site_idx, cap_idx = arr.max_nodes, arr.site_idx, arr.cap_idx
    used_nodes: dict[int, int] = {}
    out: Placement = {}
    memo: dict[tuple[object, ...], list[tuple[int, int]]] = {}
    for k, wd in enumerate(workloads):
        w = wd.w
        key = (wd.signature, w.cpu, w.memory_gib, w.gpus, w.storage_gib, w.storage_tier, w.min_sites,
               w.replicas, w.max_spot_fraction)  # fmt: skip
        if key in memo:
            for p, r in memo[key]:
                out[(k, p)] = r
            continue
        cand = wd.cand
        if len(cand) == 0:
            return None
        per_node = _per_node(wd, vcpus, mem, gpus)
        cost_per_replica = node_cost[cand] / per_node + wd.rep_cost
        order = np.argsort(cost_per_replica, kind="stable")
        _, first = np.unique(site_idx[cand[order]], return_index=True)
        sites = [int(s) for s in site_idx[cand[order[np.sort(first)]]]]
        if len(sites) < w.min_sites:
            return None
        cap = spot_cap(w)
        spot_left = cap if cap is not None else w.replicas
        n_spread = w.min_sites
        quota = [w.replicas // n_spread + (1 if i < w.replicas % n_spread else 0) for i in range(n_spread)]
        carry = 0
        mine: dict[int, int] = {}
        touched_bounded = False
        for pos, site in enumerate(sites):
            need = (quota[pos] if pos < n_spread else 0) + carry
            at = order[site_idx[cand[order]] == site]
            for i in at:
                if need <= 0:
                    break
                p = int(cand[i])
                if cap_idx[p] == SPOT and spot_left <= 0:
                    continue
                fit = int(per_node[i])
                free_nodes = max_nodes[p] - used_nodes.get(p, 0)
                take = int(min(need, free_nodes * fit))
                if cap_idx[p] == SPOT:
                    take = min(take, spot_left)
                    spot_left -= take
                if take <= 0:
                    continue
                touched_bounded |= bool(np.isfinite(max_nodes[p]))
                used_nodes[p] = used_nodes.get(p, 0) + math.ceil(take / fit)
                mine[p] = mine.get(p, 0) + take
                need -= take
            carry = need
            if pos >= n_spread - 1 and carry == 0:
                break
        if len({int(site_idx[p]) for p in mine}) < w.min_sites or sum(mine.values()) != w.replicas:
            return None
        for p, r in mine.items():
            out[(k, p)] = r
        if not touched_bounded:
            memo[key] = list(mine.items())
    return out


def kubernetes_filter_score(
    workloads: Sequence[WorkloadData],
    arr: PoolArrays,
) -> tuple[Placement, dict[int, int]] | None:
    """Replica-by-replica scheduling onto open nodes; returns (placement, nodes per pool)."""
    node_cost, vcpus, mem, gpus = arr.node_cost, arr.vcpus, arr.mem, arr.gpus
    max_nodes, site_idx, cap_idx = arr.max_nodes, arr.site_idx, arr.cap_idx
    total = sum(wd.w.replicas for wd in workloads)
    node_pool = np.zeros(total, dtype=np.int64)
    free = np.zeros((total, 3))
    n_open = 0
    nodes: dict[int, int] = {}
    out: Placement = {}
    cand_mask = np.zeros(len(node_cost), dtype=bool)
    for k, wd in enumerate(workloads):
        w = wd.w
        d = np.array([w.cpu, w.memory_gib, w.gpus]) - 1e-9
        cand_mask[:] = False
        cand_mask[wd.cand] = True
        # the autoscaler's node groups for this workload: per site, the cheapest node that fits
        price_order = wd.cand[np.argsort(node_cost[wd.cand], kind="stable")]
        cap = spot_cap(w)
        spot_used = 0
        per_site: dict[int, int] = {}
        for _ in range(w.replicas):
            short = len(per_site) < w.min_sites
            ok = cand_mask[node_pool[:n_open]] & (free[:n_open] >= d).all(axis=1)
            if cap is not None and spot_used >= cap:
                ok &= cap_idx[node_pool[:n_open]] != SPOT
            if short and per_site:
                ok &= ~np.isin(site_idx[node_pool[:n_open]], list(per_site))
            best = -1
            if ok.any():
                idx = np.flatnonzero(ok)
                p_idx = node_pool[idx]
                least_alloc = (free[idx, 0] / vcpus[p_idx] + free[idx, 1] / mem[p_idx]) / 2
                best = int(idx[int(np.argmax(least_alloc))])
            else:
                for g in price_order:
                    g = int(g)
                    if short and int(site_idx[g]) in per_site:
                        continue
                    if cap is not None and cap_idx[g] == SPOT and spot_used >= cap:
                        continue
                    if nodes.get(g, 0) >= max_nodes[g]:
                        continue
                    nodes[g] = nodes.get(g, 0) + 1
                    node_pool[n_open] = g
                    free[n_open] = (vcpus[g], mem[g], gpus[g])
                    best = n_open
                    n_open += 1
                    break
                if best < 0:
                    return None
            p = int(node_pool[best])
            free[best] -= d + 1e-9
            s = int(site_idx[p])
            per_site[s] = per_site.get(s, 0) + 1
            if cap_idx[p] == SPOT:
                spot_used += 1
            out[(k, p)] = out.get((k, p), 0) + 1
        if len(per_site) < w.min_sites:
            return None
    return out, nodes


def unshared_nodes(
    workloads: Sequence[WorkloadData], placement: Placement, *, vcpus: FloatArray, mem: FloatArray, gpus: FloatArray
) -> dict[int, int]:
    """Nodes per pool when each workload gets its own nodes (no sharing)."""
    out: dict[int, int] = {}
    for (k, p), r in placement.items():
        w = workloads[k].w
        fit = min(
            math.floor(vcpus[p] / w.cpu + 1e-9),
            math.floor(mem[p] / w.memory_gib + 1e-9),
            math.floor(gpus[p] / w.gpus + 1e-9) if w.gpus > 0 else 10**9,
        )
        out[p] = out.get(p, 0) + math.ceil(r / max(fit, 1))
    return out
