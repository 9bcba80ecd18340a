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

from broker.app import Broker
from broker.jobs.simulations import SimulationService
from broker.settings import Settings
from tests.e2e.live_server import serving
from tests.e2e.test_dashboard import ARGS, ARTIFACTS, CHROMIUM

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


@pytest.fixture(scope="module")
def server(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    path = tmp_path_factory.mktemp("simulations") / "broker.db"
    shutil.copy(template_db, path)
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}"))
    service = SimulationService(broker)
    sim, _job = service.create(
        _fleet(), tenant="default", policies=["kube-default", "karpenter-like", "broker"], days=0.5
    )
    assert service.run(sim["id"]) == "succeeded"
    with serving(broker) as port:
        yield f"http://127.0.0.1:{port}", sim["id"]


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
