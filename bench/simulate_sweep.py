"""A sweep of fleet simulations (policies x seeds x scenarios) as jobs on a broker's queue.

    python bench/simulate_sweep.py --server http://127.0.0.1:8080 --seeds 1,2,3 \\
        --scenario base --scenario home-outage:events.site_outage.site=aws:us-east-1

Each (scenario, seed) is one `POST /v1/simulations`, so each is one job: with
`BROKER_REDIS_URL` set, every `broker worker` process (on any machine sharing the Redis and the
database) takes jobs from the same queue, and the sweep spreads over them. The script polls
until all are done and prints one figure per line: scenario, seed, policy, figure, value.
A scenario is `name[:dotted.path=value,...]` applied to the fleet document (values parsed as YAML).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ("spend_usd", "cpu_utilisation", "starved_core_min", "unavailable_replica_min", "sched_latency_p50_s")


def scenario(doc: dict[str, Any], spec: str) -> tuple[str, dict[str, Any]]:
    name, _, changes = spec.partition(":")
    out = copy.deepcopy(doc)
    for change in filter(None, changes.split(",")):
        path, _, raw = change.partition("=")
        *parents, leaf = path.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(raw)
    return name, out


def sweep(
    client: httpx.Client,
    fleet: dict[str, Any],
    *,
    scenarios: list[str],
    seeds: list[int],
    policies: list[str] | None = None,
    days: float | None = None,
    poll_s: float = 2.0,
    timeout_s: float = 7200.0,
) -> list[tuple[str, int, dict[str, Any]]]:
    """Queue every (scenario, seed); wait for all; (scenario, seed, summary row) per policy."""
    queued: list[tuple[str, int, str]] = []
    for spec in scenarios:
        name, doc = scenario(fleet, spec)
        for seed in seeds:
            body: dict[str, Any] = {"fleet": doc, "seed": seed, "days": days}
            if policies:
                body["policies"] = policies
            r = client.post("/v1/simulations", json=body)
            if r.status_code != 202:
                raise SystemExit(f"{name} seed {seed}: HTTP {r.status_code}: {r.text}")
            queued.append((name, seed, r.json()["id"]))
    rows: list[tuple[str, int, dict[str, Any]]] = []
    deadline = time.monotonic() + timeout_s
    pending = list(queued)
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(pending)} simulations did not finish in time")
        still = []
        for name, seed, sid in pending:
            doc = client.get(f"/v1/simulations/{sid}").json()
            if doc["status"] == "succeeded":
                rows += [(name, seed, row) for row in doc["summary"]]
            elif doc["status"] in ("failed", "cancelled"):
                print(f"# {name} seed {seed}: {doc['status']}: {doc.get('error')}", file=sys.stderr)
            else:
                still.append((name, seed, sid))
        pending = still
        if pending:
            time.sleep(poll_s)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--fleet", type=Path, default=ROOT / "examples" / "fleet.yaml")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--scenario", action="append", default=None, help="name[:path=value,...]; repeatable")
    ap.add_argument("--policies", default=None)
    ap.add_argument("--days", type=float, default=None)
    ap.add_argument("--api-key", default=None)
    args = ap.parse_args()
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    fleet = yaml.safe_load(args.fleet.read_text())
    with httpx.Client(base_url=args.server, headers=headers, timeout=60) as client:
        rows = sweep(
            client,
            fleet,
            scenarios=args.scenario or ["base"],
            seeds=[int(s) for s in args.seeds.split(",")],
            policies=args.policies.split(",") if args.policies else None,
            days=args.days,
        )
    for name, seed, row in rows:
        for key in FIGURES:
            print(f"{name} {seed} {row['policy']} {key} {row[key]}")


if __name__ == "__main__":
    main()
