"""Publishes the broker's prices to an Open Cluster Management hub as AddOnPlacementScores
(broker/integrations/ocm.py builds them).

`kubectl apply` cannot write a status, and the scores live in the status, so the broker writes
them itself: a server-side apply of the object (created when missing) and one of its status
through the status subresource, both under the field manager `placement-broker`. Applying is
idempotent: publishing again only moves `validUntil` and whatever prices changed.

The managed clusters are the hub's ManagedCluster objects; a cluster's broker site comes from an
explicit CLUSTER=SITE mapping, else its `placement-broker.dev/site` annotation, else the site of
the broker cluster registered under the same name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.core.pooltable import PoolTable
from broker.integrations import ocm

log = logging.getLogger("broker.ocm")
APPLY = "application/apply-patch+yaml"
FIELD_MANAGER = "placement-broker"
CLUSTER_GROUP, CLUSTER_VERSION, MANAGED_CLUSTERS = "cluster.open-cluster-management.io", "v1", "managedclusters"


@dataclass
class Published:
    scores: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # cluster -> score items
    sites: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    valid_until: str = ""


class ScorePublisher:
    def __init__(
        self,
        api: client.ApiClient,
        table: Callable[[], PoolTable],
        *,
        registered: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
        name: str = ocm.RESOURCE_NAME,
        valid_for: timedelta = timedelta(hours=1),
    ) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.table = table
        self.registered = dict(registered or {})
        self.overrides = dict(overrides or {})
        self.name = name
        self.valid_for = valid_for

    def cluster_sites(self) -> tuple[dict[str, str], list[str]]:
        """managed cluster -> broker site, and a note for each cluster without one."""
        listed = self.objects.list_cluster_custom_object(CLUSTER_GROUP, CLUSTER_VERSION, MANAGED_CLUSTERS)
        items = listed.get("items") or [] if isinstance(listed, dict) else []
        sites: dict[str, str] = {}
        notes: list[str] = []
        for mc in items:
            meta = mc.get("metadata") or {}
            name = str(meta.get("name", ""))
            site = (
                self.overrides.get(name)
                or (meta.get("annotations") or {}).get(ocm.SITE_ANNOTATION)
                or self.registered.get(name)
            )
            if site:
                sites[name] = str(site)
            else:
                notes.append(f"{name}: no site (annotate it {ocm.SITE_ANNOTATION}, or map it with --cluster)")
        missing = sorted(set(self.overrides) - {str((m.get("metadata") or {}).get("name")) for m in items})
        notes += [f"{c}: no ManagedCluster of that name on the hub" for c in missing]
        return sites, notes

    def publish(self) -> Published:
        sites, notes = self.cluster_sites()
        table = self.table()
        per_cluster, unscored = ocm.scores(table, sites)
        prices = {score: ocm.core_prices(table, sites.values(), capacity) for score, capacity in ocm.SCORES.items()}
        published_at = datetime.now(UTC).replace(microsecond=0)
        valid_until = published_at + self.valid_for
        for cluster, items in sorted(per_cluster.items()):
            site = sites[cluster]
            obj, status = ocm.placement_score(
                cluster,
                site,
                items,
                {score: by_site[site] for score, by_site in prices.items() if site in by_site},
                published_at=published_at,
                valid_until=valid_until,
                name=self.name,
            )
            self._apply(cluster, obj)
            head = {"apiVersion": obj["apiVersion"], "kind": obj["kind"]}
            meta = {"name": self.name, "namespace": cluster}
            self._apply(cluster, {**head, "metadata": meta, "status": status}, status_subresource=True)
        return Published(per_cluster, sites, notes + unscored, valid_until.strftime("%Y-%m-%dT%H:%M:%SZ"))

    def run(self, stop: threading.Event, every_s: float) -> None:
        """Publish every `every_s` seconds until stopped; a failed round is logged and retried."""
        while not stop.is_set():
            try:
                result = self.publish()
                log.info("published %d AddOnPlacementScores valid until %s", len(result.scores), result.valid_until)
                for note in result.notes:
                    log.warning("not scored: %s", note)
            except ApiException as exc:
                log.warning("publishing failed: %s %s", exc.status, exc.reason)
            stop.wait(every_s)

    def _apply(self, namespace: str, body: dict[str, Any], *, status_subresource: bool = False) -> None:
        call = (
            self.objects.patch_namespaced_custom_object_status
            if status_subresource
            else self.objects.patch_namespaced_custom_object
        )
        call(
            ocm.GROUP,
            ocm.VERSION,
            namespace,
            ocm.PLURAL,
            self.name,
            body,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type=APPLY,
        )
