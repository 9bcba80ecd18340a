"""Median answer time of a CI-sized placement request over the full public catalog.

A dozen workloads like a pipeline would send (GDPR and US residency, latency
SLOs, spread, spot, dependencies, storage), solved in-process and over HTTP
against a local server. Prints one figure per line:

    python bench/ci_request.py [--runs 15] [--database-url URL]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from api.app import create_app
from broker.app import Broker
from broker.settings import Settings


def ci_request() -> dict[str, Any]:
    eu = {"name": "eu-users", "lat": 50.11, "lon": 8.68}
    us = {"name": "us-users", "lat": 40.71, "lon": -74.0}
    w = [
        {
            "name": "web",
            "replicas": 6,
            "cpu": 1,
            "memory_gib": 2,
            "residency": "gdpr-eu",
            "latency_slo_ms": {"eu-users": 40},
            "spread": {"min_sites": 2},
            "capacity_types": ["ondemand", "spot"],
            "max_spot_fraction": 0.5,
            "depends_on": [{"workload": "api", "gib_per_hour": 1}],
        },
        {
            "name": "api",
            "replicas": 4,
            "cpu": 2,
            "memory_gib": 4,
            "residency": "gdpr-eu",
            "latency_slo_ms": {"eu-users": 40},
            "spread": {"min_sites": 2},
            "depends_on": [{"workload": "db", "gib_per_hour": 2}],
        },
        {
            "name": "db",
            "replicas": 2,
            "cpu": 4,
            "memory_gib": 32,
            "storage_gib": 500,
            "storage_tier": "premium",
            "residency": "gdpr-eu",
            "spread": {"min_sites": 2},
        },
        {"name": "cache", "replicas": 3, "cpu": 1, "memory_gib": 8, "residency": "gdpr-eu"},
        {
            "name": "worker",
            "replicas": 8,
            "cpu": 2,
            "memory_gib": 4,
            "arch": ["amd64", "arm64"],
            "capacity_types": ["spot", "ondemand"],
        },
        {"name": "batch", "replicas": 4, "cpu": 8, "memory_gib": 16, "capacity_types": ["spot"]},
        {
            "name": "us-web",
            "replicas": 4,
            "cpu": 1,
            "memory_gib": 2,
            "residency": "us-only",
            "latency_slo_ms": {"us-users": 30},
            "spread": {"min_sites": 2},
        },
        {
            "name": "us-api",
            "replicas": 3,
            "cpu": 2,
            "memory_gib": 8,
            "residency": "us-only",
            "depends_on": [{"workload": "us-web", "gib_per_hour": 0.5}],
        },
        {"name": "search", "replicas": 3, "cpu": 4, "memory_gib": 16, "storage_gib": 100},
        {"name": "ml-infer", "replicas": 2, "cpu": 4, "memory_gib": 16, "gpus": 1},
        {"name": "queue", "replicas": 3, "cpu": 0.5, "memory_gib": 1, "providers": ["aws"]},
        {"name": "reports", "replicas": 1, "cpu": 2, "memory_gib": 8, "providers": ["azure", "gcp"]},
    ]
    return {"name": "ci-bench", "user_regions": [eu, us], "workloads": w, "dry_run": True}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--database-url", default="")
    args = ap.parse_args()
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    broker = Broker.open(Settings(database_url=url))
    broker.catalog()
    doc = ci_request()
    broker.place(doc)  # warm-up

    inproc, solve_ms, gaps = [], [], []
    for _ in range(args.runs):
        t = time.perf_counter()
        last, _ = broker.place(doc)
        inproc.append((time.perf_counter() - t) * 1000)
        solve_ms.append(last.result.solve_ms)
        gaps.append(last.result.gap_pct)

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(broker=broker), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(timeout=60) as http:
        for _ in range(100):
            try:
                http.get(f"{base}/healthz")
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        http.post(f"{base}/v1/placements", json=doc)
        over_http = []
        for _ in range(args.runs):
            t = time.perf_counter()
            r = http.post(f"{base}/v1/placements", json=doc)
            over_http.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.text
    server.should_exit = True

    print(f"workloads: {len(doc['workloads'])}")
    print(f"replicas: {sum(w['replicas'] for w in doc['workloads'])}")
    print(f"pools_in_catalog: {broker.catalog().table.n_pools}")
    print(f"median_solve_ms: {statistics.median(solve_ms):.0f}")
    print(f"median_in_process_ms: {statistics.median(inproc):.0f}")
    print(f"median_http_ms: {statistics.median(over_http):.0f}")
    print(f"p90_http_ms: {sorted(over_http)[int(0.9 * (len(over_http) - 1))]:.0f}")
    r = last.result
    print(f"status: {r.status}")
    print(f"cost_per_hour: {r.cost_per_hour:.4f}")
    print(f"lower_bound_per_hour: {r.lower_bound_per_hour:.4f}")
    print(f"median_gap_pct: {statistics.median(gaps):.2f}")
    print(f"baseline_cost_per_hour: {r.baseline.cost_per_hour or 0.0:.4f}")
    print(f"savings_pct: {r.savings_pct}")
    print(json.dumps({"binding_example": list(r.assignments[0].explanation.binding)}))


if __name__ == "__main__":
    main()
