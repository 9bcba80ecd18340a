"""The catalog's storage matrix [site, tier]: per-provider prices, overridden per site by live feeds."""

from __future__ import annotations

import pytest

from broker.catalog.store import read_catalog
from broker.db.models import LatencyRow, PoolRow, SiteRow, StoragePriceRow
from broker.db.price_models import SiteStoragePriceRow
from broker.db.session import make_engine, migrate, session_factory, transaction
from broker.solver.problem import STORAGE_TIERS


@pytest.fixture()
def tiny(tmp_path):
    """A migrated database with three AWS regions only: building the full catalog would take seconds."""
    url = f"sqlite:///{tmp_path / 'tiny.db'}"
    migrate(url)
    factory = session_factory(make_engine(url))
    with transaction(factory) as s:
        for region, lat in (("eu-central-1", 50.1), ("eu-west-1", 53.3), ("eu-west-3", 48.9)):
            s.add(
                SiteRow(
                    id=f"aws:{region}",
                    provider="aws",
                    kind="public",
                    region=region,
                    country="DE",
                    jurisdictions=["EU", "EEA", "DE"],
                    lat=lat,
                    lon=8.7,
                )
            )
            s.flush()  # the pool's foreign key needs its site row first
            s.add(
                PoolRow(
                    id=f"aws:{region}/m6i.xlarge/ondemand",
                    site=f"aws:{region}",
                    instance_type="m6i.xlarge",
                    capacity_type="ondemand",
                    arch="amd64",
                    vcpus=4,
                    memory_gib=16,
                    gpus=0,
                    price_per_hour=0.2,
                    price_source="aws",
                    price_as_of="2026-07-05",
                )
            )
        for a, b, rtt in (("central-1", "west-1", 22.0), ("central-1", "west-3", 9.0), ("west-1", "west-3", 17.0)):
            s.add(LatencyRow(src=f"aws:eu-{a}", dst=f"aws:eu-{b}", rtt_ms=rtt, statistic="p50", source="test"))
        for tier, price in (("standard", 0.045), ("ssd", 0.08), ("premium", 0.125)):
            s.add(StoragePriceRow(provider="aws", tier=tier, usd_per_gb_month=price, product="", source=""))
        s.add(
            SiteStoragePriceRow(
                site="aws:eu-central-1",
                tier="ssd",
                usd_per_gb_month=0.0952,
                product="EBS gp3",
                source="aws",
                as_of="2026-12-02",
            )
        )
    return factory


def test_site_storage_price_overrides_the_provider_price_for_that_site_only(tiny):
    cat = read_catalog(tiny)
    col = {t.value: i for i, t in enumerate(STORAGE_TIERS)}
    fra, dub = cat.table.site_index["aws:eu-central-1"], cat.table.site_index["aws:eu-west-1"]
    assert cat.storage[fra, col["ssd"]] == pytest.approx(0.0952)
    assert cat.storage[fra, col["premium"]] == pytest.approx(0.125)
    assert cat.storage[dub, col["ssd"]] == pytest.approx(0.08)
