"""Database backends for the integration tests: SQLite always, the real PostgreSQL too.

Every test that takes `db_url` (directly or through `broker`/`client`) gets a fresh
database with the catalog loaded. It runs on SQLite, and also on PostgreSQL (the server
`BROKER_TEST_POSTGRES_URL` names, or one the session starts: tests/services.py) when

* it is marked `@pytest.mark.both_backends` (the curated service subset: API,
  tenancy, budgets, idempotency, jobs, usage, dispatch outbox), or
* pytest runs with `--postgres` (every database-facing integration test; a module that
  shares one seeded database takes `module_db_url` and runs once per backend).

Each PostgreSQL test gets its own database, cloned (`CREATE DATABASE … TEMPLATE`,
~0.8 s) from one template per session, and dropped afterwards. The template is built
the way a server builds its database (`Broker.open`: Alembic to heads, then the whole
catalog by COPY, ~8 s), so both backends hold the same 190k pools and every test
sees the same catalog on either.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text

from tests.services import POSTGRES_URL_VAR

BACKENDS = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_backends: run on SQLite and on PostgreSQL (tests/integration/conftest.py)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "module_db_backend" in metafunc.fixturenames and metafunc.config.getoption("--postgres", False):
        metafunc.parametrize(
            "module_db_backend",
            [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.postgres)],
            indirect=True,
            scope="module",
        )
    if "db_backend" not in metafunc.fixturenames:
        return
    if any(m.name == "parametrize" and "db_backend" in str(m.args[0]) for m in metafunc.definition.iter_markers()):
        return
    if metafunc.config.getoption("--postgres", False) or metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize(
            "db_backend",
            [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.postgres)],
            indirect=True,
            scope="session",  # group by backend: one catalog in memory at a time, not one per switch
        )


@pytest.fixture()
def db_backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


# ---- PostgreSQL ---------------------------------------------------------------------------


def pg_admin(url: str) -> Engine:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as c:
            c.execute(text("select 1"))
    except Exception as exc:  # a clear message instead of a connection traceback per test
        where = engine.url.render_as_string(hide_password=True)
        raise RuntimeError(f"the tests' PostgreSQL at {where} is not reachable ({POSTGRES_URL_VAR})") from exc
    return engine


def pg_database_url(admin: Engine, name: str) -> str:
    """The URL of database `name` on the admin connection's server."""
    return admin.url.set(database=name).render_as_string(hide_password=False)


def create_pg_database(admin: Engine, *, template: str | None = None) -> str:
    name = f"broker_t_{uuid.uuid4().hex[:12]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    return name


def drop_pg_database(admin: Engine, name: str) -> None:
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def pg_server(postgres_url: str) -> Iterator[Engine]:
    admin = pg_admin(postgres_url)
    yield admin
    admin.dispose()


@pytest.fixture(scope="session")
def pg_template(pg_server: Engine) -> Iterator[str]:
    """A PostgreSQL database migrated and loaded like a server's first start, cloned by every test."""
    from broker.app import Broker
    from broker.settings import Settings

    name = create_pg_database(pg_server)
    try:
        Broker.open(Settings(database_url=pg_database_url(pg_server, name))).engine.dispose()
        yield name
    finally:
        drop_pg_database(pg_server, name)


@contextmanager
def empty_database(backend: str, request: pytest.FixtureRequest, tmp_dir: Path) -> Iterator[str]:
    """A database URL with no table at all, as on a fresh machine, removed afterwards (PostgreSQL)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_dir / 'empty.db'}"
        return
    admin: Engine = request.getfixturevalue("pg_server")
    name = create_pg_database(admin)
    try:
        yield pg_database_url(admin, name)
    finally:
        drop_pg_database(admin, name)


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
        yield pg_database_url(admin, name)
    finally:
        drop_pg_database(admin, name)


@pytest.fixture()
def db_url(db_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database (catalog loaded) for a test that writes, on the test's backend."""
    with fresh_database(db_backend, request, tmp_path) as url:
        yield url


@pytest.fixture(scope="module")
def module_db_backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="module")
def module_db_url(
    module_db_backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One database (catalog loaded) that a module's tests share, seeded once: SQLite, and with
    `--postgres` PostgreSQL as well (the module runs once per backend)."""
    with fresh_database(module_db_backend, request, tmp_path_factory.mktemp("module-db")) as url:
        yield url


def is_postgres(url: Any) -> bool:
    return str(url).startswith("postgresql")


@pytest.fixture()
def env(db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's database for CLI commands run in process (they read BROKER_DATABASE_URL)."""
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    return db_url


@pytest.fixture()
def server_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The operator's path roots and the data dir inside the test's tmp dir, as a deployment sets them.

    Tests that register kubeconfig files or GitOps work trees under tmp_path use it
    (`pytest.mark.usefixtures("server_roots")`): paths outside BROKER_SERVER_PATH_ROOTS are refused.
    """
    monkeypatch.setenv("BROKER_SERVER_PATH_ROOTS", f'["{tmp_path}"]')
    monkeypatch.setenv("BROKER_DATA_DIR", str(tmp_path / "data"))
    return tmp_path
