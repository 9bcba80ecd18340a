"""Idempotency-Key records: the first answer to a POST, replayed to its retries.

Following the IETF httpapi Idempotency-Key draft: a key is scoped to the API key
that sent it, bound to a fingerprint of the request (method, path, body); the
same key with another request is a conflict, and a key whose first request is
still running is a conflict too (the client retries later). Answers >= 500 are
not kept, so a retry after a server failure runs again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from broker.db.service_models import IdempotencyRow
from broker.db.session import transaction

Outcome = Literal["new", "replay", "mismatch", "pending"]


@dataclass(frozen=True, slots=True)
class Stored:
    status_code: int
    headers: dict[str, str]
    body: bytes


class IdempotencyStore:
    def __init__(self, sessions: sessionmaker[Session], *, ttl_hours: float = 24.0) -> None:
        self._sessions = sessions
        self._ttl = timedelta(hours=ttl_hours)

    def begin(self, scope: str, key: str, fingerprint: str) -> tuple[Outcome, Stored | None]:
        now = datetime.now(UTC)
        try:
            with transaction(self._sessions) as s:
                row = s.get(IdempotencyRow, (scope, key))
                if row is not None and row.created_at < now - self._ttl:
                    s.delete(row)
                    s.flush()
                    row = None
                if row is None:
                    s.add(
                        IdempotencyRow(
                            scope=scope, key=key, request_sha256=fingerprint, state="pending", created_at=now
                        )
                    )
                    return "new", None
                if row.state != "done" or row.status_code is None:
                    return "pending", None
                if row.request_sha256 != fingerprint:
                    return "mismatch", None
                return "replay", Stored(row.status_code, dict(row.headers or {}), bytes(row.body or b""))
        except IntegrityError:
            return "pending", None  # another request with this key was inserted a moment ago

    def complete(self, scope: str, key: str, stored: Stored) -> None:
        with transaction(self._sessions) as s:
            row = s.get(IdempotencyRow, (scope, key))
            if row is None:
                return
            row.state = "done"
            row.status_code = stored.status_code
            row.headers = stored.headers
            row.body = stored.body

    def abandon(self, scope: str, key: str) -> None:
        with transaction(self._sessions) as s:
            s.execute(delete(IdempotencyRow).where(IdempotencyRow.scope == scope, IdempotencyRow.key == key))

    def purge(self) -> int:
        cutoff = datetime.now(UTC) - self._ttl
        with transaction(self._sessions) as s:
            res = s.execute(delete(IdempotencyRow).where(IdempotencyRow.created_at < cutoff))
            return int(getattr(res, "rowcount", 0) or 0)
