"""Dashboard and FOCUS export over thousands of stored placements.

Stores N placements (a real solve of three demo services, cloned over 300
service names and 90 days), then times the ledger's first recording and the
warm aggregate reads. Prints one `name value unit` figure per line.

    python bench/finops_dashboard.py [N]
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from broker.app import Broker, new_placement_id, parse_request
from broker.db.session import transaction
from broker.finops.demo import DEMO_REQUESTS
from broker.finops.service import FinOps
from broker.placements.store import PlacementStore
from broker.settings import Settings


def main(n: int) -> None:
    db = Path(tempfile.mkdtemp()) / "bench.db"
    broker = Broker.open(Settings(database_url=f"sqlite:///{db}"))
    solved = []
    for tenant, doc in DEMO_REQUESTS:
        req = parse_request({**doc, "dry_run": True})
        placement, _ = broker.place(req)
        solved.append(replace(placement, tenant=tenant, request=req.model_dump(mode="json")))
    rng = random.Random(1)
    now = datetime.now(UTC)
    with transaction(broker.sessions) as s:
        for i in range(n):
            created = now - timedelta(days=rng.uniform(0, 90))
            stored = replace(solved[i % len(solved)], id=new_placement_id(), name=f"svc-{i % 300}", created_at=created)
            PlacementStore.add(s, stored)
    fin = FinOps(broker)
    t = time.perf_counter()
    fin.savings(tenant=None, group_by="provider")
    print(f"ledger_first_sync_{n}_placements {time.perf_counter() - t:.3f} s")
    with TestClient(create_app(broker=broker)) as client:
        for label, url in [
            ("dashboard_30d", "/v1/dashboard"),
            ("dashboard_90d", f"/v1/dashboard?from={(now - timedelta(days=90)).isoformat()}"),
            ("savings_by_team_90d", f"/v1/savings?group_by=team&from={(now - timedelta(days=90)).isoformat()}"),
            ("focus_csv_30d", "/v1/export/focus"),
        ]:
            client.get(url.replace("+00:00", "Z"))  # warm
            times = []
            for _ in range(5):
                t = time.perf_counter()
                r = client.get(url.replace("+00:00", "Z"))
                times.append(time.perf_counter() - t)
                assert r.status_code == 200, r.text
            print(f"{label}_median {sorted(times)[2] * 1000:.0f} ms ({len(r.content) // 1024} KiB)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
