"""The savings dashboard in a real browser: Debian's chromium driven by Playwright.

Serves the app with uvicorn on 127.0.0.1 over a database seeded with the demo
placements (solved for real), then checks what a person would see: totals,
charts whose data add up to them, the map, filters, and no console errors.
A screenshot is saved under test-artifacts/.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from broker.access.keys import KeyStore, Role
from broker.app import Broker
from broker.core.domain import Baseline
from broker.db.session import transaction
from broker.finops.demo import seed_demo
from broker.placements.store import PlacementStore
from broker.settings import Settings
from tests.e2e.live_server import serving
from tests.placements import assignment, placement

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def server(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("dashboard") / "broker.db"
    shutil.copy(template_db, path)
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}"))
    seed_demo(broker, days=30, per_service=5)
    with serving(broker) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "install Debian's chromium (apt-get install -y chromium); .ci/run does"
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser: Browser) -> Iterator[tuple[Page, list[str]]]:
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    pg = context.new_page()
    problems: list[str] = []

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type in ("error", "warning"):
            problems.append(f"console {msg.type}: {msg.text}")

    pg.on("console", on_console)
    pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    pg.on("requestfailed", lambda req: problems.append(f"request failed: {req.url}"))
    yield pg, problems
    context.close()


def _ready(pg: Page) -> dict[str, Any]:
    pg.wait_for_selector("body[data-state=ready]", timeout=20_000)
    data: dict[str, Any] = pg.evaluate("window.__dashboard.state.data")
    return data


def _chart_sum(pg: Page, chart: str, dataset: int = 0) -> float:
    return float(
        pg.evaluate(f"window.__dashboard.charts['{chart}'].data.datasets[{dataset}].data.reduce((a, b) => a + b, 0)")
    )


def test_dashboard_shows_the_stored_placements(server: str, page: tuple[Page, list[str]]) -> None:
    pg, problems = page
    pg.goto(f"{server}/dashboard?range=30")
    data = _ready(pg)
    totals = data["totals"]
    assert totals["placements"] == 15 and totals["cost"] > 0 and totals["savings"] > 0

    # the server's ledger agrees with the dashboard's data for the same window
    savings = httpx.get(f"{server}/v1/savings", params={"from": data["from"], "to": data["to"]}).json()
    assert savings["totals"] == totals

    # the headline compares with what the user would otherwise run, named; greedy is a second figure
    assert data["baselines"][0]["policy"] == "kubernetes-packer"
    assert pg.inner_text("#kpi-base-name") == "kubernetes-packer"
    assert pg.inner_text("#baseline-name") == "kubernetes-packer"
    assert pg.inner_text("#kpi-save-pct") == f"{totals['savings_pct']:.1f}% below kubernetes-packer"
    assert totals["savings_pct"] == pytest.approx(
        (1 - totals["cost_per_hour"] / totals["baseline_cost_per_hour"]) * 100, abs=0.01
    )
    assert totals["placements_without_baseline"] == 0 and not pg.locator("#kpi-nobase").is_visible()
    greedy = pg.inner_text("#kpi-greedy")
    assert greedy.startswith(f"vs greedy-cheapest-fit: {totals['greedy_savings_pct']:.1f}%"), greedy
    # the two figures are different comparisons (the demo's home cloud runs on-demand only)
    assert totals["greedy_baseline_cost_per_hour"] != pytest.approx(totals["baseline_cost_per_hour"])
    assert _chart_sum(pg, "ch-series", 3) == pytest.approx(totals["greedy_baseline_cost"], abs=0.05)
    # drawn only on demand (its legend entry), so the headline's lines keep the chart's scale
    assert pg.evaluate("window.__dashboard.charts['ch-series'].isDatasetVisible(3)") is False
    assert "kubernetes-packer" in pg.evaluate("window.__dashboard.charts['ch-series'].data.datasets[0].label")
    assert set(pg.locator("#latest tbody tr .baseline-policy").all_inner_texts()) == {"kubernetes-packer"}

    # KPIs show those totals
    assert float(pg.get_attribute("#kpi-cost", "data-value") or "nan") == pytest.approx(totals["cost"])
    assert pg.inner_text("#kpi-count") == "15"
    assert pg.inner_text("#kpi-cost-h") == f"${totals['cost_per_hour']:,.3f}/h"

    # every breakdown adds up to the total; the time series to the accrued cost
    for chart in ("ch-provider", "ch-tenant", "ch-team"):
        assert _chart_sum(pg, chart) == pytest.approx(totals["cost"], abs=0.05), chart
        assert _chart_sum(pg, chart, 1) == pytest.approx(totals["baseline_cost"], abs=0.05), chart
    assert _chart_sum(pg, "ch-series", 1) == pytest.approx(totals["cost"], abs=0.05)
    assert _chart_sum(pg, "ch-series", 0) == pytest.approx(totals["baseline_cost"], abs=0.05)
    labels = pg.evaluate("window.__dashboard.charts['ch-tenant'].data.labels")
    assert sorted(labels) == ["acme-media", "acme-retail"]
    # charts were drawn: the canvases have pixels
    assert pg.evaluate("document.getElementById('ch-provider').width") > 0

    # the map has one circle per site with a running placement
    running = [s for s in data["by"]["site"] if s["cost_per_hour"] > 0 and s["lat"] is not None]
    assert pg.locator("#map circle.site").count() == len(running) > 0
    assert pg.locator("#map path.land").count() == 1

    # latest placements with explanations; price freshness per provider
    assert pg.locator("#latest tbody tr").count() == 15
    pg.locator("#latest tbody tr details summary").first.click()
    assert "on " in pg.locator("#latest tbody tr details ul").first.inner_text()
    assert pg.locator("#prices tbody tr").count() == len(data["prices"]) >= 3
    # no forecast data in this database: the panel says so instead of failing
    assert pg.locator("#forecast-empty").is_visible()

    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
    assert problems == []


def test_filters_by_tenant_and_time_range(server: str, page: tuple[Page, list[str]]) -> None:
    pg, problems = page
    pg.goto(f"{server}/dashboard")
    everyone = _ready(pg)

    pg.select_option("#f-tenant", "acme-media")
    pg.wait_for_url("**tenant=acme-media**")
    media = _ready(pg)
    assert media["tenant"] == "acme-media"
    assert media["totals"]["placements"] == 5
    assert 0 < media["totals"]["cost"] < everyone["totals"]["cost"]
    assert pg.evaluate("window.__dashboard.charts['ch-tenant'].data.labels") == ["acme-media"]
    assert _chart_sum(pg, "ch-provider") == pytest.approx(media["totals"]["cost"], abs=0.05)
    assert set(pg.locator("#latest tbody tr td:nth-child(3)").all_inner_texts()) == {"acme-media"}

    pg.select_option("#f-range", "7")
    pg.wait_for_url("**range=7**")
    week = _ready(pg)
    span = pg.evaluate(f"(new Date('{week['to']}') - new Date('{week['from']}')) / 86400000")
    assert span == pytest.approx(7, abs=0.01)
    assert week["totals"]["cost"] < media["totals"]["cost"]
    assert len(week["series"]["points"]) == 7

    # a reload keeps the filters (they live in the URL)
    pg.reload()
    again = _ready(pg)
    assert again["tenant"] == "acme-media"
    assert pg.input_value("#f-tenant") == "acme-media" and pg.input_value("#f-range") == "7"
    assert problems == []


def test_assets_are_served_locally(server: str) -> None:
    html = httpx.get(f"{server}/dashboard").text
    assert "http://" not in html and "https://" not in html  # no CDN
    for asset in ("vendor/chart.umd.min.js", "vendor/topojson-client.min.js", "vendor/land-110m.json", "dashboard.js"):
        r = httpx.get(f"{server}/dashboard/static/{asset}")
        assert r.status_code == 200 and len(r.content) > 1000, asset
    assert httpx.get(f"{server}/dashboard/static/../routes/dashboard.py").status_code == 404


@pytest.fixture(scope="module")
def legacy_server(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One placement stored before the headline baseline existed: greedy was its only baseline."""

    path = tmp_path_factory.mktemp("dashboard-legacy") / "broker.db"
    shutil.copy(template_db, path)
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}"))
    pool = "aws:eu-central-1/m6i.xlarge/ondemand"
    old = placement([assignment("api", pool, 2, 0.5)], nodes=[(pool, 1, 0.5)], cost_per_hour=0.5, id="pl_OLD",
                    name="legacy", created_at=datetime.now(UTC) - timedelta(days=2))  # fmt: skip
    old = replace(old, result=replace(old.result, baseline=Baseline("greedy-cheapest-fit", 2.0), baselines=()))
    with transaction(broker.sessions) as s:
        PlacementStore.add(s, old)
    with serving(broker) as port:
        yield f"http://127.0.0.1:{port}"


def test_a_placement_without_the_headline_baseline_claims_no_savings(
    legacy_server: str, page: tuple[Page, list[str]]
) -> None:
    pg, problems = page
    pg.goto(f"{legacy_server}/dashboard?range=7")
    totals = _ready(pg)["totals"]
    # its greedy figure (2.0/h against 0.5/h) stays a second figure; the headline claims nothing
    assert (totals["placements_without_baseline"], totals["savings_per_hour"], totals["savings_pct"]) == (1, 0.0, 0.0)
    assert totals["greedy_savings_pct"] == 75.0
    assert pg.inner_text("#kpi-save-m") == "$0/mo"
    assert pg.locator("#kpi-nobase").is_visible()
    assert pg.inner_text("#kpi-nobase").startswith("1 placement(s) without a kubernetes-packer figure")
    assert pg.inner_text("#kpi-greedy").startswith("vs greedy-cheapest-fit: 75.0%")
    # the placement itself still reads as stored: its one baseline, named
    assert pg.inner_text("#latest tbody tr .baseline-policy") == "greedy-cheapest-fit"
    assert problems == []


@pytest.fixture(scope="module")
def stale_server(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """No placements, prices stale after a minute: the bundled snapshot is older than that."""

    path = tmp_path_factory.mktemp("dashboard-stale") / "broker.db"
    shutil.copy(template_db, path)
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}", price_stale_after_days=1 / 1440))
    with serving(broker) as port:
        yield f"http://127.0.0.1:{port}"


def test_stale_prices_show_a_banner_at_the_top(stale_server: str, page: tuple[Page, list[str]]) -> None:
    pg, problems = page
    pg.goto(f"{stale_server}/dashboard")
    data = _ready(pg)
    stale = [r["provider"] for r in data["prices"] if r["stale"]]
    assert stale, data["prices"]
    banner = pg.locator("#stale-banner")
    assert banner.is_visible()
    text = banner.inner_text()
    assert text.startswith("Stale prices:") and all(p in text for p in stale) and "broker pricing refresh" in text
    # above the figures it qualifies
    assert banner.bounding_box()["y"] < pg.locator("#kpi-cost-h").bounding_box()["y"]  # type: ignore[index]
    assert problems == []


def test_fresh_prices_show_no_banner(server: str, page: tuple[Page, list[str]]) -> None:
    pg, _ = page
    pg.goto(f"{server}/dashboard")
    data = _ready(pg)
    assert pg.locator("#stale-banner").is_visible() == any(r["stale"] for r in data["prices"])


def _day(days_from_today: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days_from_today)).strftime("%Y-%m-%d")


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("from=garbage", "from"),
        ("range=custom&from=2026-01-01&to=garbage", "to"),
        ("from=2026-01-01&to=2026-02-30", "to"),  # no such day
        ("range=custom&from=2026-01-01", "to"),  # a custom window needs both ends
        ("range=fortnight", "range"),
        ("range=7&from=2026-01-01", "from"),  # a date with a fixed range: which window was meant?
    ],
)
def test_an_unparseable_filter_is_an_error_naming_it(
    server: str, page: tuple[Page, list[str]], query: str, param: str
) -> None:
    """Before, these drew the default 30 days (or stayed blank): figures of a window nobody asked for."""
    pg, problems = page
    pg.goto(f"{server}/dashboard?{query}")
    pg.wait_for_selector("body[data-state=error]", timeout=20_000)
    banner = pg.locator("#error-banner")
    assert banner.is_visible()
    assert f'"{param}"' in banner.inner_text(), banner.inner_text()
    assert pg.evaluate("window.__dashboard.state.data") is None  # nothing fetched, nothing drawn
    assert not pg.locator("#kpi-cost-h").is_visible()
    assert problems == []


def test_a_window_the_server_refuses_shows_its_problem(server: str, page: tuple[Page, list[str]]) -> None:
    """A from after the to (or after now) is the API's 422 naming `from`, shown on the page."""
    pg, problems = page
    pg.goto(f"{server}/dashboard?range=custom&from={_day(5)}&to={_day(9)}")
    pg.wait_for_selector("body[data-state=error]", timeout=20_000)
    text = pg.inner_text("#error-banner")
    assert "from:" in text and "HTTP" not in text, text
    assert not pg.locator("#kpi-cost-h").is_visible()
    # the browser logs the refused request itself; the page throws nothing
    assert [p for p in problems if "422" not in p] == []


def test_dates_without_a_range_are_the_window_drawn(server: str, page: tuple[Page, list[str]]) -> None:
    pg, problems = page
    start, end = _day(-10), _day(-3)
    pg.goto(f"{server}/dashboard?from={start}&to={end}")
    data = _ready(pg)
    assert data["from"].startswith(start) and data["to"].startswith(_day(-2))  # the `to` day is included
    assert pg.input_value("#f-range") == "custom" and pg.input_value("#f-from") == start
    assert not pg.locator("#error-banner").is_visible()
    # an empty custom range applied in the page is an error too, and a valid one clears it
    pg.fill("#f-from", "")
    pg.click("#f-apply")
    pg.wait_for_selector("body[data-state=error]", timeout=20_000)
    assert '"from"' in pg.inner_text("#error-banner")
    pg.select_option("#f-range", "7")
    _ready(pg)
    assert not pg.locator("#error-banner").is_visible() and pg.locator("#kpi-cost-h").is_visible()
    assert problems == []


@pytest.fixture(scope="module")
def keyed_servers(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """The demo placements served twice: with authentication off, and with BROKER_AUTH=required
    (as docker-compose, the image and deploy/kubernetes run it); a viewer key of one tenant."""
    path = tmp_path_factory.mktemp("dashboard-keyed") / "broker.db"
    shutil.copy(template_db, path)
    off = Broker.open(Settings(database_url=f"sqlite:///{path}"))
    seed_demo(off, days=30, per_service=5)
    required = Broker.open(Settings(database_url=f"sqlite:///{path}", auth="required"))
    _, key = KeyStore(required.sessions).create(tenant="acme-retail", role=Role.viewer, name="dashboard")
    with serving(off) as off_port, serving(required) as port:
        yield f"http://127.0.0.1:{off_port}", f"http://127.0.0.1:{port}", key


def without_refusals(problems: list[str]) -> list[str]:
    """What the page reported, less Chromium's own line for each 401 it was answered with."""
    return [p for p in problems if "status of 401" not in p]


def test_with_auth_required_the_page_asks_for_a_key_and_then_draws(
    keyed_servers: tuple[str, str, str], page: tuple[Page, list[str]]
) -> None:
    off, url, key = keyed_servers
    pg, problems = page
    pg.goto(f"{url}/dashboard?range=30")
    pg.wait_for_selector("body[data-state=auth]", timeout=20_000)
    assert pg.locator("#auth-key").is_visible()
    assert pg.inner_text("#auth-msg").startswith("This server requires an API key to read the savings dashboard's data")

    pg.fill("#auth-key", "pbk_0000000000000000_not-a-key")
    pg.click("#auth-use")
    pg.wait_for_selector("body[data-state=auth]", timeout=20_000)
    assert "The server refused this API key: the API key is unknown, malformed or revoked" in pg.inner_text("#auth-msg")

    pg.fill("#auth-key", key)
    pg.click("#auth-use")
    data = _ready(pg)
    assert key not in pg.url and not pg.locator("#auth").is_visible()
    assert pg.locator("#auth-forget").is_visible()
    # the key's tenant, the same figures as with authentication off for that tenant
    assert data["tenants"] == ["acme-retail"]
    plain = httpx.get(f"{off}/v1/dashboard", params={"from": data["from"], "to": data["to"], "tenant": "acme-retail"})
    assert data["totals"] == plain.json()["totals"] and data["totals"]["placements"] > 0
    assert pg.inner_text("#kpi-count") == str(data["totals"]["placements"])

    # kept for the tab: a reload draws without asking again
    pg.reload()
    _ready(pg)
    assert not pg.locator("#auth").is_visible()
    # forgetting it asks again
    pg.click("#auth-forget")
    pg.wait_for_selector("body[data-state=auth]", timeout=20_000)
    assert pg.evaluate("sessionStorage.length") == 0
    assert without_refusals(problems) == []


def test_the_baseline_is_named_in_words_the_same_before_and_after_the_script(
    server: str, browser: Browser, page: tuple[Page, list[str]]
) -> None:
    # before: the page as served, no script run (what a reader sees first, or without JavaScript)
    plain = browser.new_context(java_script_enabled=False)
    raw = plain.new_page()
    raw.goto(f"{server}/dashboard")
    before = (raw.inner_text("#baseline-name"), raw.inner_text("#baseline-words"))
    plain.close()
    pg, problems = page
    pg.goto(f"{server}/dashboard?range=30")
    data = _ready(pg)
    after = (pg.inner_text("#baseline-name"), pg.inner_text("#baseline-words"))
    assert before == after, (before, after)
    head = data["baselines"][0]
    assert after[0] == head["policy"] == "kubernetes-packer"
    # in words on the page, visible: not only in a hover tooltip
    assert pg.locator("#baseline-words").is_visible()
    assert after[1] == f"Baseline: kubernetes-packer: {head['description']}"
    assert "Kubernetes-style packing over every pool the request allows" in after[1]
    assert problems == []


def test_demo_data_is_marked_as_demo_on_the_page(server: str, page: tuple[Page, list[str]]) -> None:
    pg, problems = page
    pg.goto(f"{server}/dashboard?range=30")
    data = _ready(pg)
    assert data["demo_placements"] == data["totals"]["placements"] > 0  # the server holds demo data only
    banner = pg.locator("#demo-banner")
    assert banner.is_visible()
    assert banner.inner_text().startswith("Demo data: every placement in this window was stored by broker finops")
    assert banner.bounding_box()["y"] < pg.locator("#kpi-cost-h").bounding_box()["y"]  # type: ignore[index]
    rows = pg.locator("#latest tbody tr")
    assert rows.count() > 0 and rows.count() == pg.locator("#latest tbody tr .demo-tag").count()
    assert problems == []


def test_real_placements_carry_no_demo_mark(legacy_server: str, page: tuple[Page, list[str]]) -> None:
    pg, problems = page
    pg.goto(f"{legacy_server}/dashboard?range=7")
    data = _ready(pg)
    assert data["demo_placements"] == 0
    assert not pg.locator("#demo-banner").is_visible()
    assert pg.locator("#latest tbody tr .demo-tag").count() == 0
    assert problems == []
