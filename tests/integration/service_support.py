"""Helpers for the production-service tests: apps with auth on, keys per tenant, small requests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient

from broker.access.keys import KeyStore, Role
from broker.app import Broker
from broker.settings import Settings


def small_request(name: str = "svc-test", *, replicas: int = 2, **extra: Any) -> dict[str, Any]:
    """A CI-sized request that solves in well under a second on the full catalog."""
    return {
        "name": name,
        "workloads": [
            {
                "name": "api",
                "replicas": replicas,
                "cpu": 2,
                "memory_gib": 4,
                "residency": "gdpr-eu",
                "providers": ["aws"],
            }
        ],
        **extra,
    }


def open_broker(db_url: str, **settings: Any) -> Broker:
    return Broker.open(Settings(database_url=db_url, log_format="text", **settings))


@contextmanager
def service_client(broker: Broker) -> Iterator[TestClient]:
    from api.app import create_app

    with TestClient(create_app(broker=broker)) as c:
        yield c


def key(broker: Broker, tenant: str, role: str = "admin") -> dict[str, str]:
    """Authorization headers of a new key."""
    _, token = KeyStore(broker.sessions).create(tenant=tenant, role=Role[role])
    return {"Authorization": f"Bearer {token}"}
