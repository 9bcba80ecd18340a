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

from tests.integration.conftest import empty_database

pytestmark = pytest.mark.slow

START = "from broker.app import Broker; from broker.settings import Settings; Broker.open(Settings()).close()"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with empty_database(request.param, request, tmp_path) as url:
        yield url


def test_processes_starting_at_once_on_an_empty_database_take_turns(empty_db: str) -> None:
    env = {**os.environ, "BROKER_DATABASE_URL": empty_db}
    starts = [
        subprocess.Popen([sys.executable, "-c", START], env=env, stderr=subprocess.PIPE, text=True) for _ in range(3)
    ]
    errors = [p.communicate(timeout=300)[1] for p in starts]
    assert [p.returncode for p in starts] == [0, 0, 0], "\n".join(errors)
    engine = sa.create_engine(empty_db)
    with engine.connect() as c:
        assert c.scalar(sa.text("SELECT count(*) FROM catalog_meta WHERE key = 'version'")) == 1
        assert c.scalar(sa.text("SELECT count(*) FROM pools")) > 100_000  # the bundled catalog, loaded once
    engine.dispose()
