"""Migration 0021: a forecast model stored before models had a tenant becomes the default tenant's
(`broker forecast train` read only the default tenant's usage), and forecasts for it alone."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from broker.db.session import downgrade, migrate
from broker.usage.service import UsageStore
from tests.integration.service_support import open_broker


@pytest.mark.both_backends
def test_a_model_stored_before_0021_is_the_default_tenants(db_url: str) -> None:
    downgrade(db_url, "0020")
    engine = sa.create_engine(db_url)
    with engine.begin() as c:
        c.execute(
            sa.text(
                "INSERT INTO forecast_models (created_at, metric, horizon, step_s, n_series, train_rows,"
                " description, metrics, booster) VALUES (CURRENT_TIMESTAMP, 'cpu', 288, 300, 1, 10, '{}', '{}', :b)"
            ),
            {"b": b"\x00"},
        )
    engine.dispose()
    migrate(db_url)
    broker = open_broker(db_url)
    store = UsageStore(broker.sessions)
    (model,) = store.list_models()
    assert model["tenant"] == "default" and model["metric"] == "cpu"
    assert store.list_models(tenant="alpha") == []
    broker.engine.dispose()
