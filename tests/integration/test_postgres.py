"""PostgreSQL specifics: Alembic both ways on both databases, the COPY catalog loader, the service end to end.

The fixtures (a database per test, cloned from a per-session template) are in
tests/integration/conftest.py; the curated service tests run on both databases
through `@pytest.mark.both_backends`, and `pytest --postgres` runs every
database-facing integration test on both.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, func, inspect, select

import broker.db.registry  # noqa: F401  (every table)
from broker.app import Broker
from broker.catalog import store as catalog
from broker.db.models import Base, PoolRow
from broker.db.session import downgrade, make_engine, migrate, session_factory
from tests.integration.conftest import create_pg_database, drop_pg_database, empty_database, pg_database_url
from tests.integration.service_support import key, open_broker, service_client, small_request

SERVICE_TABLES = {"api_keys", "budgets", "budget_commitments", "jobs", "idempotency_keys"}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_alembic_upgrade_to_heads_and_downgrade_to_base(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with empty_database(backend, request, tmp_path) as url:
        migrate(url)
        engine = create_engine(url)
        tables = set(inspect(engine).get_table_names())
        assert SERVICE_TABLES | {"placements", "pools", "sites"} <= tables
        assert {t.name for t in Base.metadata.sorted_tables} <= tables  # every model has a migration
        downgrade(url, "base")
        left = set(inspect(engine).get_table_names()) - {"alembic_version"}
        assert left == set()
        migrate(url)  # and up again on the emptied database
        assert set(inspect(engine).get_table_names()) >= SERVICE_TABLES
        engine.dispose()


def test_copy_loader_reloads_the_catalog_on_postgresql(pg_server: Engine, pg_template: str, template_db: Path) -> None:
    """The session's template was loaded by COPY; loading again replaces, never duplicates, and the rows
    (strings, floats, NULLs) are those the INSERT loader wrote into SQLite."""
    name = create_pg_database(pg_server, template=pg_template)
    url = pg_database_url(pg_server, name)
    try:
        engine = make_engine(url)
        factory = session_factory(engine)
        count = select(func.count()).select_from(PoolRow)
        with engine.connect() as pg:
            before = pg.scalar(count)
        again = catalog.load_snapshot(factory)
        assert again["pools"] == before > 150_000
        sqlite = create_engine(f"sqlite:///{template_db}")
        cols = [c for c in PoolRow.__table__.columns]
        probe = select(*cols).order_by(PoolRow.id).offset(12_345).limit(50)
        nulls = select(func.count()).select_from(PoolRow).where(PoolRow.gpu_model.is_(None))
        with engine.connect() as pg, sqlite.connect() as lite:
            assert pg.scalar(count) == lite.scalar(count) == before
            assert list(pg.execute(probe)) == list(lite.execute(probe))
            assert pg.scalar(nulls) == lite.scalar(nulls) > 0
        sqlite.dispose()
        engine.dispose()
    finally:
        drop_pg_database(pg_server, name)


@pytest.mark.both_backends
def test_service_end_to_end(db_url: str) -> None:
    """Keys, tenant isolation, budgets, idempotency and an async job on each database."""
    b: Broker = open_broker(db_url, auth="required")
    with service_client(b) as c:
        a, other = key(b, f"alpha-{uuid.uuid4().hex[:6]}"), key(b, f"beta-{uuid.uuid4().hex[:6]}")
        h = {**a, "Idempotency-Key": uuid.uuid4().hex}
        first = c.post("/v1/placements", json=small_request("pg-web"), headers=h)
        assert first.status_code == 201, first.text
        assert c.post("/v1/placements", json=small_request("pg-web"), headers=h).json() == first.json()
        pid = first.json()["id"]
        assert c.get(f"/v1/placements/{pid}", headers=a).status_code == 200
        assert c.get(f"/v1/placements/{pid}", headers=other).status_code == 404
        assert c.get("/v1/placements", headers=a).json()["total"] == 1

        monthly = first.json()["cost_per_hour"] * 730
        c.put("/v1/budgets", json={"monthly_usd": round(monthly * 1.5, 2)}, headers=a)
        over = c.post("/v1/placements", json=small_request("pg-batch"), headers=a)
        assert over.status_code == 422 and over.json()["budget"]["over"]

        job = c.post(
            "/v1/placements", json=small_request("pg-job", allow_over_budget=True, **{"async": True}), headers=a
        )
        assert job.status_code == 202
        for _ in range(400):
            state = c.get(job.headers["location"], headers=a).json()
            if state["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.05)
        assert state["status"] == "succeeded", state
        assert c.get(job.headers["location"], headers=other).status_code == 404


def test_an_unanswering_database_server_fails_within_the_connect_timeout() -> None:
    """A server that accepts TCP but never answers (packets dropped, server hung) must not block forever."""
    import socket

    from sqlalchemy.exc import OperationalError

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        engine = make_engine(f"postgresql+psycopg://postgres@127.0.0.1:{port}/test", connect_timeout_s=1)
        started = time.perf_counter()
        with pytest.raises(OperationalError), engine.connect():
            pass
        assert time.perf_counter() - started < 10
        engine.dispose()
