"""RFC 9457 problem documents: the one builder of every error body the broker hands out.

The API's exception handlers and ASGI middleware send these documents, and an async job
stores the document its request would have been answered with synchronously, so a client
reads a failed job's `error` exactly as it reads a 422. Pure: no web framework, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from broker.errors import (
    BrokerError,
    Conflict,
    DatabaseUnavailable,
    Forbidden,
    Infeasible,
    InvalidRequest,
    NotConfigured,
    NotFound,
    OverBudget,
    PricingUnavailable,
    QueueUnavailable,
    RunnerStopped,
    Unavailable,
)

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://placement-broker.dev/problems/"

# (HTTP status, problem type) of each broker error; the first matching class wins, so
# subclasses come before their bases. An error not listed is a 400 bad-request.
_KINDS: tuple[tuple[type[BrokerError], int, str], ...] = (
    (Forbidden, 403, "forbidden"),
    (NotFound, 404, "not-found"),
    (Conflict, 409, "conflict"),
    (Infeasible, 422, "infeasible"),
    (OverBudget, 422, "over-budget"),
    (InvalidRequest, 422, "invalid-request"),
    (PricingUnavailable, 503, "pricing-unavailable"),
    (NotConfigured, 503, "not-configured"),
    (DatabaseUnavailable, 503, "database-unavailable"),
    (QueueUnavailable, 503, "queue-unavailable"),
    (Unavailable, 503, "unavailable"),
    (RunnerStopped, 503, "runner-stopped"),
)
INTERNAL_DETAIL = "an unexpected error occurred; it has been logged"


def problem(status: int, title: str, detail: str, type_: str, *, instance: str, **extra: Any) -> dict[str, Any]:
    """A problem document; `extra` adds members (errors, conflicts, budget, ...)."""
    return {
        "type": TYPE_BASE + type_,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
        **extra,
    }


def error_problem(exc: BrokerError, *, instance: str) -> dict[str, Any]:
    """The document for a broker error: its status, title and detail, its extra members,
    the conflicting constraints of an infeasible request, the fields of an invalid one."""
    status, type_ = next(((s, t) for cls, s, t in _KINDS if isinstance(exc, cls)), (400, "bad-request"))
    extra: dict[str, Any] = {k: v for k, v in exc.extra.items() if v is not None}
    if isinstance(exc, Infeasible):
        extra["conflicts"] = list(exc.conflicts)
    if isinstance(exc, InvalidRequest):
        extra["errors"] = field_errors(exc.errors)
    return problem(status, exc.title, exc.detail, type_, instance=instance, **extra)


def internal_problem(*, instance: str) -> dict[str, Any]:
    """An unexpected failure: nothing about it leaves the server but that it was logged."""
    return problem(500, "Internal error", INTERNAL_DETAIL, "internal", instance=instance)


def field_errors(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`errors` members in one shape ({"loc": [...], "msg": str, "type": str}), whoever found them."""
    return [
        {"loc": list(e.get("loc", [])), "msg": str(e.get("msg", "")), "type": e.get("type", "value_error")}
        for e in errors
    ]
