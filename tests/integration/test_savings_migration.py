"""Migration 0018 on both databases: a ledger recorded against the greedy baseline is kept
readable and honest. Its greedy figure moves to the second column unchanged; its headline
baseline (the home cloud's Kubernetes packer, which needs the catalog of the day it was solved)
is "not computed", so no savings are claimed for it; the downgrade gives the greedy figure back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from broker.db.session import alembic_config, downgrade, make_engine, migrate, session_factory
from broker.finops import store as ledger_store
from broker.placements.documents import placement_document
from broker.placements.store import PlacementStore
from tests.integration.conftest import empty_database

CREATED = datetime(2026, 11, 20, tzinfo=UTC)


def _before_0018() -> str:
    """The revision migration 0018 follows (the merger re-chains it when main adds migrations)."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    honest = next(r for r in script.walk_revisions() if str(r.path).endswith("_honest_savings.py"))
    assert isinstance(honest.down_revision, str)
    return honest.down_revision


BEFORE = _before_0018()
COST, GREEDY = 0.5, 2.0


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with empty_database(request.param, request, tmp_path) as empty:
        yield empty


def _write_0014_rows(engine: Engine) -> None:
    """A placement and its ledger rows as the release before 0018 wrote them."""
    meta = sa.MetaData()
    meta.reflect(engine, only=["placements", "finops_ledger", "finops_ledger_items"])
    header = {
        "id": "pl_OLD", "name": "svc", "tenant": "default", "created_at": CREATED, "status": "optimal",
        "objective_value": COST, "cost_per_hour": COST, "lower_bound_per_hour": COST, "gap_pct": 0.0,
        "baseline_policy": "greedy-cheapest-fit", "baseline_cost_per_hour": GREEDY, "savings_pct": 75.0,
        "solve_ms": 5, "egress_cost_per_hour": 0.0, "storage_cost_per_hour": 0.0, "latency_quantile": "p50",
        "rejected": {}, "warnings": [], "price_as_of": {}, "request": {"name": "svc", "workloads": []},
    }  # fmt: skip
    entry = {
        "placement_id": "pl_OLD", "tenant": "default", "name": "svc", "created_at": CREATED, "superseded_at": None,
        "cost_per_hour": COST, "baseline_cost_per_hour": GREEDY, "has_baseline": True,
        "savings_per_hour": GREEDY - COST, "savings_per_month": (GREEDY - COST) * 730,
    }  # fmt: skip
    item = {
        "placement_id": "pl_OLD", "line": 0, "kind": "compute", "workload": "api", "team": "payments",
        "provider": "aws", "site": "aws:eu-central-1", "pool": "aws:eu-central-1/m6i.xlarge/ondemand",
        "quantity": 1.0, "unit_price_per_hour": COST, "list_unit_price_per_hour": COST, "cost_per_hour": COST,
        "baseline_cost_per_hour": GREEDY,
    }  # fmt: skip
    with engine.begin() as c:
        c.execute(sa.insert(meta.tables["placements"]), [header])
        c.execute(sa.insert(meta.tables["finops_ledger"]), [entry])
        c.execute(sa.insert(meta.tables["finops_ledger_items"]), [item])


def test_old_ledger_rows_keep_greedy_as_second_figure_and_claim_no_headline_savings(url: str) -> None:
    migrate(url, BEFORE)
    engine = make_engine(url)
    try:
        _write_0014_rows(engine)
        migrate(url)
        sessions = session_factory(engine)
        entries, items = ledger_store.load(sessions, tenant=None, start=CREATED, end=CREATED + timedelta(days=1))
        (e,) = entries
        assert (e.baseline_policy, e.has_baseline, e.baseline_cost_per_hour) == (None, False, COST)
        assert (e.greedy_cost_per_hour, e.savings_per_hour) == (GREEDY, 0.0)
        (it,) = items
        assert (it.baseline_cost_per_hour, it.greedy_cost_per_hour) == (COST, GREEDY)
        # the stored placement reads back exactly as before: its one baseline, named, no extension keys
        doc = placement_document(PlacementStore(sessions).get("pl_OLD", tenant="default"))
        assert doc["baseline"] == {"policy": "greedy-cheapest-fit", "cost_per_hour": GREEDY}
        assert doc["savings_pct"] == 75.0 and "baselines" not in doc

        downgrade(url, BEFORE)
        with engine.connect() as c:
            row = c.execute(sa.text("SELECT baseline_cost_per_hour, has_baseline, savings_per_hour FROM finops_ledger"))
            assert tuple(row.one()) == (GREEDY, True, pytest.approx(GREEDY - COST))
            item_base = c.execute(sa.text("SELECT baseline_cost_per_hour FROM finops_ledger_items")).scalar_one()
            assert item_base == GREEDY
    finally:
        engine.dispose()
