"""problem+json answers sent straight from ASGI middleware (outside FastAPI's exception handlers)."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Scope, Send

PROBLEM = "application/problem+json"


def problem_body(scope: Scope, status: int, title: str, detail: str, type_: str, **extra: Any) -> bytes:
    doc = {
        "type": f"https://placement-broker.dev/problems/{type_}",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": scope.get("path", ""),
        **extra,
    }
    return json.dumps(doc).encode()


async def send_problem(
    send: Send,
    scope: Scope,
    status: int,
    title: str,
    detail: str,
    type_: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> None:
    body = problem_body(scope, status, title, detail, type_, **extra)
    raw = [(b"content-type", PROBLEM.encode()), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
