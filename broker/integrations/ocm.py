"""Open Cluster Management AddOnPlacementScores (cluster.open-cluster-management.io/v1alpha1) from the
broker's prices, so an OCM `Placement` can prefer the managed clusters whose capacity is cheapest.

One AddOnPlacementScore per managed cluster, in the hub namespace named after the cluster, with
integer scores in OCM's range -100..100:

* `costPerCore`: the on-demand price per hour of one core with its memory (1 vCPU and 4 GiB) at
  the cluster's site, on the site's cheapest x86-64 pool without GPUs for it (node price / cores
  that fit), scaled linearly over the clusters scored: the cheapest cluster +100, the dearest
  -100. Equal prices score 0 (no preference).
* `spotCostPerCore`: the same over spot pools, for sites that sell spot capacity.

A Placement reads one score by `resourceName` (the object's name) and `scoreName`. Scores expire
at `validUntil`, after which OCM ignores them; the publisher rewrites them before then.

Pure: the caller passes the clusters' sites and the pool table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np

from broker.core.domain import Arch, CapacityType
from broker.core.pooltable import ARCHES, CAPACITY_TYPES, PoolTable
from broker.integrations.extender import PREFIX

API_VERSION = "cluster.open-cluster-management.io/v1alpha1"
GROUP, VERSION = API_VERSION.split("/")
PLURAL = "addonplacementscores"
RESOURCE_NAME = "placement-broker-prices"
SCORES = {"costPerCore": CapacityType.ONDEMAND, "spotCostPerCore": CapacityType.SPOT}
MAX_SCORE = 100
# a core with its memory: the general-purpose 1:4 ratio. Without the memory, the cheapest vCPU
# at every cloud site is a burstable nano instance (0.5 GiB, a fraction of a core guaranteed),
# which prices no real workload.
MEMORY_PER_CORE_GIB = 4.0
SITE_ANNOTATION = f"{PREFIX}/site"
MANAGED_BY = "placement-broker"


def core_prices(table: PoolTable, sites: Iterable[str], capacity: CapacityType) -> dict[str, float]:
    """USD per hour of one core with its memory (1 vCPU and MEMORY_PER_CORE_GIB) at each site:
    over x86-64 pools of the capacity type without GPUs, the node price divided by how many such
    cores fit on the node. Sites without such a pool are left out."""
    wanted = [s for s in dict.fromkeys(sites) if s in table.site_index]
    if not wanted:
        return {}
    position = np.full(table.n_sites, -1, dtype=np.int64)
    for i, s in enumerate(wanted):
        position[table.site_index[s]] = i
    cores = np.floor(np.minimum(table.vcpus, table.memory_gib / MEMORY_PER_CORE_GIB) + 1e-9)
    idx = np.flatnonzero(
        (position[table.site_idx] >= 0)
        & (table.cap_idx == CAPACITY_TYPES.index(capacity))
        & (table.gpus == 0)
        & (table.arch_idx == ARCHES.index(Arch.AMD64))
        & (cores >= 1)
    )
    best = np.full(len(wanted), np.inf)
    np.minimum.at(best, position[table.site_idx[idx]], table.price[idx] / cores[idx])
    return {s: float(best[i]) for i, s in enumerate(wanted) if math.isfinite(best[i])}


def scale(prices: Mapping[str, float]) -> dict[str, int]:
    """Linear scores: the cheapest +100, the dearest -100; all equal (or one cluster) 0."""
    if not prices:
        return {}
    lo, hi = min(prices.values()), max(prices.values())
    if hi - lo <= 1e-12 * max(abs(hi), 1.0):
        return dict.fromkeys(prices, 0)
    out = {}
    for name, p in prices.items():
        raw = MAX_SCORE - 2 * MAX_SCORE * (p - lo) / (hi - lo)
        out[name] = max(-MAX_SCORE, min(MAX_SCORE, math.floor(raw + 0.5)))
    return out


def scores(table: PoolTable, cluster_sites: Mapping[str, str]) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """cluster -> its score items; and a note for each cluster that gets none."""
    per_cluster: dict[str, list[dict[str, Any]]] = {c: [] for c in cluster_sites}
    for score_name, capacity in SCORES.items():
        by_site = core_prices(table, cluster_sites.values(), capacity)
        priced = {c: by_site[s] for c, s in cluster_sites.items() if s in by_site}
        for cluster, value in sorted(scale(priced).items()):
            per_cluster[cluster].append({"name": score_name, "value": value})
    notes = [
        f"{c}: site {s} has no priced on-demand or spot pool"
        if s in table.site_index
        else f"{c}: site {s} is not in the catalog"
        for c, s in sorted(cluster_sites.items())
        if not per_cluster[c]
    ]
    return {c: items for c, items in per_cluster.items() if items}, notes


def placement_score(
    cluster: str,
    site: str,
    items: list[dict[str, Any]],
    prices: Mapping[str, float],
    *,
    published_at: datetime,
    valid_until: datetime,
    name: str = RESOURCE_NAME,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(object, status) of one cluster's AddOnPlacementScore. The object carries what the scores
    were computed from in annotations (a score alone hides the price); the status is written
    separately, through the status subresource."""
    annotations = {SITE_ANNOTATION: site}
    annotations.update({f"{PREFIX}/{k}-usd-per-hour": f"{v:.6f}" for k, v in sorted(prices.items())})
    obj = {
        "apiVersion": API_VERSION,
        "kind": "AddOnPlacementScore",
        "metadata": {
            "name": name,
            "namespace": cluster,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
            "annotations": annotations,
        },
    }
    status = {
        "scores": items,
        "validUntil": valid_until.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "conditions": [
            {
                "type": "ScoresAvailable",
                "status": "True",
                "reason": "Published",
                "message": f"prices of {site} from the broker's catalog",
                "lastTransitionTime": published_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ],
    }
    return obj, status
