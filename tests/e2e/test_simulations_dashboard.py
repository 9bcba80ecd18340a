"""The simulations page in a real browser (Debian's chromium via Playwright), over a stored run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from broker.access.keys import KeyStore, Role
from broker.app import Broker
from broker.db.session import transaction
from broker.db.simulation_models import SimulationRow
from broker.jobs.simulations import SimulationService
from broker.settings import Settings
from tests.e2e.live_server import serving
from tests.e2e.test_dashboard import ARGS, ARTIFACTS, CHROMIUM, without_refusals

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _fleet() -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / "fleet.yaml").read_text())
    keep = doc["workloads"][::5][:9]
    names = {w["name"] for w in keep}
    for w in keep:
        w["depends_on"] = [d for d in w.get("depends_on", []) if d["workload"] in names]
    doc["workloads"] = keep
    doc["sites"] = ["aws:us-east-1", "aws:us-east-2", "gcp:us-east1"]
    doc["policies"]["broker"]["forecast"] = "baseline"
    doc["events"] = {
        "spot_interruptions": {"risk_multiplier": 20},
        "spot_price_change": {"at_hours": 3, "region": "aws:us-east-1", "factor": 2},
        "site_outage": {"at_hours": 6, "hours": 1, "site": "aws:us-east-2"},
        "surge": {"day": 0, "hours": 4, "factor": 1.5},
    }
    return doc


WARNING = (
    "broker policy: a solve at 0 s ran into time_limit_s (60 s) before its work limits; "
    "this run's figures depend on the machine's speed (raise time_limit_s)"
)


@pytest.fixture(scope="module")
def stored(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A database with two runs: another tenant's (`acme`, older, one that warns) and the default tenant's."""
    path = tmp_path_factory.mktemp("simulations") / "broker.db"
    shutil.copy(template_db, path)
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}"))
    service = SimulationService(broker)
    theirs, _job = service.create(_fleet(), tenant="acme", policies=["kube-default"], days=0.1)
    assert service.run(theirs["id"]) == "succeeded"
    with transaction(broker.sessions) as s:  # as a run whose broker solve met its time limit stores it
        row = s.get(SimulationRow, theirs["id"])
        assert row is not None
        row.warnings = [WARNING]
    sim, _job = service.create(
        _fleet(), tenant="default", policies=["kube-default", "karpenter-like", "broker"], days=0.5
    )
    assert service.run(sim["id"]) == "succeeded"
    return path, sim["id"], theirs["id"]


@pytest.fixture(scope="module")
def server(stored: tuple[Path, str, str]) -> Iterator[tuple[str, str]]:
    path, sid, _ = stored
    with serving(Broker.open(Settings(database_url=f"sqlite:///{path}"))) as port:
        yield f"http://127.0.0.1:{port}", sid


@pytest.fixture(scope="module")
def keyed_server(stored: tuple[Path, str, str]) -> Iterator[tuple[str, str, str]]:
    """The same runs with BROKER_AUTH=required; a viewer key of the default tenant."""
    path, sid, _ = stored
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}", auth="required"))
    _, key = KeyStore(broker.sessions).create(tenant="default", role=Role.viewer, name="dashboard")
    with serving(broker) as port:
        yield f"http://127.0.0.1:{port}", sid, key


@pytest.fixture()
def page() -> Iterator[tuple[Page, list[str]]]:
    assert Path(CHROMIUM).exists(), "install Debian's chromium (apt-get install -y chromium); .ci/run does"
    with sync_playwright() as pw:
        browser: Browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
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
        browser.close()


def test_simulation_page_draws_the_stored_run(server: tuple[str, str], page: tuple[Page, list[str]]) -> None:
    url, sid = server
    pg, problems = page
    pg.goto(f"{url}/dashboard/simulations")
    pg.wait_for_selector("body[data-state=ready]", timeout=20_000)
    stored = httpx.get(f"{url}/v1/simulations/{sid}").json()
    assert pg.input_value("#f-sim") == sid

    # one summary row per policy, with the stored spend
    rows = pg.locator("#summary tbody tr")
    assert rows.count() == 3
    for row in stored["summary"]:
        cell = pg.locator(f"#summary tbody tr[data-policy='{row['policy']}'] td").nth(1).inner_text()
        assert cell == f"${row['spend_usd']:,.2f}"

    # the charts plot the stored series: one line per policy, same points
    charts = (("ch-spend", "spend_per_hour"), ("ch-util", "cpu_utilisation"), ("ch-mem", "memory_utilisation"))
    for chart, key in charts:
        labels = pg.evaluate(f"window.__simulations.charts['{chart}'].data.datasets.map(d => d.label)")
        assert labels == ["kube-default", "karpenter-like", "broker"]
        for i, policy in enumerate(labels):
            ys = pg.evaluate(f"window.__simulations.charts['{chart}'].data.datasets[{i}].data.map(p => p.y)")
            assert ys == pytest.approx(stored["series"][policy][key])
        assert pg.evaluate(f"document.getElementById('{chart}').width") > 0

    # events are marked: the scheduled ones once, each reclaim per policy
    markers = pg.evaluate("window.__simulations.state.markers")
    kinds = [m["kind"] for m in markers]
    for kind in ("price_change", "outage_start", "outage_end", "surge_start", "surge_end"):
        assert kinds.count(kind) == 1, kind
    reclaims = [e for e in stored["events"] if e["kind"] == "spot_interruption"]
    assert kinds.count("spot_interruption") == len(reclaims)
    assert pg.locator("#events tbody tr").count() == len(markers)

    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / "simulations.png"), full_page=True)
    assert problems == []


def _summary_cells(pg: Page) -> list[str]:
    return pg.locator("#summary tbody tr td:nth-child(2)").all_inner_texts()


def test_every_tenants_runs_are_offered_with_authentication_off(
    stored: tuple[Path, str, str], server: tuple[str, str], page: tuple[Page, list[str]]
) -> None:
    """As the savings dashboard: no key, every tenant's runs, a tenant filter; as GET /v1/simulations answers."""
    _, sid, theirs = stored
    url, _ = server
    pg, problems = page
    pg.goto(f"{url}/dashboard/simulations")
    pg.wait_for_selector("body[data-state=ready]", timeout=20_000)
    listed = httpx.get(f"{url}/v1/simulations").json()
    assert [x["id"] for x in listed["items"]] == [sid, theirs] and listed["tenants"] == ["acme", "default"]
    assert pg.locator("#f-sim option").evaluate_all("os => os.map(o => o.value)") == [sid, theirs]
    assert pg.locator("#f-tenant option").evaluate_all("os => os.map(o => o.value)") == ["", "acme", "default"]
    assert "acme" in pg.locator(f"#f-sim option[value='{theirs}']").inner_text()
    assert not pg.locator("#sim-warnings").is_visible()

    # another tenant's run only: it is there, not "no finished simulation"
    pg.select_option("#f-tenant", "acme")
    pg.wait_for_url("**tenant=acme**")
    pg.wait_for_selector("body[data-state=ready]", timeout=20_000)
    assert pg.input_value("#f-sim") == theirs and not pg.locator("#sim-empty").is_visible()
    stored_doc = httpx.get(f"{url}/v1/simulations/{theirs}").json()
    assert _summary_cells(pg) == [f"${r['spend_usd']:,.2f}" for r in stored_doc["summary"]]
    # its warning is shown above its figures
    banner = pg.locator("#sim-warnings")
    assert banner.is_visible() and WARNING in banner.inner_text()
    assert banner.bounding_box()["y"] < pg.locator("#summary").bounding_box()["y"]  # type: ignore[index]
    assert problems == []


def test_with_auth_required_the_page_asks_for_a_key_and_then_draws(
    keyed_server: tuple[str, str, str], server: tuple[str, str], page: tuple[Page, list[str]]
) -> None:
    url, sid, key = keyed_server
    plain, _ = server
    pg, problems = page
    pg.goto(f"{url}/dashboard/simulations")
    pg.wait_for_selector("body[data-state=auth]", timeout=20_000)
    assert pg.inner_text("#auth-msg").startswith("This server requires an API key to read the simulations")
    assert pg.locator("#auth-key").is_visible()

    pg.fill("#auth-key", key)
    pg.click("#auth-use")
    pg.wait_for_selector("body[data-state=ready]", timeout=20_000)
    assert key not in pg.url
    # the key's tenant only, the figures drawn with authentication off
    assert pg.locator("#f-tenant option").evaluate_all("os => os.map(o => o.value)") == ["", "default"]
    assert pg.input_value("#f-sim") == sid
    doc = httpx.get(f"{plain}/v1/simulations/{sid}").json()
    assert _summary_cells(pg) == [f"${r['spend_usd']:,.2f}" for r in doc["summary"]]
    ys = pg.evaluate("window.__simulations.charts['ch-spend'].data.datasets[0].data.map(p => p.y)")
    assert ys == pytest.approx(doc["series"]["kube-default"]["spend_per_hour"])
    assert without_refusals(problems) == []
