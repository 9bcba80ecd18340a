"""FOCUS 1.2 price columns under a negotiated discount: ListUnitPrice is the public on-demand
list price, ContractedUnitPrice the negotiated one (commitments excluded), on a real catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from broker.app import Broker
from broker.catalog.prices import add_discount
from broker.db.price_models import ListPriceRow
from broker.finops.service import FinOps
from broker.settings import Settings

REQUEST = {
    "name": "discounted",
    "workloads": [
        {"name": "api", "replicas": 3, "cpu": 2, "memory_gib": 4, "providers": ["aws"], "capacity_types": ["ondemand"]}
    ],
}


@pytest.fixture()
def broker(template_db: Path, tmp_path: Path) -> Broker:
    path = tmp_path / "broker.db"
    shutil.copy(template_db, path)
    return Broker.open(Settings(database_url=f"sqlite:///{path}"))


def test_list_unit_price_is_the_public_price_not_the_negotiated_one(broker: Broker) -> None:
    add_discount(broker.sessions, provider="aws", discount_pct=20.0, capacity_types=["ondemand"])
    _placement, stored = broker.place(REQUEST)
    assert stored
    rows = [r for r in FinOps(broker).focus(tenant="default") if r["PricingCategory"] == "Standard"]
    compute = [r for r in rows if r["ServiceCategory"] == "Compute"]
    assert compute
    for r in compute:
        with broker.sessions() as s:
            public = s.get(ListPriceRow, r["SkuPriceId"])
        assert public is not None  # the feed's price, kept when the rule re-priced the pool
        assert float(r["ListUnitPrice"]) == pytest.approx(public.price_per_hour)
        # the negotiated price: what is paid on demand, 20 % below the list price
        assert float(r["ContractedUnitPrice"]) == pytest.approx(public.price_per_hour * 0.8, rel=1e-6)
        assert float(r["ListCost"]) > float(r["EffectiveCost"])
