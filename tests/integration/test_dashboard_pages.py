"""The dashboard pages are rendered from one base template: same head and header, their own parts."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize(
    ("path", "title", "own"),
    [
        ("/dashboard", "Savings dashboard", '<script src="/dashboard/static/dashboard.js">'),
        (
            "/dashboard/simulations",
            "Fleet simulations",
            '<link rel="stylesheet" href="/dashboard/static/simulations.css">',
        ),
    ],
)
def test_page_extends_the_base(shared_client: TestClient, path: str, title: str, own: str) -> None:
    r = shared_client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    page = r.text
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert f"<title>{title} · placement-broker</title>" in page
    assert f"<h1>{title}</h1>" in page
    assert '<link rel="stylesheet" href="/dashboard/static/dashboard.css">' in page
    assert '<script src="/dashboard/static/vendor/chart.umd.min.js">' in page
    assert own in page
    assert "{%" not in page and "{{" not in page  # every block rendered
