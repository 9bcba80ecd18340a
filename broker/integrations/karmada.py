"""A Karmada PropagationPolicy (policy.karmada.io/v1alpha1) that carries out a broker placement.

With Karmada, a workload is one Deployment on the Karmada control plane, and Karmada divides its
replicas between member clusters. The policy selects each workload's Deployment (named after the
workload, in the given namespace), restricts it to the member clusters of the sites the broker
chose (`clusterAffinity.clusterNames`), and divides replicas with static weights equal to the
replicas the broker put in each cluster, so Karmada's split is the broker's split. A site with
several member clusters shares its replicas between them evenly.

Pure: the caller passes the placement's assignments and which member clusters serve each site.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from broker.core.domain import Assignment

API_VERSION = "policy.karmada.io/v1alpha1"


class UnservedSites(ValueError):
    def __init__(self, sites: Sequence[str]) -> None:
        super().__init__(f"no member cluster is registered for site(s) {', '.join(sites)}")
        self.sites = list(sites)


def dns_name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:253] or "placement"


def cluster_weights(
    assignments: Iterable[Assignment], clusters_by_site: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, int]]:
    """workload -> member cluster -> replicas. Raises UnservedSites if a chosen site has no cluster."""
    by_site: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for a in assignments:
        by_site[a.workload][a.site] += a.replicas
    missing = sorted({s for sites in by_site.values() for s in sites if not clusters_by_site.get(s)})
    if missing:
        raise UnservedSites(missing)
    out: dict[str, dict[str, int]] = {}
    for workload, sites in by_site.items():
        weights: dict[str, int] = defaultdict(int)
        for site, replicas in sites.items():
            members = sorted(clusters_by_site[site])
            share, extra = divmod(replicas, len(members))
            for i, member in enumerate(members):
                weights[member] += share + (1 if i < extra else 0)
        out[workload] = {c: w for c, w in sorted(weights.items()) if w > 0}
    return out


def propagation_policies(
    placement_id: str,
    assignments: Iterable[Assignment],
    clusters_by_site: Mapping[str, Sequence[str]],
    *,
    namespace: str,
) -> list[dict[str, Any]]:
    """One PropagationPolicy per workload (each divides its own replicas by its own weights)."""
    out = []
    for workload, weights in sorted(cluster_weights(assignments, clusters_by_site).items()):
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace, "name": dns_name(workload)}
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": "PropagationPolicy",
                "metadata": {
                    "name": dns_name(f"{workload}-broker"),
                    "namespace": namespace,
                    "labels": {"app.kubernetes.io/managed-by": "placement-broker"},
                    "annotations": {"placement-broker.dev/placement-id": placement_id},
                },
                "spec": {
                    "resourceSelectors": [deployment],
                    "placement": {
                        "clusterAffinity": {"clusterNames": sorted(weights)},
                        "replicaScheduling": {
                            "replicaSchedulingType": "Divided",
                            "replicaDivisionPreference": "Weighted",
                            "weightPreference": {
                                "staticWeightList": [
                                    {"targetCluster": {"clusterNames": [c]}, "weight": w} for c, w in weights.items()
                                ]
                            },
                        },
                    },
                },
            }
        )
    return out
