"""The only place that maps broker errors to HTTP: RFC 9457 problem+json documents."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from broker.errors import (
    BrokerError,
    Conflict,
    Infeasible,
    InvalidRequest,
    NotFound,
    OverBudget,
    PricingUnavailable,
)

PROBLEM = "application/problem+json"
log = logging.getLogger("broker.api")

_STATUS: dict[type[BrokerError], int] = {
    NotFound: 404,
    Conflict: 409,
    InvalidRequest: 422,
    Infeasible: 422,
    OverBudget: 422,
    PricingUnavailable: 503,
}
_TYPE: dict[type[BrokerError], str] = {
    NotFound: "not-found",
    Conflict: "conflict",
    InvalidRequest: "invalid-request",
    Infeasible: "infeasible",
    OverBudget: "over-budget",
    PricingUnavailable: "pricing-unavailable",
}


def problem(status: int, title: str, detail: str, type_: str, request: Request, **extra: Any) -> JSONResponse:
    body = {
        "type": f"https://placement-broker.dev/problems/{type_}",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": str(request.url.path),
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM)


def _clean(errors: list[Any]) -> list[dict[str, Any]]:
    out = []
    for e in errors:
        out.append(
            {
                "loc": list(e.get("loc", [])),
                "msg": str(e.get("msg", "")),
                "type": e.get("type", "value_error"),
            }
        )
    return out


def install(app: FastAPI) -> None:
    @app.exception_handler(BrokerError)
    async def _broker_error(request: Request, exc: BrokerError) -> JSONResponse:
        status = next((s for t, s in _STATUS.items() if isinstance(exc, t)), 400)
        type_ = next((s for t, s in _TYPE.items() if isinstance(exc, t)), "bad-request")
        extra: dict[str, Any] = {k: v for k, v in exc.extra.items() if v is not None}
        if isinstance(exc, Infeasible):
            extra["conflicts"] = exc.conflicts
        if isinstance(exc, InvalidRequest):
            extra["errors"] = _clean(exc.errors)
        return problem(status, exc.title, exc.detail, type_, request, **extra)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _clean(list(exc.errors()))
        where = ", ".join(".".join(str(p) for p in e["loc"]) for e in errors[:3])
        return problem(422, "Invalid request", f"invalid field(s): {where}", "invalid-request", request, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        title = {404: "Not found", 405: "Method not allowed", 413: "Request too large"}.get(exc.status_code, "Error")
        return problem(exc.status_code, title, str(exc.detail), title.lower().replace(" ", "-"), request)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return problem(500, "Internal error", "an unexpected error occurred; it has been logged", "internal", request)
