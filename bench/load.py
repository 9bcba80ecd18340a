"""Load benchmark: concurrent CI-sized placement requests against a multi-process server.

    python bench/load.py --workers 2 --concurrency 8 --duration 60

Starts `uvicorn api.main:app --workers N` on 127.0.0.1 (auth required, a fresh copy of
the database), creates an API key, then keeps `concurrency` clients posting a
CI-sized request (a 3-workload service, dry run so the database does not grow)
for `duration` seconds. Prints one figure per line: throughput, p50/p99 latency,
errors, and the servers' memory growth (RSS of all server processes, first vs
last 10 s of the run). Use --url to measure a server you started yourself.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]


def ci_request(i: int) -> dict[str, Any]:
    """What a CI pipeline sends on a deploy: three workloads, EU residency, a latency SLO."""
    return {
        "name": f"ci-{i % 50}",
        "dry_run": True,
        "time_limit_s": 2,
        "user_regions": [{"name": "eu-users", "lat": 50.11, "lon": 8.68}],
        "workloads": [
            {"name": "web", "replicas": 4, "cpu": 1, "memory_gib": 2, "residency": "gdpr-eu",
             "latency_slo_ms": {"eu-users": 30}, "capacity_types": ["ondemand", "spot"]},
            {"name": "api", "replicas": 3, "cpu": 2, "memory_gib": 4, "residency": "gdpr-eu",
             "spread": {"min_sites": 2}},
            {"name": "db", "replicas": 2, "cpu": 4, "memory_gib": 16, "residency": "gdpr-eu",
             "storage_gib": 100, "providers": ["aws"]},
        ],
    }  # fmt: skip


def rss_mb(pid: int) -> float:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs if p.is_running()) / 2**20
    except psutil.NoSuchProcess:
        return float("nan")


def start_server(workers: int, port: int, db_url: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "BROKER_DATABASE_URL": db_url,
        "BROKER_AUTH": "required",
        "BROKER_RATE_LIMIT": "1000000/minute",
        "BROKER_LOG_FORMAT": "json",
    }
    cmd = [sys.executable, "-m", "uvicorn", "api.main:app", "--host", "127.0.0.1", "--port", str(port),
           "--workers", str(workers), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    return subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def wait_healthy(url: str, timeout: float = 600) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if httpx.get(f"{url}/healthz", timeout=120).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit("server did not become healthy")


def run(url: str, key: str, concurrency: int, duration: float, server_pid: int | None) -> dict[str, float]:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    lock = threading.Lock()
    stop = time.monotonic() + duration
    headers = {"Authorization": f"Bearer {key}"}

    def client(n: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
            i = n
            while time.monotonic() < stop:
                t = time.perf_counter()
                try:
                    r = c.post("/v1/placements", json=ci_request(i))
                    code = str(r.status_code) if r.status_code != 200 else None
                except httpx.HTTPError as exc:
                    code = type(exc).__name__
                dt = time.perf_counter() - t
                with lock:
                    if code is None:
                        latencies.append(dt)
                    else:
                        errors[code] = errors.get(code, 0) + 1
                i += concurrency

    mem: list[tuple[float, float]] = []
    threads = [threading.Thread(target=client, args=(n,)) for n in range(concurrency)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        if server_pid:
            mem.append((time.monotonic() - t0, rss_mb(server_pid)))
        time.sleep(1)
    elapsed = time.monotonic() - t0
    lat = sorted(latencies)
    q = statistics.quantiles(lat, n=100) if len(lat) >= 2 else [float("nan")] * 99
    first = [m for t, m in mem if t <= 10]
    last = [m for t, m in mem if t >= elapsed - 10]
    out = {
        "placements_per_s": len(lat) / elapsed,
        "p50_ms": q[49] * 1000,
        "p99_ms": q[98] * 1000,
        "ok": float(len(lat)),
        "errors": float(sum(errors.values())),
        "rss_start_mb": statistics.mean(first) if first else float("nan"),
        "rss_end_mb": statistics.mean(last) if last else float("nan"),
    }
    out["rss_growth_mb"] = out["rss_end_mb"] - out["rss_start_mb"]
    if errors:
        print(f"# errors by kind: {errors}", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("--db", help="a database URL with the catalog loaded (copied when SQLite)")
    ap.add_argument("--url", help="measure this running server instead (needs --key)")
    ap.add_argument("--key")
    args = ap.parse_args()

    if args.url:
        res = run(args.url, args.key, args.concurrency, args.duration, None)
    else:
        from broker.access.keys import KeyStore, Role
        from broker.app import Broker
        from broker.settings import Settings

        tmp = Path(tempfile.mkdtemp(prefix="broker-load-"))
        db_url = args.db or Settings().resolved_database_url()
        if db_url.startswith("sqlite:///"):
            source = Path(db_url.removeprefix("sqlite:///"))
            if source.exists():  # else Broker.open below builds a fresh one
                shutil.copy(source, tmp / "broker.db")
            db_url = f"sqlite:///{tmp / 'broker.db'}"
        broker = Broker.open(Settings(database_url=db_url))  # migrated, catalog loaded
        _, key = KeyStore(broker.sessions).create(tenant="load", role=Role.planner)
        server = start_server(args.workers, args.port, db_url)
        url = f"http://127.0.0.1:{args.port}"
        try:
            wait_healthy(url)
            run(url, key, args.concurrency, 5, None)  # warm every worker's catalog and solver
            res = run(url, key, args.concurrency, args.duration, server.pid)
        finally:
            server.terminate()
            server.wait(30)
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"workers {args.workers} concurrency {args.concurrency} duration_s {args.duration:g}")
    for k, v in res.items():
        print(f"{k} {v:.1f}")


if __name__ == "__main__":
    main()
