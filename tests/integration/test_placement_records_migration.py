"""Placements stored as response documents survive the move to placement rows.

Each fixture of tests/fixtures/placements/ holds `placements.result` rows as a release
wrote them (0d5ac63, the release before placement records, and the older 421a558) and
`get_response`, what the release before placement records answered for them. A database
at the Alembic revision before placement records gets those rows, is upgraded, and must
answer the same documents; the downgrade must give that release its documents back.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient

import broker.db.registry  # noqa: F401  (every table)
from broker.app import Broker
from broker.db.models import Base
from broker.db.session import alembic_config, downgrade, migrate
from tests.integration.service_support import key, open_broker, service_client

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures" / "placements").glob("stored_*.json"))


def _previous_head() -> str:
    """The revision the placement-records migration follows (re-chained when main adds migrations)."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    records = next(r for r in script.walk_revisions() if str(r.path).endswith("_placement_records.py"))
    assert isinstance(records.down_revision, str)
    return records.down_revision


PREVIOUS_HEAD = _previous_head()


@pytest.fixture(params=FIXTURES, ids=[f.stem for f in FIXTURES])
def written(request: pytest.FixtureRequest) -> dict[str, Any]:
    return dict(json.loads(Path(request.param).read_text()))


OLD_PLACEMENTS = sa.table(
    "placements",
    *(sa.column(c) for c in ("id", "name", "tenant", "status", "cost_per_hour", "baseline_cost_per_hour")),
    sa.column("savings_pct"),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("request", sa.JSON()),
    sa.column("result", sa.JSON()),
)
REPLANS = sa.table(
    "replans",
    *(sa.column(c) for c in ("id", "tenant", "from_placement", "to_placement", "reason", "decision")),
    sa.column("document", sa.JSON()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


def canonical(doc: Any) -> str:
    """JSON text up to key order: 30 and 30.0, or null and a missing key, still differ."""
    return json.dumps(doc, sort_keys=True)


def _old_row(row: dict[str, Any]) -> dict[str, Any]:
    created = datetime.fromisoformat(row["created_at"]).replace(tzinfo=UTC)  # SQLite kept UTC, naive
    return {**row, "created_at": created}


def _write_previous_release_rows(url: str, written: dict[str, Any]) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.insert(OLD_PLACEMENTS), [_old_row(p["row"]) for p in written["placements"]])
        first = written["placements"][0]["row"]
        c.execute(  # a row that references a placement: the upgrade must not cascade it away
            sa.insert(REPLANS),
            {
                "id": "rp_BEFORE_UPGRADE",
                "tenant": first["tenant"],
                "from_placement": first["id"],
                "to_placement": None,
                "reason": "manual",
                "decision": "keep",
                "document": {},
                "created_at": _old_row(first)["created_at"],
            },
        )
    engine.dispose()


def _headers(broker: Broker) -> dict[str, dict[str, str]]:
    return {"default": {}, "acme": key(broker, "acme")}


def _assert_answers_unchanged(client: TestClient, headers: dict[str, dict[str, str]], written: dict[str, Any]) -> None:
    for p in written["placements"]:
        got = client.get(f"/v1/placements/{p['row']['id']}", headers=headers[p["tenant"]])
        assert got.status_code == 200, got.text
        assert canonical(got.json()) == canonical(p["get_response"]), p["row"]["name"]
    assert canonical(client.get("/v1/placements").json()) == canonical(_utc_listing(written["list_default"]))
    acme = client.get("/v1/placements", headers=headers["acme"]).json()
    assert canonical(acme) == canonical(_utc_listing(written["list_acme"]))


def _utc_listing(page: dict[str, Any]) -> dict[str, Any]:
    """The previous release listed SQLite's naive created_at without its offset (PostgreSQL's with);
    the list now always says +00:00, as GET /v1/placements/{id} always did."""
    items = [
        {**i, "created_at": datetime.fromisoformat(i["created_at"]).replace(tzinfo=UTC).isoformat()}
        for i in page["items"]
    ]
    return {**page, "items": items}


@pytest.mark.both_backends
def test_the_migrations_build_exactly_the_models_schema(db_url: str) -> None:
    """Alembic's autogenerate finds nothing to add: columns, types, nullability, keys, indexes match."""
    engine = sa.create_engine(db_url)
    with engine.connect() as c:
        diffs = compare_metadata(MigrationContext.configure(c), Base.metadata)
    engine.dispose()
    assert diffs == []


@pytest.mark.both_backends
def test_placements_of_the_previous_release_read_back_unchanged(db_url: str, written: dict[str, Any]) -> None:
    downgrade(db_url, PREVIOUS_HEAD)  # the catalog stays; the placement tables are the old release's
    _write_previous_release_rows(db_url, written)
    migrate(db_url)

    broker = open_broker(db_url)
    headers = _headers(broker)
    with service_client(broker) as client:
        _assert_answers_unchanged(client, headers, written)
        # the readers of stored placements work on the migrated rows: dispatch's replan ...
        checkout = written["placements"][0]["row"]
        replan = client.post(f"/v1/placements/{checkout['id']}/replan", json={"dry_run": True})
        assert replan.status_code == 200, replan.text
        assert replan.json()["old_cost_per_hour"] == checkout["cost_per_hour"]
        # ... and finops' ledger, dashboard and FOCUS export
        created = datetime.fromisoformat(checkout["result"]["created_at"])
        window = {"from": (created - timedelta(hours=1)).isoformat(), "to": (created + timedelta(days=1)).isoformat()}
        dash = client.get("/v1/dashboard", params=window)
        assert dash.status_code == 200, dash.text
        latest = {d["id"]: d for d in dash.json()["latest"]}
        assert set(latest) == {p["row"]["id"] for p in written["placements"]}
        for p in written["placements"]:
            assert [a["pool"] for a in latest[p["row"]["id"]]["assignments"]] == [
                a["pool"] for a in p["get_response"]["assignments"]
            ]
        savings = client.get("/v1/savings", params={**window, "group_by": "tenant"}).json()
        assert savings["totals"]["placements"] == len(written["placements"])
        focus = client.get("/v1/export/focus", params=window)
        assert focus.status_code == 200 and int(focus.headers["X-Row-Count"]) > 0
    broker.engine.dispose()

    engine = sa.create_engine(db_url)
    with engine.connect() as c:  # the replan written before the upgrade is still there
        kept = c.scalar(sa.select(REPLANS.c.from_placement).where(REPLANS.c.id == "rp_BEFORE_UPGRADE"))
    assert kept == checkout["id"]
    engine.dispose()


@pytest.mark.both_backends
def test_the_downgrade_gives_the_previous_release_its_documents_back(db_url: str, written: dict[str, Any]) -> None:
    downgrade(db_url, PREVIOUS_HEAD)
    _write_previous_release_rows(db_url, written)
    migrate(db_url)
    downgrade(db_url, PREVIOUS_HEAD)

    engine = sa.create_engine(db_url)
    with engine.connect() as c:
        stored = {r.id: r.result for r in c.execute(sa.select(OLD_PLACEMENTS.c.id, OLD_PLACEMENTS.c.result))}
    engine.dispose()
    for p in written["placements"]:  # the documents that release answers with (its stored shape, every key set)
        assert canonical(stored[p["row"]["id"]]) == canonical(p["get_response"]), p["row"]["name"]

    migrate(db_url)  # and up again: the same answers
    broker = open_broker(db_url)
    headers = _headers(broker)
    with service_client(broker) as client:
        _assert_answers_unchanged(client, headers, written)
    broker.engine.dispose()
