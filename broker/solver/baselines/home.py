"""What a team would run without the broker: the Kubernetes-style packer on its home cloud.

One definition, shared by the answer's baseline (`kubernetes-packer`, solve.py) and the fleet
simulator's `kube-default` policy (broker/simulate/policies/kube.py):

- on-demand nodes only (`HOME_CAPACITY`), sized by the workloads' declared requests;
- of one home provider, in a home region: the simulator's fleet file names the site (and its one
  node type); a placement request names neither, so the home site is the one that can run the
  most of the request's declared cores (residency, latency SLOs, architecture, GPUs and the
  provider allow-list all kept), ties to the one where it costs least. Choosing the cheapest
  such site keeps the baseline strong: the savings reported are not inflated by a poor home;
- a workload the home site cannot run (its residency or latency SLOs exclude it) runs in a
  second cluster at its cheapest allowed site of the home provider, else of any provider; a
  workload spread over `min_sites` sites uses the next cheapest allowed sites the same way;
- a workload that may not use on-demand nodes at all keeps the capacity types it allows;
- kube-scheduler: replica by replica, filter and LeastAllocated score onto open nodes;
  cluster-autoscaler: a replica that fits no open node opens a node of the cheapest node group
  (by node price) that fits it (kubernetes.py, the same code the search's start uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from broker.core.domain import CapacityType, Pool
from broker.core.pooltable import CAPACITY_TYPES, FloatArray, IntArray, PoolTable
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays
from broker.solver.prepare.classes import WorkloadData, per_node_exact
from broker.solver.segments import group_bounds
from broker.solver.types import Placement

HOME_CAPACITY = CapacityType.ONDEMAND
ONDEMAND = CAPACITY_TYPES.index(HOME_CAPACITY)
KUBERNETES_PACKER = "kubernetes-packer-home-cloud"
KUBERNETES_PACKER_DESCRIPTION = (
    "Kubernetes on the home cloud: one provider's home site (the site that can run the most of the "
    "request's declared cores, the cheapest of those), on-demand nodes only, declared requests; "
    "kube-scheduler filter and LeastAllocated score, the cluster autoscaler opening the cheapest "
    "node group that fits; workloads the home site may not run go to their cheapest allowed site "
    "of the home provider (else of any provider)"
)


def home_pool(table: PoolTable, site: str, instance_type: str) -> int | None:
    """The simulator's kube-default node group: one on-demand node type at the home site (None:
    not offered there)."""
    return table.pool_index.get(Pool.make_id(site, instance_type, HOME_CAPACITY))


def _per_replica(wd: WorkloadData, pools: IntArray, arr: PoolArrays) -> FloatArray:
    """USD/h per replica on each of `pools` when a node holds as many replicas as fit."""
    w = wd.w
    exact = per_node_exact(w.cpu, w.memory_gib, w.gpus, arr.vcpus[pools], arr.mem[pools], arr.gpus[pools])
    return np.asarray(arr.node_cost[pools] / np.maximum(np.floor(exact + 1e-9), 1.0), dtype=np.float64)


@dataclass(frozen=True)
class _OnDemand:
    """What a candidate set keeps on the home cloud's terms, shared by its workloads: positions
    into cand of its on-demand pools (all of them when it has none), those pools, and their
    sites grouped (positions into `at`, ascending within a site)."""

    at: IntArray
    pools: IntArray
    site_of: IntArray  # site of each pool in `pools`
    by_site: IntArray
    starts: IntArray  # where each site's run in by_site starts
    sites: IntArray  # the site of each run


def _on_demand(wd: WorkloadData, arr: PoolArrays) -> _OnDemand:
    at = np.flatnonzero(arr.cap_idx[wd.cand] == ONDEMAND)
    if len(at) == 0:
        at = np.arange(len(wd.cand))
    pools = wd.cand[at]
    site_of = arr.site_idx[pools]
    by_site = np.argsort(site_of, kind="stable")
    bounds = group_bounds(site_of[by_site])
    return _OnDemand(at, pools, site_of, by_site, bounds[:-1], site_of[by_site[bounds[:-1]]])


def home_workloads(
    workloads: Sequence[WorkloadData], arr: PoolArrays, site_provider: Sequence[str]
) -> list[WorkloadData]:
    """Each workload with its candidates cut to the home cloud's node groups (see the module)."""
    n_sites = len(site_provider)
    cores = np.zeros(n_sites)
    cost = np.zeros(n_sites)
    keys: list[tuple[object, ...]] = []
    # per candidate set, per size on it, per size and storage: what a workload of each computes
    # (an estate of thousands of workloads has a few hundred of each)
    on_demand: dict[tuple[object, ...], _OnDemand] = {}
    per_replica: dict[tuple[object, ...], FloatArray] = {}
    memo: dict[tuple[object, ...], tuple[_OnDemand, FloatArray]] = {}
    for wd in workloads:
        w = wd.w
        key: tuple[object, ...] = (wd.signature, w.cpu, w.memory_gib, w.gpus, w.storage_gib, w.storage_tier)
        if key not in memo:
            od = on_demand.get(wd.signature)
            if od is None:
                od = on_demand[wd.signature] = _on_demand(wd, arr)
            size = key[:4]
            if size not in per_replica:
                per_replica[size] = _per_replica(wd, od.pools, arr)
            # the per-replica cost on each on-demand candidate, its site's storage and latency
            # terms included; each site's cheapest (min is exact: the order it is taken in is moot)
            rep = per_replica[size] + wd.rep_cost[od.at]
            best = np.full(n_sites, np.inf)
            if len(od.at):
                best[od.sites] = np.minimum.reduceat(rep[od.by_site], od.starts)
            memo[key] = (od, best)
        best = memo[key][1]
        allowed = np.isfinite(best)
        cores[allowed] += w.replicas * w.cpu
        cost[allowed] += w.replicas * best[allowed]
        keys.append(key)
    if not workloads:
        return []
    home = int(np.lexsort((np.arange(n_sites), cost, -cores))[0])
    home_provider = site_provider[home]
    rank = np.array([1 if p == home_provider else 2 for p in site_provider])
    rank[home] = 0
    out: list[WorkloadData] = []
    cut: dict[tuple[object, ...], tuple[IntArray, FloatArray, tuple[object, ...]]] = {}
    for wd, key in zip(workloads, keys, strict=True):
        spread = max(1, wd.w.min_sites)
        if (key, spread) not in cut:
            od, best = memo[key]
            allowed = np.flatnonzero(np.isfinite(best))
            sites = allowed[np.lexsort((allowed, best[allowed], rank[allowed]))][:spread]
            chosen = np.zeros(n_sites, dtype=bool)
            chosen[sites] = True
            keep = od.at[chosen[od.site_of]]
            # the signature names the candidate set, as kubernetes.py's caches need
            cut[(key, spread)] = (wd.cand[keep], wd.rep_cost[keep], (wd.signature, "home", *sites.tolist()))
        cand, rep_cost, sig = cut[(key, spread)]
        out.append(replace(wd, cand=cand, rep_cost=rep_cost, signature=sig))
    return out


def kubernetes_packer(
    workloads: Sequence[WorkloadData], arr: PoolArrays, site_provider: Sequence[str]
) -> tuple[Placement, dict[int, int]] | None:
    """The home cloud's packer: (placement, nodes opened per pool), None when it cannot place the
    request (owned capacity or spread the home cloud cannot give)."""
    return kubernetes_filter_score(home_workloads(workloads, arr, site_provider), arr)
