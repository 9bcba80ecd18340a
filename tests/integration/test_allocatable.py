"""Over the full catalog, through the API: placements pack replicas into allocatable capacity,
and pool listings show it next to the raw size (docs/solver.md, "Allocatable capacity")."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from broker.core.reservations import EVICTION_HARD_MEMORY_GIB, MIB


def test_pool_listing_shows_raw_and_allocatable(shared_client: TestClient) -> None:
    pool = shared_client.get("/v1/pools/aws:eu-central-1/m6i.xlarge/ondemand").json()
    assert (pool["vcpus"], pool["memory_gib"]) == (4, 16)  # the instance's own size
    # EKS: 80 m CPU; 58 pods -> 11 * 58 + 255 MiB; 100 MiB eviction; default DaemonSets 0.1 / 0.25
    assert pool["allocatable_vcpus"] == pytest.approx(4 - 0.08 - 0.1, abs=1e-4)
    expected = 16 - (11 * 58 + 255) * MIB - EVICTION_HARD_MEMORY_GIB - 0.25
    assert pool["allocatable_memory_gib"] == pytest.approx(expected, abs=1e-4)
    page = shared_client.get("/v1/pools", params={"provider": "gcp", "limit": 5}).json()
    assert all(0 < p["allocatable_vcpus"] < p["vcpus"] for p in page["items"])


def _place(client: TestClient, cpu: float, memory_gib: float, replicas: int) -> dict[str, Any]:
    doc = {
        "name": "alloc",
        "dry_run": True,
        "workloads": [{"name": "w", "replicas": replicas, "cpu": cpu, "memory_gib": memory_gib}],
    }
    r = client.post("/v1/placements", json=doc)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(("cpu", "memory_gib", "replicas"), [(4, 8, 3), (0.5, 0.5, 4), (0.25, 0.5, 2)])
def test_no_replica_lands_on_a_node_that_cannot_allocate_it(
    shared_client: TestClient, cpu: float, memory_gib: float, replicas: int
) -> None:
    answer = _place(shared_client, cpu, memory_gib, replicas)
    for node in answer["nodes"]:
        pool = shared_client.get(f"/v1/pools/{node['pool']}").json()
        # strictly larger than the request: the provider's reservations come off the raw size
        assert pool["vcpus"] > cpu and pool["memory_gib"] > memory_gib
        assert pool["allocatable_vcpus"] >= cpu and pool["allocatable_memory_gib"] >= memory_gib
