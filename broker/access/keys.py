"""API keys, tenants and roles.

A key looks like `pbk_<id>_<secret>`. Only SHA-256(secret) is stored: keys are
256-bit random tokens, so a fast hash is as safe as a slow password hash here
and keeps authentication cheap on every request. The key is shown once.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from broker.db.service_models import ApiKeyRow
from broker.db.session import transaction
from broker.errors import InvalidRequest, NotFound

TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
_KEY_RE = re.compile(r"^pbk_([a-z0-9]{16})_([A-Za-z0-9_-]{43})$")
# verified keys are cached briefly so a request costs no database round trip;
# a revoked key stops working within this many seconds on every API process
CACHE_SECONDS = 10.0


class Role(IntEnum):
    """Each role may do what the roles below it may: viewer reads, planner places, admin manages."""

    viewer = 1
    planner = 2
    admin = 3


@dataclass(frozen=True, slots=True)
class Principal:
    tenant: str
    role: Role
    key_id: str | None  # None when authentication is off (local single-user run)

    def may(self, needed: Role) -> bool:
        return self.role >= needed


LOCAL = Principal(tenant="default", role=Role.admin, key_id=None)


def parse_role(value: str) -> Role:
    try:
        return Role[value]
    except KeyError as exc:
        raise InvalidRequest(
            f"unknown role {value!r}",
            errors=[{"loc": ["body", "role"], "msg": "must be viewer, planner or admin"}],
        ) from exc


def check_tenant(tenant: str) -> str:
    if not TENANT_RE.match(tenant):
        raise InvalidRequest(
            f"invalid tenant name {tenant!r}",
            errors=[{"loc": ["body", "tenant"], "msg": "lowercase letters, digits, '.', '_', '-'"}],
        )
    return tenant


def _sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class KeyStore:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def create(self, *, tenant: str, role: Role, name: str = "") -> tuple[dict[str, Any], str]:
        """A new key: (its description, the key itself, which is never retrievable again)."""
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        with transaction(self._sessions) as s:
            row = ApiKeyRow(
                id=key_id,
                tenant=check_tenant(tenant),
                role=role.name,
                name=name[:200],
                secret_sha256=_sha(secret),
                created_at=datetime.now(UTC),
            )
            s.add(row)
            desc = _describe(row)
        return desc, f"pbk_{key_id}_{secret}"

    def verify(self, token: str) -> Principal | None:
        m = _KEY_RE.match(token)
        if m is None:
            return None
        cache_key = _sha(token)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(cache_key)
        if hit is not None and hit[0] > now:
            return hit[1]
        key_id, secret = m.groups()
        with self._sessions() as s:
            row = s.get(ApiKeyRow, key_id)
            principal = None
            if row is not None and row.revoked_at is None and hmac.compare_digest(row.secret_sha256, _sha(secret)):
                principal = Principal(tenant=row.tenant, role=Role[row.role], key_id=row.id)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[cache_key] = (now + CACHE_SECONDS, principal)
        return principal

    def list_keys(self, *, tenant: str) -> list[dict[str, Any]]:
        with self._sessions() as s:
            rows = s.scalars(select(ApiKeyRow).where(ApiKeyRow.tenant == tenant).order_by(ApiKeyRow.created_at))
            return [_describe(r) for r in rows]

    def revoke(self, key_id: str, *, tenant: str) -> dict[str, Any]:
        with transaction(self._sessions) as s:
            row = s.get(ApiKeyRow, key_id)
            if row is None or row.tenant != tenant:
                raise NotFound(f"API key {key_id!r} does not exist")
            if row.revoked_at is None:
                row.revoked_at = datetime.now(UTC)
            desc = _describe(row)
        with self._lock:
            self._cache.clear()
        return desc


def _describe(row: ApiKeyRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "tenant": row.tenant,
        "role": row.role,
        "name": row.name,
        "created_at": row.created_at.isoformat(),
        "revoked_at": row.revoked_at.isoformat() if row.revoked_at else None,
    }
