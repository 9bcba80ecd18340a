"""The savings dashboard: one HTML page, its vendored assets, and the aggregates it draws."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import FileResponse, HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from api.deps import get_broker, get_principal
from api.routes.finops import From, To, scope
from broker.access.keys import Principal
from broker.app import Broker
from broker.errors import NotFound
from broker.finops.documents import BASELINES, DashboardOut
from broker.finops.service import FinOps

STATIC = Path(__file__).resolve().parents[1] / "static"
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"

router = APIRouter(tags=["dashboard"])

_TYPES = {".js": "text/javascript", ".css": "text/css", ".json": "application/json", ".svg": "image/svg+xml"}


@cache
def _page(name: str) -> str:
    """A page rendered once per process: the pages are static, their data comes from /v1/... in the browser."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(), trim_blocks=True, keep_trailing_newline=True
    )
    # the headline baseline named in words before the script runs, as the script names it after
    return env.get_template(name).render(headline=BASELINES[0])


@router.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
def dashboard_page() -> HTMLResponse:
    return HTMLResponse(_page("dashboard.html"), headers={"Cache-Control": "no-cache"})


@router.get("/dashboard/simulations", response_class=HTMLResponse, include_in_schema=False)
def simulations_page() -> HTMLResponse:
    """Fleet simulations: spend and utilisation over time per policy, events marked."""
    return HTMLResponse(_page("simulations.html"), headers={"Cache-Control": "no-cache"})


@router.get("/dashboard/static/{path:path}", include_in_schema=False)
def dashboard_asset(path: str) -> FileResponse:
    target = (STATIC / path).resolve()
    # vendored files only: nothing outside api/static, and no licence/readme texts served as code
    if not target.is_relative_to(STATIC) or not target.is_file() or target.suffix not in _TYPES:
        raise NotFound(f"no dashboard asset {path!r}")
    return FileResponse(target, media_type=_TYPES[target.suffix], headers={"Cache-Control": "max-age=3600"})


@router.get("/v1/dashboard", response_model=DashboardOut, tags=["finops"])
def dashboard_data(
    broker: Annotated[Broker, Depends(get_broker)],
    caller: Annotated[Principal, Depends(get_principal)],
    start: From = None,
    end: To = None,
    tenant: Annotated[str | None, Query(description="only this tenant's placements")] = None,
) -> DashboardOut:
    """Everything the dashboard draws, aggregated server-side for the window."""
    dash = FinOps(broker).dashboard(tenant=scope(caller, tenant), start=start, end=end)
    if caller.key_id is not None:  # a tenant's key: other tenants' names are not its business
        dash = replace(dash, tenants=[t for t in dash.tenants if t == caller.tenant])
    return DashboardOut.from_domain(dash)
