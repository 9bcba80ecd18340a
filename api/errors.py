"""The only place that sends errors as HTTP answers: RFC 9457 problem+json documents.

The documents themselves (status, type, members) come from broker.problems, the builder
that async jobs use too, so a failed job's `error` is the body the request would have got.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.body_errors import not_a_json_document, unreadable
from broker.db.session import unreachable
from broker.errors import BrokerError, DatabaseUnavailable, Unavailable
from broker.problems import MEDIA_TYPE, error_problem, field_errors, internal_problem
from broker.problems import problem as problem_document

log = logging.getLogger("broker.api")

# Starlette's own errors (unknown route, wrong method, ...): title and problem type
_HTTP_TITLES = {404: "Not found", 405: "Method not allowed", 413: "Request too large"}


def respond(doc: dict[str, Any], *, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(doc, status_code=int(doc["status"]), media_type=MEDIA_TYPE, headers=headers)


def problem(status: int, title: str, detail: str, type_: str, request: Request, **extra: Any) -> JSONResponse:
    """A problem answer to `request` (for routes whose answer is an error without raising one)."""
    return respond(problem_document(status, title, detail, type_, instance=request.url.path, **extra))


def unavailable(exc: BaseException) -> Unavailable | None:
    """The 503 a failure of a dependency answers (the database or the job queue cannot be
    reached), or None when `exc` is something else."""
    if isinstance(exc, Unavailable):
        return exc
    if unreachable(exc):
        log.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return DatabaseUnavailable("the database cannot be reached; retry later")
    return None


def unavailable_answer(exc: BaseException, *, instance: str) -> tuple[dict[str, Any], dict[str, str]] | None:
    """(problem document, headers) of the 503 for a dependency's failure, or None. Used by the
    exception handlers below and by the service middleware, for failures in middleware (an API
    key looked up in a database that is down)."""
    if (error := unavailable(exc)) is None:
        return None
    return error_problem(error, instance=instance), {"Retry-After": str(error.retry_after_s)}


def install(app: FastAPI) -> None:
    @app.exception_handler(BrokerError)
    async def _broker_error(request: Request, exc: BrokerError) -> JSONResponse:
        if (answer := unavailable_answer(exc, instance=request.url.path)) is not None:
            return respond(answer[0], headers=answer[1])
        return respond(error_problem(exc, instance=request.url.path))

    def _unavailable_or_internal(request: Request, exc: Exception, what: str) -> JSONResponse:
        if (answer := unavailable_answer(exc, instance=request.url.path)) is not None:
            return respond(answer[0], headers=answer[1])
        log.exception("unhandled %s on %s", what, request.url.path)
        return respond(internal_problem(instance=request.url.path))

    @app.exception_handler(SQLAlchemyError)
    async def _database(request: Request, exc: SQLAlchemyError) -> JSONResponse:
        return _unavailable_or_internal(request, exc, "database error")

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        if (unreadable := not_a_json_document(exc, request)) is not None:
            return problem(422, "Invalid request", unreadable[0], "invalid-request", request, errors=unreadable[1])
        errors = field_errors(exc.errors())
        where = ", ".join(list(dict.fromkeys(".".join(str(p) for p in e["loc"]) for e in errors))[:3])
        return problem(422, "Invalid request", f"invalid field(s): {where}", "invalid-request", request, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if (body := unreadable(exc)) is not None:
            return problem(422, "Invalid request", body[0], "invalid-request", request, errors=body[1])
        title = _HTTP_TITLES.get(exc.status_code, "Error")
        doc = problem_document(
            exc.status_code, title, str(exc.detail), title.lower().replace(" ", "-"), instance=request.url.path
        )
        return respond(doc, headers=exc.headers)  # e.g. the Allow header of a 405

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _unavailable_or_internal(request, exc, "error")
