"""The held-out kind of request over the full public catalog, and a tenant's family quotas through
the API: no replica beyond its node's active vCPUs, none sustained beyond a burstable baseline,
none accelerator-free on accelerated or HPC families, and a zero quota named in the conflict."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from broker.app import Broker
from pricing.node_classes import NODE_CLASSES, OPT_IN_CLASSES


def _workload(name: str, replicas: int, cpu: float, gib: float, **extra: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "cpu": cpu, "memory_gib": gib, **extra}


# twelve workloads in the shapes that met the wrong nodes: 16-core services (constrained HB120-16,
# burstable B20ms, hpc6a), a 2-core one on spot (inf1 spot was the cheapest), memory-heavy ones
HELD_OUT: dict[str, Any] = {
    "name": "held-out",
    "dry_run": True,
    "workloads": [
        _workload("solver", 7, 16, 32, providers=["azure"]),
        _workload("pricing", 3, 16, 64, providers=["azure"]),
        _workload("edge-api", 4, 2, 4, capacity_types=["ondemand", "spot"]),
        _workload("batch", 2, 16, 32, providers=["aws"], capacity_types=["ondemand", "spot"]),
        _workload("search", 3, 8, 64),
        _workload("cache", 2, 4, 120),
        _workload("web", 6, 1, 2),
        _workload("queue", 2, 2, 8, providers=["gcp"]),
        _workload("reports", 1, 4, 16, providers=["azure"]),
        _workload("auth", 3, 0.5, 1),
        _workload("etl", 2, 32, 256, capacity_types=["ondemand", "spot"]),
        _workload("ml-infer", 1, 2, 8, capacity_types=["ondemand", "spot"]),
    ],
}


def test_the_held_out_request_keeps_to_what_nodes_are(broker: Broker, client: TestClient) -> None:
    r = client.post("/v1/placements", json=HELD_OUT)
    assert r.status_code in (200, 201), r.text
    doc = r.json()
    t = broker.catalog().table
    cpu = {w["name"]: w["cpu"] for w in HELD_OUT["workloads"]}
    load: dict[str, float] = {}
    for a in doc["assignments"]:
        load[a["pool"]] = load.get(a["pool"], 0.0) + a["replicas"] * cpu[a["workload"]]
        i = t.pool_index[a["pool"]]
        assert NODE_CLASSES[int(t.node_class_idx[i])] not in OPT_IN_CLASSES, a["pool"]
    nodes = {n["pool"]: n["count"] for n in doc["nodes"]}
    for pool, used in load.items():
        i = t.pool_index[pool]
        # the catalog's vCPUs are the active ones; a burstable node holds its sustained share only
        assert used <= nodes[pool] * t.raw_vcpus[i] * t.baseline[i] + 1e-6, (pool, used, nodes[pool])


def test_family_quotas_round_trip_and_a_zero_quota_is_named(client: TestClient) -> None:
    r = client.put("/v1/quotas", json={"quota_group": "aws:Inferentia", "vcpus": 0})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"][-1] == "quota_group", r.text
    r = client.put("/v1/quotas", json={"quota_group": "aws:Inf", "vcpus": -1})
    assert r.status_code == 422, r.text
    assert client.put("/v1/quotas", json={"quota_group": "aws:Inf", "vcpus": 0}).status_code == 200
    assert client.get("/v1/quotas").json()["quotas"] == [{"quota_group": "aws:Inf", "vcpus": 0.0}]
    req = {
        "name": "infer",
        "dry_run": True,
        "workloads": [_workload("infer", 1, 2, 4, gpus=1, gpu_model="AWS Inferentia", providers=["aws"])],
    }
    r = client.post("/v1/placements", json=req)
    assert r.status_code == 422, r.text
    assert "quota:aws:Inf 0 vCPUs on infer" in r.json()["conflicts"]
    assert client.delete("/v1/quotas", params={"quota_group": "aws:Inf"}).status_code == 204
    assert client.delete("/v1/quotas", params={"quota_group": "aws:Inf"}).status_code == 404
    assert client.post("/v1/placements", json=req).status_code in (200, 201)
