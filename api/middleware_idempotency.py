"""Idempotency-Key on every POST: same key and body -> the same answer, nothing done twice."""

from __future__ import annotations

import hashlib
import random

from anyio import to_thread
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import principal_of
from api.middleware_problems import replay_body, send_problem
from broker.access.idempotency import IdempotencyStore, Stored

KEPT_HEADERS = (b"content-type", b"location")
MAX_KEY_LENGTH = 255


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp, *, sessions: sessionmaker[Session], ttl_hours: float) -> None:
        self.app = app
        self.store = IdempotencyStore(sessions, ttl_hours=ttl_hours)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _key(scope) if scope["type"] == "http" and scope["method"] == "POST" else None
        if key is None:
            await self.app(scope, receive, send)
            return
        if not 0 < len(key) <= MAX_KEY_LENGTH:
            await send_problem(
                send,
                scope,
                400,
                "Bad request",
                f"Idempotency-Key must be 1..{MAX_KEY_LENGTH} characters",
                "bad-request",
            )
            return
        body = await _read_all(receive)
        fingerprint = hashlib.sha256(
            b"\n".join([scope["path"].encode(), scope.get("query_string", b""), body])
        ).hexdigest()
        who = principal_of(scope).key_id or "local"
        outcome, stored = await to_thread.run_sync(self.store.begin, who, key, fingerprint)
        if outcome == "mismatch":
            await send_problem(
                send,
                scope,
                409,
                "Conflict",
                "this Idempotency-Key was used with a different request; use a new key",
                "idempotency-key-reused",
            )
            return
        if outcome == "pending":
            await send_problem(
                send,
                scope,
                409,
                "Conflict",
                "a request with this Idempotency-Key is still being processed; retry later",
                "idempotency-key-in-use",
                headers={"retry-after": "1"},
            )
            return
        if outcome == "replay" and stored is not None:
            headers = [(k.encode(), v.encode()) for k, v in stored.headers.items()]
            headers += [(b"content-length", str(len(stored.body)).encode()), (b"idempotent-replayed", b"true")]
            await send({"type": "http.response.start", "status": stored.status_code, "headers": headers})
            await send({"type": "http.response.body", "body": stored.body})
            return

        captured = _Captured()

        async def capture(message: Message) -> None:
            captured.see(message)
            await send(message)

        done = False
        try:
            await self.app(scope, replay_body(body), capture)
            done = True
        finally:
            if done and captured.status < 500:
                await to_thread.run_sync(self.store.complete, who, key, captured.stored())
            else:
                await to_thread.run_sync(self.store.abandon, who, key)
        if random.random() < 0.01:  # old records are purged now and then, not on every request
            await to_thread.run_sync(self.store.purge)


class _Captured:
    """The answer as it goes out, to be kept for retries."""

    def __init__(self) -> None:
        self.status = 500
        self.headers: dict[str, str] = {}
        self.parts: list[bytes] = []

    def see(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.headers = {
                bytes(k).decode(): bytes(v).decode() for k, v in message.get("headers", []) if k in KEPT_HEADERS
            }
        elif message["type"] == "http.response.body":
            self.parts.append(bytes(message.get("body", b"")))

    def stored(self) -> Stored:
        return Stored(self.status, self.headers, b"".join(self.parts))


def _key(scope: Scope) -> str | None:
    for k, v in scope.get("headers", []):
        if k == b"idempotency-key":
            return bytes(v).decode("latin-1").strip()
    return None


async def _read_all(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
