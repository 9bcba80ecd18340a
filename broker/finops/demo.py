"""Demo data for the dashboard: a few teams re-placing their services over the last weeks.

Each distinct request is solved for real against the catalog (dry run), then
stored as placements dated over the window, as a CI pipeline re-placing a
service on every merge would leave them.
"""

from __future__ import annotations

import copy
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from broker.app import Broker, parse_request
from broker.core.placement import Placement
from broker.db.session import transaction
from broker.finops.store import DEMO_WARNING
from broker.ids import new_placement_id
from broker.placements.store import PlacementStore

_EU = {"name": "eu-users", "lat": 50.11, "lon": 8.68}
_US = {"name": "us-users", "lat": 40.71, "lon": -74.0}
_ASIA = {"name": "asia-users", "lat": 1.35, "lon": 103.82}

# (tenant, request) — teams are the `team` label of each workload
DEMO_REQUESTS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "acme-retail",
        {
            "name": "checkout",
            "user_regions": [_EU],
            "workloads": [
                {
                    "name": "checkout-api",
                    "replicas": 6,
                    "cpu": 2,
                    "memory_gib": 4,
                    "residency": "gdpr-eu",
                    "latency_slo_ms": {"eu-users": 40},
                    "spread": {"min_sites": 2},
                    "capacity_types": ["ondemand", "spot"],
                    "labels": {"team": "payments"},
                },
                {
                    "name": "orders-db",
                    "replicas": 2,
                    "cpu": 4,
                    "memory_gib": 16,
                    "storage_gib": 200,
                    "storage_tier": "premium",
                    "residency": "gdpr-eu",
                    "spread": {"min_sites": 2},
                    "labels": {"team": "payments"},
                },
            ],
        },
    ),
    (
        "acme-retail",
        {
            "name": "storefront",
            "user_regions": [_US, _EU],
            "workloads": [
                {
                    "name": "web",
                    "replicas": 8,
                    "cpu": 1,
                    "memory_gib": 2,
                    "latency_slo_ms": {"us-users": 60},
                    "capacity_types": ["ondemand", "spot"],
                    "spread": {"min_sites": 2},
                    "labels": {"team": "web"},
                },
                {"name": "search", "replicas": 3, "cpu": 4, "memory_gib": 16, "labels": {"team": "search"}},
            ],
        },
    ),
    (
        "acme-media",
        {
            "name": "transcode",
            "user_regions": [_ASIA],
            "workloads": [
                {
                    "name": "transcoder",
                    "replicas": 10,
                    "cpu": 8,
                    "memory_gib": 16,
                    "capacity_types": ["spot", "ondemand"],
                    "arch": ["amd64", "arm64"],
                    "labels": {"team": "video"},
                },
                {
                    "name": "catalog-api",
                    "replicas": 3,
                    "cpu": 2,
                    "memory_gib": 8,
                    "latency_slo_ms": {"asia-users": 50},
                    "labels": {"team": "platform"},
                },
            ],
        },
    ),
)


def _scaled(doc: dict[str, Any], factor: float) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    for w in out["workloads"]:
        w["replicas"] = max(w.get("spread", {}).get("min_sites", 1), round(w["replicas"] * factor))
    return out


def seed_demo(
    broker: Broker, *, days: int = 30, per_service: int = 6, seed: int = 7, now: datetime | None = None
) -> list[str]:
    """Store `per_service` placements of each demo service over the last `days` days. Returns their ids."""
    rng = random.Random(seed)
    now = now or datetime.now(UTC)
    factors = (1.0, 1.5, 0.75)  # three sizes per service, each solved once
    solved: dict[tuple[str, float], Placement] = {}
    for _tenant, doc in DEMO_REQUESTS:
        for f in factors:
            req = parse_request({**_scaled(doc, f), "dry_run": True})
            placement, _ = broker.place(req)
            solved[(doc["name"], f)] = replace(placement, request=req.model_dump(mode="json") | {"dry_run": False})
    ids: list[str] = []
    with transaction(broker.sessions) as s:
        for tenant, doc in DEMO_REQUESTS:
            times = sorted(rng.uniform(0.5, days) for _ in range(per_service))
            for age in reversed(times):  # oldest first
                pid = new_placement_id()
                placement = solved[(doc["name"], rng.choice(factors))]
                created = now - timedelta(days=age)
                demo = replace(placement.result, warnings=(*placement.result.warnings, DEMO_WARNING))
                PlacementStore.add(s, replace(placement, id=pid, tenant=tenant, created_at=created, result=demo))
                ids.append(pid)
    return ids
