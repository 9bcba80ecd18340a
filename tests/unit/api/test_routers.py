"""The API's routers are included in an explicit order (api/app.py, ROUTERS): a request goes to
the first route whose path matches, so no route may be shadowed by one included before it."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.convertors import Convertor, FloatConvertor, IntegerConvertor, UUIDConvertor

from api.app import ROUTERS
from api.routes import catalog, pricing


def _sample(convertor: Convertor[object]) -> str:
    """A value of a path parameter its convertor accepts."""
    if isinstance(convertor, IntegerConvertor):
        return "7"
    if isinstance(convertor, FloatConvertor):
        return "1.5"
    if isinstance(convertor, UUIDConvertor):
        return str(uuid.UUID(int=7))
    return "sample-value"


def _sample_path(route: APIRoute) -> str:
    path = route.path_format
    for name, convertor in route.param_convertors.items():
        path = path.replace("{" + name + "}", _sample(convertor))
    return path


def shadowed(routers: tuple[APIRouter, ...]) -> list[str]:
    """Each route some route included before it answers instead: "METHOD path <- earlier path"."""
    routes = [r for router in routers for r in router.routes if isinstance(r, APIRoute)]
    out = []
    for i, route in enumerate(routes):
        path = _sample_path(route)
        for earlier in routes[:i]:
            common = route.methods & earlier.methods
            if common and earlier.path_regex.match(path):
                out.append(f"{sorted(common)[0]} {route.path} <- {earlier.path}")
                break
    return out


def test_no_route_is_shadowed_by_one_included_before_it():
    assert shadowed(ROUTERS) == []


def test_the_check_finds_the_shadowing_the_order_avoids():
    # catalog's /v1/pools/{id:path} would answer pricing's /v1/pools/{id}/history were it first
    swapped = (catalog.router, pricing.router)
    assert any("/v1/pools/{" in line and "/history" in line for line in shadowed(swapped))


def test_every_routes_module_is_included():
    import pkgutil

    import api.routes

    modules = {m.name for m in pkgutil.iter_modules(api.routes.__path__)}
    included = {r.routes[0].endpoint.__module__.rsplit(".", 1)[1] for r in ROUTERS if r.routes}
    assert included == modules
