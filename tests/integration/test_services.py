"""The tests' own servers (tests/services.py): started from the dev extra's wheels on a free port,
gone with their files at the end; a server the operator names is used as it is, nothing started."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest
from redis import Redis
from sqlalchemy import create_engine, make_url, text

from tests import services


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _dirs(prefix: str) -> set[Path]:
    """This process's server directories (other xdist workers make theirs at the same time)."""
    mine = str(os.getpid())
    out = set()
    for d in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        owner = d / services.OWNER_FILE
        if owner.exists() and owner.read_text() == mine:
            out.add(d)
    return out


def test_the_embedded_postgresql_serves_and_is_gone_afterwards() -> None:
    before = _dirs("broker-test-pg-")
    with services.embedded_postgres() as url:
        made = _dirs("broker-test-pg-") - before
        assert len(made) == 1
        engine = create_engine(url)
        with engine.connect() as c:
            assert str(c.execute(text("select version()")).scalar()).startswith("PostgreSQL 18")
            assert c.execute(text("select current_setting('fsync')")).scalar() == "off"
        engine.dispose()
        port = make_url(url).port
        assert make_url(url).host == "127.0.0.1" and port is not None
    assert _refused(port)
    assert not any(d.exists() for d in made)


def test_the_embedded_redis_serves_and_is_gone_afterwards() -> None:
    before = _dirs("broker-test-redis-")
    with services.embedded_redis() as url:
        made = _dirs("broker-test-redis-") - before
        conn = Redis.from_url(url)
        assert conn.ping() and conn.info("server")["redis_version"].startswith("6.2")
        conn.close()
        port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert _refused(port)
    assert not any(d.exists() for d in made)


@pytest.mark.parametrize(
    ("var", "given", "which"),
    [
        (services.POSTGRES_URL_VAR, "postgresql+psycopg://u@db.example:5432/x", services.postgres_url),
        (services.REDIS_URL_VAR, "redis://cache.example:6379/3", services.redis_url),
    ],
)
def test_a_server_the_operator_names_is_used_and_none_started(
    var: str, given: str, which: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(var, given)
    before = _dirs("broker-test-")
    with which() as url:  # type: ignore[operator]
        assert url == given
        assert _dirs("broker-test-") == before
