"""`broker worker --check`, the worker container's healthcheck: exit 0 only while a worker of this
host has a live rq heartbeat on the broker's queue in Redis (`rq info` printed "0 workers" and
exited 0, so the check always passed)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from redis import Redis
from rq import Queue, SimpleWorker
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.main import app
from tests.integration.test_compose import REPO

runner = CliRunner()


@pytest.fixture()
def queue(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Queue]:
    name = f"check-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("BROKER_REDIS_URL", redis_url)
    monkeypatch.setenv("BROKER_QUEUE_NAME", name)
    conn = Redis.from_url(redis_url)
    yield Queue(name, connection=conn)
    for k in conn.scan_iter(f"rq:*{name}*"):
        conn.delete(k)
    conn.close()


def _check() -> Any:
    return runner.invoke(app, ["worker", "--check"])


def _worker(queue: Queue, **attrs: Any) -> SimpleWorker:
    w = SimpleWorker([queue], connection=queue.connection, worker_ttl=60)
    for k, v in attrs.items():
        setattr(w, k, v)
    w.register_birth()  # what `broker worker` does when it starts, heartbeat included
    return w


def test_no_worker_fails_the_check(queue: Queue) -> None:
    r = _check()
    assert r.exit_code == EXIT_FAILED and "no worker" in r.stderr and queue.name in r.stderr


def test_a_live_worker_of_this_host_passes_and_a_dead_one_fails(queue: Queue) -> None:
    w = _worker(queue)
    try:
        r = _check()
        assert r.exit_code == 0, r.output
        assert w.name in r.stdout
    finally:
        w.register_death()
    assert _check().exit_code == EXIT_FAILED  # stopped: its heartbeat key is gone


def test_a_worker_whose_heartbeat_expired_fails(queue: Queue) -> None:
    w = _worker(queue)
    queue.connection.delete(w.key)  # what Redis does when the heartbeat key's TTL runs out (kill -9)
    assert _check().exit_code == EXIT_FAILED


def test_a_worker_on_another_host_does_not_count(queue: Queue) -> None:
    w = _worker(queue, hostname="some-other-container")
    try:
        assert _check().exit_code == EXIT_FAILED
    finally:
        w.register_death()


def test_redis_down_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_REDIS_URL", "redis://127.0.0.1:1/0")
    r = _check()
    assert r.exit_code == EXIT_FAILED and "cannot be reached" in r.stderr


def test_without_redis_there_is_nothing_to_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROKER_REDIS_URL", raising=False)
    monkeypatch.setenv("BROKER_REDIS_URL", "")
    assert _check().exit_code == EXIT_INVALID


def test_compose_checks_the_worker_with_it() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert compose["services"]["worker"]["healthcheck"]["test"] == ["CMD", "broker", "worker", "--check"]
