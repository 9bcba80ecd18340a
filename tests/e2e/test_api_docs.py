"""/docs renders in a real browser with every request off this server refused, as on a machine
without internet: Swagger UI's script and styles come from the broker itself (fastapi-offline)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Route, sync_playwright

from broker.app import Broker
from broker.settings import Settings
from tests.e2e.live_server import serving
from tests.e2e.test_dashboard import ARGS, CHROMIUM

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("docs") / "broker.db"
    shutil.copy(template_db, path)
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}", auth="required"))
    with serving(broker) as port:
        yield f"http://127.0.0.1:{port}"


def test_swagger_ui_renders_offline(server: str) -> None:
    assert Path(CHROMIUM).exists(), "install Debian's chromium (apt-get install -y chromium); .ci/run does"
    refused: list[str] = []

    def offline(route: Route) -> None:
        if route.request.url.startswith(server):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.route("**/*", offline)
        page.goto(server + "/docs")
        title = page.locator(".swagger-ui .info .title").first
        title.wait_for(timeout=20_000)
        assert "placement-broker" in title.inner_text()
        # the operations are listed from /openapi.json, which needs no key either
        page.locator(".opblock-summary-path", has_text="/v1/placements").first.wait_for(timeout=20_000)
        browser.close()
    assert refused == [], f"the docs page asked for {refused}"
