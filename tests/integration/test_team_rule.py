"""One rule says a workload's team, for budgets and the savings ledger alike: its `labels.team` when
set, else the request's `team` (docs/finops.md). Budgets used to count a placement under the
request's `team` while savings put the same workloads under `(unlabelled)`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from broker.placements.budgets import Budgets
from tests.integration.service_support import open_broker, service_client


def _workload(name: str, cpu: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "replicas": 2, "cpu": cpu, "memory_gib": 8, "providers": ["aws"], **extra}


def test_budgets_and_savings_agree_on_each_workloads_team(db_url: str) -> None:
    broker = open_broker(db_url)
    budgets = Budgets(broker.sessions)
    budgets.set(tenant="acme", team="payments", monthly_usd=100_000)
    budgets.set(tenant="acme", team="search", monthly_usd=100_000)
    # the whole request is payments'; then one of payments' requests runs a workload search labels
    whole, _ = broker.place({"name": "checkout", "team": "payments", "workloads": [_workload("api", 2)]}, tenant="acme")
    mixed_doc = {
        "name": "mixed",
        "team": "payments",
        "workloads": [_workload("web", 4), _workload("index", 8, labels={"team": "search"})],
    }
    mixed, _ = broker.place(mixed_doc, tenant="acme")
    used = {b["team"]: b["used"] for b in budgets.report(tenant="acme")["budgets"]}
    with service_client(broker) as c:
        doc = c.get("/v1/savings", params={"group_by": "team", "tenant": "acme"}).json()
    per_team = {g["key"]: g["cost_per_hour"] for g in doc["groups"]}
    assert set(per_team) == {"payments", "search"}, per_team  # nothing (unlabelled)
    assert per_team["payments"] + per_team["search"] == pytest.approx(
        whole.result.cost_per_hour + mixed.result.cost_per_hour, abs=1e-6
    )
    assert used["payments"] == pytest.approx(per_team["payments"] * 730, abs=0.02)
    assert used["search"] == pytest.approx(per_team["search"] * 730, abs=0.02)
    assert 0 < used["search"] < mixed.result.cost_per_hour * 730
    # the FOCUS export tags the resources with the same teams
    focus = _focus_teams(broker)
    assert focus and {t for row in focus for t in row} == {"payments", "search"}


def _focus_teams(broker: Any) -> list[set[str]]:
    from broker.finops.service import FinOps

    rows = FinOps(broker).focus(tenant="acme", start=None, end=None)
    tags = [json.loads(r["Tags"]) if isinstance(r["Tags"], str) else r["Tags"] for r in rows]
    return [set(str(t["team"]).split(",")) for t in tags if t.get("team")]
