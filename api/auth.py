"""Authentication, roles and per-key rate limits, as one ASGI middleware in front of every route.

Doing it here rather than per route means a router another area adds is
protected the moment it is registered: every /v1 path needs a key (when
BROKER_AUTH=required), and the role a request needs follows from its method
and path (ROLE RULES below). Routes only take `tenant = Depends(get_tenant)`
to scope what they read and write.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from anyio import to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from api.middleware_problems import send_problem
from broker.access.keys import LOCAL, KeyStore, Principal, Role
from broker.observability import RATE_LIMITED, tenant_var
from broker.settings import Settings

log = logging.getLogger("broker.auth")

# the scheduler extender cannot send a key; it reads list prices only (api/routes/extender.py)
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc", "/extender/filter", "/extender/prioritize"}
)
# ROLE RULES. Reads need viewer, except key management. Writes need admin (catalog, pricing,
# sites, clusters, keys, budgets), except these planner prefixes (placing and dispatching).
PLANNER_WRITES = (
    "/v1/placements",
    "/v1/dispatch",
    "/v1/jobs",
    "/v1/usage",
    "/v1/workloads",  # usage samples: POST /v1/workloads/{name}/usage, sent by the pipelines that place
    "/v1/forecast",
    "/v1/simulat",
    "/v1/latency/measurements",  # a tenant's own RTT measurements, used by its placements
)
ADMIN_READS = ("/v1/apikeys",)
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def needed_role(method: str, path: str) -> Role:
    if method in READ_METHODS:
        return Role.admin if path.startswith(ADMIN_READS) else Role.viewer
    return Role.planner if path.startswith(PLANNER_WRITES) else Role.admin


def protected(path: str) -> bool:
    if path in PUBLIC_PATHS or path.startswith("/docs"):
        return False
    # the dashboard's HTML and assets are public; the data it shows comes from /v1 with a key
    return path.startswith("/v1") or not path.startswith("/dashboard")


def is_loopback_connection(scope: Scope) -> bool:
    """Whether the connection arrived on a loopback interface (scope["server"] is the local socket)."""
    server = scope.get("server")
    if not server:
        return True  # unix socket
    try:
        return ipaddress.ip_address(str(server[0])).is_loopback
    except ValueError:
        return True  # not an address: an in-process test client


class RateLimiter:
    """Sliding-window counter per API key; shared by all API processes when Redis is configured."""

    def __init__(self, settings: Settings) -> None:
        from limits import parse
        from limits.storage import MemoryStorage, storage_from_string
        from limits.strategies import SlidingWindowCounterRateLimiter

        self.item = parse(settings.rate_limit)
        storage = storage_from_string(settings.redis_url, socket_timeout=2) if settings.redis_url else MemoryStorage()
        self._limiter = SlidingWindowCounterRateLimiter(storage)

    def hit(self, who: str) -> tuple[bool, int]:
        """(allowed, seconds to wait). Fails open if the shared store is unreachable."""
        try:
            if self._limiter.hit(self.item, who):
                return True, 0
            reset = self._limiter.get_window_stats(self.item, who).reset_time
        except Exception:  # Redis down must not take the API down with it
            log.warning("rate limit store unreachable; request allowed", exc_info=True)
            return True, 0
        import time

        return False, max(1, int(reset - time.time()) + 1)


class AuthMiddleware:
    def __init__(self, app: ASGIApp, *, settings: Settings, keys: KeyStore) -> None:
        self.app = app
        self.settings = settings
        self.keys = keys
        self.limiter = RateLimiter(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not protected(scope["path"]):
            await self.app(scope, receive, send)
            return
        principal = await self._principal(scope, send)
        if principal is None:
            return
        need = needed_role(scope["method"], scope["path"])
        if not principal.may(need):
            await send_problem(
                send,
                scope,
                403,
                "Forbidden",
                f"this needs the {need.name} role; the key has {principal.role.name}",
                "forbidden",
            )
            return
        allowed, wait = await to_thread.run_sync(self.limiter.hit, principal.key_id or _client(scope))
        if not allowed:
            RATE_LIMITED.inc()
            await send_problem(
                send,
                scope,
                429,
                "Too many requests",
                f"rate limit {self.settings.rate_limit} per key exceeded",
                "rate-limited",
                headers={"retry-after": str(wait)},
            )
            return
        scope.setdefault("state", {})["principal"] = principal
        token = tenant_var.set(principal.tenant)
        try:
            await self.app(scope, receive, send)
        finally:
            tenant_var.reset(token)

    async def _principal(self, scope: Scope, send: Send) -> Principal | None:
        header = _header(scope, b"authorization")
        if header is None:
            if self.settings.auth == "off":
                if is_loopback_connection(scope):
                    return LOCAL
                await send_problem(
                    send,
                    scope,
                    401,
                    "Unauthorized",
                    "authentication is off on this server, so it serves loopback connections only; "
                    "set BROKER_AUTH=required and use an API key",
                    "unauthorized",
                    headers={"www-authenticate": "Bearer"},
                )
                return None
            await send_problem(
                send,
                scope,
                401,
                "Unauthorized",
                "send an API key: 'Authorization: Bearer KEY'",
                "unauthorized",
                headers={"www-authenticate": "Bearer"},
            )
            return None
        scheme, _, token = header.partition(" ")
        principal = None
        if scheme.lower() == "bearer" and token.strip():
            principal = await to_thread.run_sync(self.keys.verify, token.strip())
        if principal is None:
            await send_problem(
                send,
                scope,
                401,
                "Unauthorized",
                "the API key is unknown, malformed or revoked",
                "unauthorized",
                headers={"www-authenticate": 'Bearer error="invalid_token"'},
            )
        return principal


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", []):
        if k == name:
            return bytes(v).decode("latin-1")
    return None


def _client(scope: Scope) -> str:
    client: Any = scope.get("client")
    return f"ip:{client[0]}" if client else "ip:-"


def principal_of(scope: Scope) -> Principal:
    """The principal AuthMiddleware resolved; LOCAL on unprotected paths."""
    p = scope.get("state", {}).get("principal")
    return p if isinstance(p, Principal) else LOCAL
