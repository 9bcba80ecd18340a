"""The service on the real PostgreSQL (127.0.0.1:5432, database `test`, trust auth) and on SQLite.

Loading the full 190k-pool catalog into PostgreSQL takes about two minutes, so the
PostgreSQL database gets the SQLite template's rows with the pools of a few EU
AWS regions only: every other table is copied whole, the code paths are the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, select, text

import broker.db.registry  # noqa: F401  (every table)
from broker.db.models import Base
from broker.db.session import downgrade, migrate
from broker.services import Broker
from tests.integration.service_support import key, open_broker, service_client, small_request

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
SUBSET_SITES = ("aws:eu-central-1", "aws:eu-west-1", "aws:eu-north-1")
SERVICE_TABLES = {"api_keys", "budgets", "budget_commitments", "jobs", "idempotency_keys"}


@pytest.fixture(scope="module")
def pg_server() -> Iterator[Any]:
    engine = create_engine(f"{PG_SERVER}/test", isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(text("select 1"))
    yield engine
    engine.dispose()


def _new_pg_database(server: Any) -> str:
    name = f"broker_t_{uuid.uuid4().hex[:10]}"
    with server.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    return name


def _drop(server: Any, name: str) -> None:
    with server.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _copy_catalog_subset(sqlite_path: Path, pg_url: str) -> None:
    src = create_engine(f"sqlite:///{sqlite_path}")
    dst = create_engine(pg_url)
    with src.connect() as s, dst.begin() as d:
        for table in Base.metadata.sorted_tables:
            q = select(table)
            if table.name == "pools":
                q = q.where(table.c.site.in_(SUBSET_SITES))
            rows = [dict(r) for r in s.execute(q).mappings()]
            if table.name == "catalog_meta":  # other content: another version, not the cached one
                rows = [{**r, "value": uuid.uuid4().hex} if r["key"] == "version" else r for r in rows]
            for i in range(0, len(rows), 5000):
                d.execute(table.insert(), rows[i : i + 5000])
    src.dispose()
    dst.dispose()


@pytest.fixture(scope="module")
def pg_url(pg_server: Any, template_db: Path) -> Iterator[str]:
    name = _new_pg_database(pg_server)
    url = f"{PG_SERVER}/{name}"
    try:
        migrate(url)
        _copy_catalog_subset(template_db, url)
        yield url
    finally:
        _drop(pg_server, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(request.getfixturevalue("db_url"))
    return str(request.getfixturevalue("pg_url"))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_alembic_upgrade_to_heads_and_downgrade_to_base(backend: str, pg_server: Any, tmp_path: Path) -> None:
    if backend == "sqlite":
        url, name = f"sqlite:///{tmp_path / 'mig.db'}", None
    else:
        name = _new_pg_database(pg_server)
        url = f"{PG_SERVER}/{name}"
    try:
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
    finally:
        if name:
            _drop(pg_server, name)


def test_service_end_to_end(any_db: str) -> None:
    """Keys, tenant isolation, budgets, idempotency and an async job on each database."""
    b: Broker = open_broker(any_db, auth="required")
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
        import time

        for _ in range(400):
            state = c.get(job.headers["location"], headers=a).json()
            if state["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.05)
        assert state["status"] == "succeeded", state
        assert c.get(job.headers["location"], headers=other).status_code == 404
