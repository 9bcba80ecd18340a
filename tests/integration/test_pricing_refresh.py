"""Price refresh end to end: CLI and API job against a local server serving recorded Azure
Retail Prices pages (no credentials needed), price history, discounts, staleness."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from broker.catalog.store import current_version
from broker.cli.main import app as cli
from broker.db.models import PoolRow
from broker.db.price_models import PriceHistoryRow, SiteStoragePriceRow
from broker.db.session import make_engine, session_factory
from tests.unit.providers.recorded import FeedServer, fixture_bytes, running_feed_server

SPOT = "azure:westeurope/Standard_D4s_v5/spot"
RESERVED = "azure:westeurope/Standard_D4s_v5/reserved"


def _azure_route(server: FeedServer):
    def route(seen):
        flt = seen.query.get("$filter", [""])[0]
        if "$skip" in str(seen.query):
            return 200, "application/json", fixture_bytes("azure/retail_vms_page2.json", server.url)
        if "serviceName eq 'Storage'" in flt:
            return 200, "application/json", fixture_bytes("azure/retail_disks.json", server.url)
        return 200, "application/json", fixture_bytes("azure/retail_vms_page1.json", server.url)

    return route


@pytest.fixture()
def azure_feed() -> Iterator[FeedServer]:
    with running_feed_server() as server:
        server.route = _azure_route(server)
        yield server


@pytest.fixture()
def broken_feed() -> Iterator[FeedServer]:
    with running_feed_server() as server:
        server.route = lambda seen: (500, "application/json", b'{"error": "internal"}')
        yield server


def _pool(db_url: str, pool_id: str) -> tuple[float, str, str]:
    """Straight from the database: rebuilding the in-memory catalog after each refresh costs seconds."""
    with _sessions(db_url)() as s:
        p = s.get(PoolRow, pool_id)
        return p.price_per_hour, p.price_source, p.price_as_of


def _sessions(db_url: str):
    return session_factory(make_engine(db_url))


def _version(db_url: str) -> str:
    with _sessions(db_url)() as s:
        return current_version(s)


def test_cli_refresh_updates_prices_adds_reserved_records_history(db_url, monkeypatch, azure_feed):
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    before = _pool(db_url, SPOT)
    r = CliRunner().invoke(
        cli, ["pricing", "refresh", "--provider", "azure", "--region", "westeurope", "--endpoint", azure_feed.url]
    )
    assert r.exit_code == 0, r.output
    price, _source, as_of = _pool(db_url, SPOT)
    assert price == pytest.approx(0.0461) and price != before[0]
    assert as_of > before[2]
    # a first reserved offer of a known type becomes a pool with the catalog's specs
    assert _pool(db_url, RESERVED)[0] == pytest.approx(1187.0 / 8760, abs=1e-6)
    with _sessions(db_url)() as s:
        tiers = {r.tier: r.usd_per_gb_month for r in s.query(SiteStoragePriceRow).filter_by(site="azure:westeurope")}
        assert tiers["premium"] == pytest.approx(21.68 / (128 * 1.073741824))
        (h,) = s.query(PriceHistoryRow).filter_by(pool_id=SPOT).all()
        assert (h.price_per_hour, h.source, h.effective_at) == (pytest.approx(0.0461), "azure", "2026-11-01T00:00:00Z")


def test_cli_refresh_failure_exits_nonzero_and_keeps_old_prices(db_url, monkeypatch, broken_feed):
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    monkeypatch.setenv("BROKER_PRICING_ATTEMPTS", "2")
    version = _version(db_url)
    before = _pool(db_url, SPOT)
    r = CliRunner().invoke(
        cli, ["pricing", "refresh", "--provider", "azure", "--region", "westeurope", "--endpoint", broken_feed.url]
    )
    assert r.exit_code == 1, r.output
    assert "failed, old prices kept" in r.output
    assert _pool(db_url, SPOT) == before
    assert _version(db_url) == version


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--provider", "azure", "--region", "atlantis"], "atlantis"),
        (["--provider", "ibm"], "unknown provider"),
        (["--provider", "all", "--region", "westeurope"], "one --provider"),
    ],
)
def test_cli_refresh_rejects_bad_arguments(db_url, monkeypatch, args, needle):
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    r = CliRunner().invoke(cli, ["pricing", "refresh", *args])
    assert r.exit_code == 2, r.output
    assert needle in r.output


def _price(client, pool_id: str) -> float:
    return client.get(f"/v1/pools/{pool_id}/history").json()["current"]["price_per_hour"]


def test_history_route_is_not_swallowed_by_the_pool_route(shared_client):
    pool = "aws:eu-central-1/m6i.xlarge/ondemand"
    hist = shared_client.get(f"/v1/pools/{pool}/history")
    assert hist.status_code == 200 and hist.json()["pool"] == pool
    assert shared_client.get(f"/v1/pools/{pool}").json()["id"] == pool


def _wait(client, location: str) -> dict:
    for _ in range(200):
        job = client.get(location).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job did not finish: {job}")


def test_api_refresh_job_then_history_and_status(client, azure_feed):
    r = client.post(
        "/v1/pricing/refresh", json={"provider": "azure", "regions": ["westeurope"], "endpoint": azure_feed.url}
    )
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued"
    job = _wait(client, r.headers["Location"])
    assert job["status"] == "succeeded", job
    (outcome,) = job["result"]["providers"]
    assert outcome["provider"] == "azure" and outcome["ok"] and outcome["updated"] >= 1

    history = client.get(f"/v1/pools/{SPOT}/history").json()
    assert history["current"]["price_per_hour"] == pytest.approx(0.0461)
    assert history["history"][0]["effective_at"] == "2026-11-01T00:00:00Z"
    assert history["history"][0]["source"] == "azure"

    status = client.get("/v1/pricing/status").json()
    assert "azure" not in status["stale"]  # refreshed just now
    assert "aws" in status["stale"]  # the bundled snapshot is months old


def test_api_refresh_job_failure_reports_and_keeps_prices(client, broker, broken_feed, monkeypatch):
    monkeypatch.setattr(broker.settings, "pricing_attempts", 2)
    before = _price(client, SPOT)
    r = client.post(
        "/v1/pricing/refresh", json={"provider": "azure", "regions": ["westeurope"], "endpoint": broken_feed.url}
    )
    job = _wait(client, r.headers["Location"])
    assert job["status"] == "failed"
    assert "azure" in job["error"]
    (outcome,) = job["result"]["providers"]
    # the feed's failure is the broker's PricingUnavailable, as a problem document
    problem = outcome["problem"]
    assert problem["status"] == 503 and problem["type"].endswith("/pricing-unavailable")
    assert problem["provider"] == "azure" and problem["detail"] == outcome["error"]
    assert _price(client, SPOT) == before


@pytest.mark.parametrize(
    "body",
    [{"provider": "ibm"}, {"provider": "azure", "regions": ["atlantis"]}, {"provider": "azure", "endpoint": "ftp://x"}],
)
def test_api_refresh_rejects_bad_input_at_once(client, body):
    r = client.post("/v1/pricing/refresh", json=body)
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")


def test_history_of_unknown_pool_is_404(shared_client):
    r = shared_client.get("/v1/pools/aws:nowhere-1/x.large/ondemand/history")
    assert r.status_code == 404


def test_discount_rule_reprices_matching_pools_only(client):
    d4 = "azure:westeurope/Standard_D4s_v5/ondemand"
    d4ps = "azure:westeurope/Standard_D4ps_v5/ondemand"
    spot = _price(client, SPOT)
    list_price = _price(client, d4)
    other = _price(client, d4ps)
    r = client.post(
        "/v1/pricing/discounts",
        json={
            "provider": "azure",
            "discount_pct": 20,
            "family": "Standard_D4s_*",
            "region": "west*",
            "capacity_types": ["ondemand"],
        },
    )
    assert r.status_code == 201, r.text
    assert _price(client, d4) == pytest.approx(list_price * 0.8, abs=1e-6)
    assert _price(client, d4ps) == other
    assert _price(client, SPOT) == spot
    # a second, larger rule does not stack: the best one applies to the list price
    client.post(
        "/v1/pricing/discounts",
        json={"provider": "azure", "discount_pct": 25, "family": "Standard_D4*", "region": "westeurope"},
    )
    assert _price(client, d4) == pytest.approx(list_price * 0.75, abs=1e-6)
    hist = client.get(f"/v1/pools/{d4}/history").json()["history"]
    assert hist[0]["list_price_per_hour"] == pytest.approx(list_price)
    assert [d["discount_pct"] for d in client.get("/v1/pricing/discounts").json()] == [20, 25]


def _row(broker, pool_id: str):
    with broker.sessions() as s:
        return s.get(PoolRow, pool_id)


def test_committed_capacity_is_sunk_bounded_and_left_alone_by_discounts_and_feeds(client, broker, azure_feed):
    pool = "azure:westeurope/Standard_D4s_v5/reserved"
    r = client.post(
        "/v1/pricing/commitments",
        json={"site": "azure:westeurope", "instance_type": "Standard_D4s_v5", "count": 3},
    )
    assert r.status_code == 201, r.text
    row = _row(broker, pool)
    assert (row.max_nodes, row.price_per_hour, row.price_source) == (3, 0.0, "committed")
    assert (row.vcpus, row.memory_gib, row.arch) == (4, 16, "amd64")  # specs of the type at that site
    client.post("/v1/pricing/discounts", json={"provider": "azure", "discount_pct": 30, "region": "westeurope"})
    job = _wait(
        client,
        client.post(
            "/v1/pricing/refresh", json={"provider": "azure", "regions": ["westeurope"], "endpoint": azure_feed.url}
        ).headers["Location"],
    )
    assert job["status"] == "succeeded"
    row = _row(broker, pool)
    assert (row.max_nodes, row.price_per_hour, row.price_source) == (3, 0.0, "committed")
    # the on-demand pool of the same type did get the discounted feed price
    assert _price(client, "azure:westeurope/Standard_D4s_v5/ondemand") == pytest.approx(0.23 * 0.7, abs=1e-6)


@pytest.mark.parametrize(
    "body",
    [
        {"site": "azure:westeurope", "instance_type": "Standard_Nope", "count": 1},
        {"site": "azure:westeurope", "instance_type": "Standard_D4s_v5", "count": -1},
    ],
)
def test_commitment_rejects_unknown_types_and_negative_counts(client, body):
    assert client.post("/v1/pricing/commitments", json=body).status_code == 422


def test_gcp_refresh_without_a_project_prices_the_catalogs_machine_types(broker):
    """No project: no machine-type listing, so the catalog's own types are priced from the SKU rates."""
    from google.auth.credentials import AnonymousCredentials

    from broker.catalog.refresh import refresh
    from providers.base import FeedOptions
    from providers.gcp import GcpPriceSource

    with running_feed_server() as server:
        server.route = lambda seen: (
            200,
            "application/json",
            fixture_bytes(f"gcp/list_skus_{'page2' if seen.query.get('pageToken') else 'page1'}.json"),
        )
        source = GcpPriceSource(FeedOptions(endpoint=server.url, timeout_s=5), credentials=AnonymousCredentials())
        (outcome,) = refresh(
            broker.sessions, broker.settings, provider="gcp", regions=["europe-west1"], sources=lambda _: source
        )
    assert outcome.ok, outcome.error
    assert not any("machineTypes" in s.path for s in server.seen)
    row = _row(broker, "gcp:europe-west1/n2-standard-4/ondemand")
    assert row.price_per_hour == pytest.approx(4 * 0.034773 + 16 * 0.004661, abs=1e-6)
    assert _row(broker, "gcp:europe-west1/n2-standard-4/spot").price_per_hour == pytest.approx(
        4 * 0.008359 + 16 * 0.00112, abs=1e-6
    )


def test_a_price_refresh_job_runs_on_a_worker_as_every_job_does(broker, azure_feed):
    """With a `broker worker` (here without Redis: it polls the database) the refresh a POST
    queued runs there, and reads as a job of kind price-refresh on /v1/jobs too."""
    from broker.jobs import worker
    from broker.jobs.price_refresh import KIND_PRICE_REFRESH, PriceRefreshJobs
    from broker.jobs.store import JobStore

    class Held:  # a queue whose jobs wait for the worker (as Redis would hold them)
        kind = "held"

        def enqueue(self, job_id: str, lane: str = "") -> None:
            pass

    jobs = PriceRefreshJobs(broker.sessions)
    job = jobs.start(Held(), tenant="default", provider="azure", regions=["westeurope"], endpoint=azure_feed.url)
    assert job["status"] == "queued" and job["params"]["provider"] == "azure"
    assert worker.serve(broker, burst=True) == 1
    done = jobs.get(job["id"])
    assert done["status"] == "succeeded" and done["error"] is None
    (outcome,) = done["result"]["providers"]
    assert outcome["provider"] == "azure" and outcome["ok"]
    as_job = JobStore(broker.sessions).get(job["id"], tenant="default")
    assert as_job["kind"] == KIND_PRICE_REFRESH and as_job["status"] == "succeeded"
