"""Two processes starting on one fresh database at once (the README's server beside a CLI command,
or the API's replicas) take turns to migrate it and load the catalog: both start, once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.integration.conftest import PG_SERVER, create_pg_database, drop_pg_database

pytestmark = pytest.mark.slow

START = "from broker.app import Broker; from broker.settings import Settings; Broker.open(Settings()).close()"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no table at all, as on a fresh machine."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'broker.db'}"
        return
    admin = request.getfixturevalue("pg_server")
    name = create_pg_database(admin)
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        drop_pg_database(admin, name)


def test_processes_starting_at_once_on_an_empty_database_take_turns(empty_database: str) -> None:
    env = {**os.environ, "BROKER_DATABASE_URL": empty_database}
    starts = [
        subprocess.Popen([sys.executable, "-c", START], env=env, stderr=subprocess.PIPE, text=True) for _ in range(3)
    ]
    errors = [p.communicate(timeout=300)[1] for p in starts]
    assert [p.returncode for p in starts] == [0, 0, 0], "\n".join(errors)
    engine = sa.create_engine(empty_database)
    with engine.connect() as c:
        assert c.scalar(sa.text("SELECT count(*) FROM catalog_meta WHERE key = 'version'")) == 1
        assert c.scalar(sa.text("SELECT count(*) FROM pools")) > 100_000  # the bundled catalog, loaded once
    engine.dispose()
