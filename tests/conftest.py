"""Shared fixtures.

Loading the full catalog (~190k pools) takes seconds, so one SQLite template
database is built per test session and copied for each test that writes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from broker.app import Broker
from broker.settings import Settings
from tests import services

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
MAX_WORKERS = 4

# Hypothesis' per-example deadline (200 ms) and its too-slow health check judge the machine's
# load, not the code: off for every property test (a test's own @settings adds to this profile)
hypothesis_settings.register_profile("broker", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("broker")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--postgres",
        action="store_true",
        help="run every database-facing integration test on PostgreSQL too (tests/integration/conftest.py)",
    )


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): one worker per core, at most MAX_WORKERS (each worker holds
    its own copy of the catalog, about 1 GiB, and starts its own PostgreSQL and Redis when a test
    needs them). PYTEST_XDIST_AUTO_NUM_WORKERS overrides it; `-n 0` runs in one process."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))


@pytest.fixture(scope="session", autouse=True)
def _isolated_catalog_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep this run's on-disk catalog cache and the default data dir (the CLI's SQLite database
    when no URL is set) away from the user's and from other runs' and workers'."""
    mp = pytest.MonkeyPatch()
    mp.setenv("BROKER_CATALOG_CACHE_DIR", str(tmp_path_factory.mktemp("catalog-cache")))
    mp.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A database on the tests' PostgreSQL server: `BROKER_TEST_POSTGRES_URL`, or a server started for
    this session (tests/services.py). Tests create and drop databases of their own there."""
    with services.postgres_url() as url:
        yield url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The tests' Redis: `BROKER_TEST_REDIS_URL`, or a server started for this session (tests/services.py)."""
    with services.redis_url() as url:
        yield url


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "broker.db"
    Broker.open(Settings(database_url=f"sqlite:///{path}"))  # migrates and loads the snapshot
    return path


@pytest.fixture(scope="session")
def shared_broker(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Broker:
    """A read-mostly broker on its own copy of the catalog, shared by the whole session."""
    path = tmp_path_factory.mktemp("shared") / "broker.db"
    shutil.copy(template_db, path)
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}"))
    broker.catalog()  # warm the in-memory catalog once
    return broker


@pytest.fixture()
def db_url(template_db: Path, tmp_path: Path) -> str:
    """A fresh database (catalog loaded) for a test that writes."""
    path = tmp_path / "broker.db"
    shutil.copy(template_db, path)
    return f"sqlite:///{path}"


@pytest.fixture()
def broker(db_url: str) -> Broker:
    return Broker.open(Settings(database_url=db_url))


@pytest.fixture()
def client(broker: Broker) -> Iterator[TestClient]:
    from api.app import create_app

    with TestClient(create_app(broker=broker)) as c:
        yield c


@pytest.fixture(scope="session")
def shared_client(shared_broker: Broker) -> Iterator[TestClient]:
    from api.app import create_app

    with TestClient(create_app(broker=shared_broker)) as c:
        yield c
