"""A placement maps onto its rows and back without loss; the response document is built from it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from broker.core.domain import NodeAssignment, NodeReplicas, PackingReport
from broker.core.placement import (
    BudgetFigure,
    Placement,
    PoolPrice,
    PriceSnapshot,
    ResourceSizing,
    SizingReport,
    WorkloadSizing,
)
from broker.db.placement_models import PlacementRow
from broker.placements.documents import placement_document
from tests.placements import assignment, placement

SPOT, OWNED = "aws:eu-central-1/m6i.large/spot", "private:fra-dc1/r740-std/reserved"
BASE = placement(
    [
        assignment("api", SPOT, 3, 0.25, breakdown={"compute": 0.2, "storage": 0.05}, binding=["residency:gdpr-eu"]),
        assignment("db", OWNED, 1, 0.5, latency_ms={"eu": 3.25}, margins={"eu": 36.75}),
    ],
    nodes=[(SPOT, 2, 0.25), (OWNED, 1, 0.5)],
    request={"name": "shop", "workloads": [{"name": "api", "replicas": 3}, {"name": "db", "replicas": 1}]},
    id="pl_ROWS",
    name="shop",
    tenant="acme",
    created_at=datetime(2026, 12, 4, 14, 3, 24, 26022, tzinfo=UTC),
    baseline_cost_per_hour=1.5,
)
PACKED = replace(
    BASE.result,
    node_assignments=(
        NodeAssignment(SPOT, 0, (NodeReplicas("api", 2, 0.5, 1.0),)),
        NodeAssignment(SPOT, 1, (NodeReplicas("api", 1, 0.5, 1.0),)),
        NodeAssignment(OWNED, 0, (NodeReplicas("db", 1, 4.0, 16.0, 1.0),)),
    ),
    packing=PackingReport(3, 3, 0.75, 0.5, 0, 2, 2, 0, 0, 3, 12),
)
FULL = replace(
    BASE,
    result=PACKED,
    latency_quantile="p95",
    price_as_of={"aws": "2026-07-05", "private": "2026-12-04T14:03:18+00:00"},
    prices=PriceSnapshot(
        catalog_version="741819385d364bbebb44796ba1277ce8",
        stale_after_days=30.0,
        pools={
            SPOT: PoolPrice(0.125, "aws", "2026-07-05", True),
            OWNED: PoolPrice(0.5, "tco-model", "2026-12-04", False),
        },
    ),
    rightsizing=SizingReport(
        workloads=(
            WorkloadSizing(
                "api",
                "inline",
                None,
                24.0,
                25.0,
                cpu=ResourceSizing(2.0, 0.75, 1.8, 1.8, -62.5, "fallback:weekly_median"),
                warnings=("cpu: fallback:weekly_median (no trained model or too little history)",),
            ),
        ),
        declared_cost_per_hour=None,
        cost_per_hour=0.75,
        savings_per_hour=None,
        savings_pct=None,
    ),
    budget=(
        BudgetFigure(None, 5000.0, 0.0, 547.5, 547.5, 4452.5, False),
        BudgetFigure("web", 100.0, 0.0, 547.5, 547.5, -447.5, True),
    ),
)


@pytest.mark.parametrize("p", [BASE, FULL], ids=["bare", "every-section"])
def test_rows_give_back_the_placement(p: Placement) -> None:
    row = PlacementRow.from_domain(p)
    assert PlacementRow.to_domain(row, row.children()) == p


def test_the_document_is_built_from_the_record() -> None:
    doc = placement_document(FULL)
    assert doc["created_at"] == "2026-12-04T14:03:24.026022+00:00" and doc["cost_per_month"] == 547.5
    assert doc["price_snapshot"]["stale_pools"] == [SPOT]
    assert doc["price_snapshot"]["pools"][OWNED] == {
        "price_per_hour": 0.5,
        "price_source": "tco-model",
        "price_as_of": "2026-12-04",
    }
    assert doc["rightsizing"]["workloads"][0]["memory_gib"] is None
    assert [b["team"] for b in doc["budget"]] == [None, "web"] and doc["budget"][1]["over"] is True
    assert placement_document(BASE)["price_snapshot"] is None and placement_document(BASE)["budget"] is None
    assert doc["latency_quantile"] == "p95" and doc["assignments"][1]["latency_slo_margin_ms"] == {"eu": 36.75}
    assert [(n["pool"], n["node"]) for n in doc["node_assignments"]] == [(SPOT, 0), (SPOT, 1), (OWNED, 0)]
    assert doc["node_assignments"][2]["replicas"] == [
        {"workload": "db", "replicas": 1, "cpu": 4.0, "memory_gib": 16.0, "gpus": 1.0}
    ]
    assert doc["packing"]["aggregate_nodes"] == 3 and doc["packing"]["packing_ms"] == 12


def test_a_placement_stored_before_packing_reads_back_without_its_fields() -> None:
    """Extension fields are left out when empty: stored documents read back exactly as before."""
    doc = placement_document(BASE)
    assert "node_assignments" not in doc and "packing" not in doc
    row = PlacementRow.from_domain(BASE)
    assert all(r.node_replicas is None for r in row.pools) and row.packing is None


def test_a_dry_run_has_no_rows() -> None:
    with pytest.raises(ValueError, match="stored placement"):
        PlacementRow.from_domain(replace(BASE, id=None))


def test_a_price_snapshot_prices_only_provisioned_pools() -> None:
    stray = PriceSnapshot("v", 30.0, {"aws:us-east-1/m6i.large/ondemand": PoolPrice(0.1, "aws", "2026-07-05", False)})
    with pytest.raises(ValueError, match="does not provision"):
        replace(BASE, prices=stray)
