"""Database backends for the integration tests: SQLite always, the real PostgreSQL too.

Every test that takes `db_url` (directly or through `broker`/`client`) gets a fresh
database with the catalog loaded. It runs on SQLite, and also on PostgreSQL
(127.0.0.1:5432, trust auth) when

* it is marked `@pytest.mark.both_backends` (the curated service subset: API,
  tenancy, budgets, idempotency, jobs, usage, dispatch outbox), or
* pytest runs with `--postgres` (every database-facing integration test).

Each PostgreSQL test gets its own database, cloned (`CREATE DATABASE … TEMPLATE`,
a file copy) from one template per session, and dropped afterwards. The template
holds every table of the SQLite template but only the pools of a few EU AWS
regions: loading all 190k pools takes ~15 s even with COPY, and the code paths
are the same. A test that needs the whole catalog on PostgreSQL loads it itself.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, select, text

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
SUBSET_SITES = ("aws:eu-central-1", "aws:eu-west-1", "aws:eu-north-1", "aws:eu-west-3")
BACKENDS = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_backends: run on SQLite and on PostgreSQL (tests/integration/conftest.py)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "db_backend" not in metafunc.fixturenames:
        return
    if any(m.name == "parametrize" and "db_backend" in str(m.args[0]) for m in metafunc.definition.iter_markers()):
        return
    if metafunc.config.getoption("--postgres", False) or metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize(
            "db_backend",
            [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.postgres)],
            indirect=True,
            scope="function",
        )


@pytest.fixture()
def db_backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


# ---- PostgreSQL ---------------------------------------------------------------------------


def pg_admin() -> Engine:
    engine = create_engine(f"{PG_SERVER}/test", isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as c:
            c.execute(text("select 1"))
    except Exception as exc:  # a clear message instead of a connection traceback per test
        raise RuntimeError("PostgreSQL at 127.0.0.1:5432 is not reachable (`.ci/run` starts it)") from exc
    return engine


def create_pg_database(admin: Engine, *, template: str | None = None) -> str:
    name = f"broker_t_{uuid.uuid4().hex[:12]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    return name


def drop_pg_database(admin: Engine, name: str) -> None:
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def copy_catalog_subset(sqlite_path: Path, pg_url: str, sites: tuple[str, ...] = SUBSET_SITES) -> None:
    """Every row of the SQLite template, except pools outside `sites`, into a migrated PostgreSQL database."""
    import broker.db.registry  # noqa: F401  (every table)
    from broker.db.models import Base

    src, dst = create_engine(f"sqlite:///{sqlite_path}"), create_engine(pg_url)
    try:
        with src.connect() as s, dst.begin() as d:
            for table in Base.metadata.sorted_tables:
                q = select(table)
                if table.name == "pools":
                    q = q.where(table.c.site.in_(sites))
                rows = [dict(r) for r in s.execute(q).mappings()]
                if table.name == "catalog_meta":  # other content: another version than the SQLite one
                    rows = [{**r, "value": uuid.uuid4().hex} if r["key"] == "version" else r for r in rows]
                for i in range(0, len(rows), 5000):
                    d.execute(table.insert(), rows[i : i + 5000])
    finally:
        src.dispose()
        dst.dispose()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Engine]:
    admin = pg_admin()
    yield admin
    admin.dispose()


@pytest.fixture(scope="session")
def pg_template(pg_server: Engine, template_db: Path) -> Iterator[str]:
    """A migrated PostgreSQL database with the catalog subset, cloned by every PostgreSQL test."""
    from broker.db.session import migrate

    name = create_pg_database(pg_server)
    try:
        url = f"{PG_SERVER}/{name}"
        migrate(url)
        copy_catalog_subset(template_db, url)
        yield name
    finally:
        drop_pg_database(pg_server, name)


@contextmanager
def fresh_database(backend: str, request: pytest.FixtureRequest, tmp_dir: Path) -> Iterator[str]:
    """A database URL of its own, catalog loaded, removed afterwards (PostgreSQL)."""
    if backend == "sqlite":
        path = tmp_dir / "broker.db"
        shutil.copy(request.getfixturevalue("template_db"), path)
        yield f"sqlite:///{path}"
        return
    admin: Engine = request.getfixturevalue("pg_server")
    name = create_pg_database(admin, template=request.getfixturevalue("pg_template"))
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        drop_pg_database(admin, name)


@pytest.fixture()
def db_url(db_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database (catalog loaded) for a test that writes, on the test's backend."""
    with fresh_database(db_backend, request, tmp_path) as url:
        yield url


def is_postgres(url: Any) -> bool:
    return str(url).startswith("postgresql")
