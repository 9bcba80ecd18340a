"""problem+json answers sent straight from ASGI middleware (outside FastAPI's exception handlers)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from broker.problems import MEDIA_TYPE, problem


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
    doc = problem(status, title, detail, type_, instance=scope.get("path", ""), **extra)
    await send_document(send, doc, headers=headers)


async def send_document(send: Send, doc: dict[str, Any], *, headers: Mapping[str, str] | None = None) -> None:
    """Send a problem document built already (its `status` is the answer's)."""
    body = json.dumps(doc).encode()
    raw = [(b"content-type", MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": int(doc["status"]), "headers": raw})
    await send({"type": "http.response.body", "body": body})


def replay_body(body: bytes) -> Receive:
    """A receive() that hands the already-read request body to the app once."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive
