"""Migration 0029: price refreshes stored in `pricing_jobs` become jobs of kind "price-refresh",
answered by GET /v1/pricing/jobs/{id} as before; one left running is failed as abandoned."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from broker.db.session import downgrade, migrate
from broker.jobs.price_refresh import PriceRefreshJobs
from broker.jobs.runner import fail_abandoned
from tests.integration.service_support import open_broker


@pytest.mark.both_backends
def test_pricing_jobs_stored_before_0028_are_price_refresh_jobs(db_url: str) -> None:
    downgrade(db_url, "0028")
    engine = sa.create_engine(db_url)
    insert = sa.text(
        "INSERT INTO pricing_jobs (id, kind, status, params, result, error, created_at, finished_at)"
        " VALUES (:id, 'price-refresh', :status, :params, :result, :error, CURRENT_TIMESTAMP, NULL)"
    )
    params = '{"provider": "azure", "regions": ["westeurope"], "endpoint": null}'
    with engine.begin() as c:
        c.execute(insert, {"id": "prj_done", "status": "failed", "params": params, "result": '{"providers": []}',
                           "error": "azure: feed down"})  # fmt: skip
        c.execute(insert, {"id": "prj_stuck", "status": "running", "params": params, "result": None, "error": None})
    engine.dispose()
    migrate(db_url)
    broker = open_broker(db_url)
    jobs = PriceRefreshJobs(broker.sessions)
    done = jobs.get("prj_done")
    assert done["status"] == "failed" and done["error"] == "azure: feed down"
    assert done["params"]["regions"] == ["westeurope"] and done["result"] == {"providers": []}
    assert jobs.get("prj_stuck")["status"] == "running"
    assert fail_abandoned(broker.sessions) == ["prj_stuck"]  # its process is gone
    assert jobs.get("prj_stuck")["status"] == "failed"
    with broker.engine.connect() as c:
        assert not sa.inspect(c).has_table("pricing_jobs")
    broker.engine.dispose()


@pytest.mark.both_backends
def test_price_refresh_jobs_go_back_to_pricing_jobs_on_downgrade(db_url: str) -> None:
    migrate(db_url)
    engine = sa.create_engine(db_url)
    with engine.begin() as c:
        c.execute(
            sa.text(
                "INSERT INTO jobs (id, tenant, kind, status, request, result, error, attempts, created_at)"
                " VALUES ('job_x', 'default', 'price-refresh', 'failed', :req, NULL, :err, 1, CURRENT_TIMESTAMP)"
            ),
            {"req": '{"provider": "gcp", "regions": [], "endpoint": null}', "err": '{"detail": "gcp: no"}'},
        )
    downgrade(db_url, "0028")
    with engine.connect() as c:
        row = c.execute(sa.text("SELECT status, error FROM pricing_jobs WHERE id = 'job_x'")).one()
        assert tuple(row) == ("failed", "gcp: no")
        assert c.execute(sa.text("SELECT count(*) FROM jobs WHERE kind = 'price-refresh'")).scalar() == 0
    engine.dispose()
    migrate(db_url)
