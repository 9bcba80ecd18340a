"""Builds the integration objects from the store and the catalog (the I/O edge of broker.integrations)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select

from broker.app import Broker
from broker.catalog.prices import COMMITTED, list_discounts
from broker.db.models import PoolRow
from broker.dispatch.clusters import list_clusters
from broker.dispatch.manifests import site_region
from broker.errors import InvalidRequest
from broker.integrations.karmada import UnservedSites, propagation_policies
from broker.integrations.karpenter import KARPENTER_PROVIDERS, Commitment, commitment_overlays, discount_overlays
from pricing.discounts import DiscountRule


def node_overlays(broker: Broker, *, provider: str, commitments: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """Karpenter NodeOverlays for one provider: (overlays, notes on rules that produced none)."""
    if provider not in KARPENTER_PROVIDERS:
        raise InvalidRequest(
            f"Karpenter runs on {' and '.join(KARPENTER_PROVIDERS)}, not {provider!r}",
            errors=[{"loc": ["query", "provider"], "msg": f"one of {', '.join(KARPENTER_PROVIDERS)}"}],
        )
    table = broker.catalog().table
    # regions only: a Local or Wavelength Zone's nodes carry their parent region's label
    regions = {s.id: s.region for s in table.sites if s.provider == provider and site_region(s.id) == s.region}
    types_by_region: dict[str, set[str]] = defaultdict(set)
    for site, instance_type in zip(table.pools.column("site"), table.pools.column("instance_type"), strict=True):
        if site in regions:
            types_by_region[regions[site]].add(instance_type)
    rules = [
        (
            d["id"],
            DiscountRule(d["provider"], d["discount_pct"], d["family"], d["region"], frozenset(d["capacity_types"])),
        )
        for d in list_discounts(broker.sessions)
        if d["provider"] == provider
    ]
    overlays, notes = discount_overlays(rules, types_by_region)
    if commitments:
        with broker.sessions() as s:
            rows = s.scalars(
                select(PoolRow).where(PoolRow.price_source == COMMITTED, PoolRow.site.like(f"{provider}:%"))
            ).all()
            bought = [
                Commitment(r.site.partition(":")[2], r.instance_type, r.price_per_hour, int(r.max_nodes or 0))
                for r in rows
            ]
        overlays += commitment_overlays(provider, bought)
    return overlays, notes


def karmada_policies(
    broker: Broker, placement_id: str, *, tenant: str, namespace: str, members: list[str]
) -> list[dict[str, Any]]:
    """PropagationPolicies for a stored placement; members are SITE=CLUSTER, else the registered clusters."""
    placement = broker.get_placement(placement_id, tenant=tenant)
    by_site: dict[str, list[str]] = defaultdict(list)
    for i, item in enumerate(members):
        site, sep, cluster = item.rpartition("=")
        if not sep or not site or not cluster:
            raise InvalidRequest(
                f"member {item!r} is not SITE=CLUSTER", errors=[{"loc": ["query", "member", i], "msg": "SITE=CLUSTER"}]
            )
        by_site[site].append(cluster)
    if not members:
        for c in list_clusters(broker.sessions, tenant=tenant):
            by_site[c.site].append(c.name)
    try:
        return propagation_policies(placement_id, placement.result.assignments, by_site, namespace=namespace)
    except UnservedSites as exc:
        raise InvalidRequest(
            str(exc), errors=[{"loc": ["query", "member"], "msg": f"no cluster for {', '.join(exc.sites)}"}]
        ) from exc
