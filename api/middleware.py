"""The production service around the routes: request ids, JSON access logs, metrics, body size
limit, request timeout; plus `install(app)`, which wires auth, idempotency, jobs and /metrics."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import unavailable_answer
from api.middleware_problems import replay_body, send_document, send_problem
from api.openapi_refs import hoist_embedded_defs
from api.request_encoding import BodyRefused, body_chunks, content_encoding, decoded_scope, read_decoded
from broker.observability import REQUEST_SECONDS, configure_logging, request_id
from broker.settings import Settings

log = logging.getLogger("broker.access")


class ServiceMiddleware:
    """Outermost layer: everything here must hold even when the app below misbehaves."""

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.max_body = settings.max_body_bytes
        self.timeout = settings.request_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _incoming_id(scope) or uuid.uuid4().hex
        token = request_id.set(rid)
        started = time.perf_counter()
        status = {"code": 500, "started": False}
        # a Mount (the docs' static files) rewrites root_path in the scope it serves; the route
        # is looked up in the scope as it arrived
        arrived = dict(scope)

        async def send_wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["started"] = message["status"], True
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
            await send(message)

        try:
            length = _content_length(scope)
            if length is not None and length > self.max_body:
                await self._too_large(scope, send_wrapped)
                return
            encoding = content_encoding(scope)
            if encoding is not None and scope["method"] in ("POST", "PUT", "PATCH"):
                # gzip: decompressed here, under the same limit, so every layer below reads JSON
                try:
                    decoded = await read_decoded(receive, encoding, self.max_body)
                except BodyRefused as refused:
                    extra = dict(refused.extra)
                    await send_problem(
                        send_wrapped,
                        scope,
                        refused.status,
                        refused.title,
                        refused.detail,
                        refused.type_,
                        headers=extra.pop("headers", None),
                        **extra,
                    )
                    return
                scope, receive = decoded_scope(scope, decoded), replay_body(decoded)
            elif length is None and scope["method"] in ("POST", "PUT", "PATCH"):
                # no Content-Length (chunked): read it here, so the limit holds before any parsing
                body = await _read_limited(receive, self.max_body)
                if body is None:
                    await self._too_large(scope, send_wrapped)
                    return
                receive = replay_body(body)
            try:
                await asyncio.wait_for(self.app(scope, receive, send_wrapped), timeout=self.timeout)
            except TimeoutError:
                if not status["started"]:
                    await send_problem(
                        send_wrapped,
                        scope,
                        504,
                        "Timeout",
                        f"the request took longer than {self.timeout:g} s; large requests can run as "
                        'async jobs ("async": true)',
                        "timeout",
                    )
            except Exception as exc:
                # a dependency down under a middleware (an API key looked up in the database) is
                # the 503 a route's would be; anything else is left to the app's 500 handler
                answer = None if status["started"] else unavailable_answer(exc, instance=scope.get("path", ""))
                if answer is None:
                    raise
                await send_document(send_wrapped, answer[0], headers=answer[1])
        finally:
            elapsed = time.perf_counter() - started
            template = route_template(scope, arrived)
            REQUEST_SECONDS.labels(scope["method"], template, str(status["code"])).observe(elapsed)
            log.info(
                "%s %s %s",
                scope["method"],
                scope["path"],
                status["code"],
                extra={
                    "status": status["code"],
                    "duration_ms": round(elapsed * 1000, 1),
                    "route": template,
                    "tenant": getattr(scope.get("state", {}).get("principal"), "tenant", "-"),
                },
            )
            request_id.reset(token)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        await send_problem(
            send, scope, 413, "Request too large", f"the body exceeds {self.max_body} bytes", "request-too-large"
        )


def route_template(scope: Scope, arrived: Scope) -> str:
    """The path template of the route a request is (or would have been) served by, for metric
    and log labels: FastAPI marks its own operations in the scope, but framework routes
    (/metrics, /openapi.json, /docs) and answers given before routing (413, 504) are looked up
    in the app's routes with the scope as it `arrived`. "unmatched" only for paths no route
    serves, so labels stay bounded."""
    route: Any = scope.get("route")
    if getattr(route, "path", None):
        return str(route.path)
    app: Any = scope.get("app")
    return _template(getattr(getattr(app, "router", None), "routes", ()), arrived)[1] or "unmatched"


def _template(routes: Any, scope: Scope) -> tuple[Match, str | None]:
    """(FULL, template) of the route serving the request; else (PARTIAL, template) of one that
    serves its path with another method (a 405); else (NONE, None)."""
    best: tuple[Match, str | None] = (Match.NONE, None)
    for r in routes:
        try:
            match, child = r.matches(scope)
        except Exception:  # a path parameter a convertor refuses: that route does not serve it
            continue
        if match is Match.NONE:
            continue
        path = getattr(child.get("route"), "path", None) or getattr(r, "path", None)
        if path is None:  # a router included in the app: its own routes name the template
            _, path = _template(getattr(getattr(r, "original_router", None), "routes", ()), scope)
        if path is None:
            continue
        if match is Match.FULL:
            return match, str(path)
        if best[1] is None:
            best = (match, str(path))
    return best


def _incoming_id(scope: Scope) -> str | None:
    for k, v in scope.get("headers", []):
        if k == b"x-request-id":
            value = bytes(v).decode("latin-1")
            if 0 < len(value) <= 100 and value.isprintable():
                return value
    return None


def _content_length(scope: Scope) -> int | None:
    for k, v in scope.get("headers", []):
        if k == b"content-length":
            try:
                return int(v)
            except ValueError:
                return None
    return None


async def _read_limited(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    async for chunk in body_chunks(receive):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def metrics(request: Request) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    from broker.observability import StoredFigures

    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    # read on scrape from the queue and the database, whichever process ran the jobs: in no
    # process's samples (so no multiprocess file either)
    stored = CollectorRegistry(auto_describe=False)
    stored.register(StoredFigures(request.app.state.broker.sessions, lambda: _depth(request.app)))
    body = generate_latest(registry) + await to_thread.run_sync(generate_latest, stored)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def install(app: FastAPI) -> None:
    """Wire the production service into an app built by create_app (one call there)."""
    from api.auth import AuthMiddleware
    from api.middleware_idempotency import IdempotencyMiddleware
    from broker.access.keys import KeyStore
    from broker.app import Broker
    from broker.jobs.runner import make_queue, watch_abandoned

    broker: Broker = app.state.broker
    settings = broker.settings
    configure_logging(settings.log_format)
    app.state.keys = KeyStore(broker.sessions)
    app.state.jobs = make_queue(broker)
    app.add_route("/metrics", metrics, include_in_schema=False)
    # added innermost first: Service -> Auth -> Idempotency -> routes
    app.add_middleware(IdempotencyMiddleware, sessions=broker.sessions, ttl_hours=settings.idempotency_ttl_hours)
    app.add_middleware(AuthMiddleware, settings=settings, keys=app.state.keys)
    app.add_middleware(ServiceMiddleware, settings=settings)

    _document_service_responses(app)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        recovered = await to_thread.run_sync(app.state.jobs.recover)
        if recovered:
            log.info("re-enqueued %d queued jobs", recovered)
        # jobs left running by a runner that died (this API's own, before a kill -9, or a worker's)
        stop_watching = watch_abandoned(broker.sessions)
        if app.state.jobs.kind == "in-process":
            # no `broker worker` in this deployment: the API resumes interrupted dispatches itself,
            # on a thread, so a slow cluster cannot hold up the start
            from broker.jobs.worker import resume_dispatches

            threading.Thread(target=resume_dispatches, args=(broker,), name="resume-dispatch", daemon=True).start()
        async with inner(a) as state:
            try:
                yield state
            finally:  # before the app's own shutdown closes the Broker the jobs run on
                stop_watching()
                app.state.jobs.close()

    app.router.lifespan_context = lifespan


_SERVICE_RESPONSES = {
    "401": "no, an unknown or a revoked API key",
    "403": "the API key's role may not do this",
    "413": "the request body (compressed or, with Content-Encoding: gzip, decompressed) is larger than "
    "BROKER_MAX_BODY_BYTES",
    "429": "the API key's rate limit is exhausted (Retry-After says when to retry)",
    "504": "the request took longer than BROKER_REQUEST_TIMEOUT_S",
}


def _document_service_responses(app: FastAPI) -> None:
    """Add the answers the service layer can give on any operation to the OpenAPI document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = hoist_embedded_defs(build())  # every `$ref` must resolve from the root
        problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
        schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = {
            "type": "object",
            "description": "RFC 9457 problem details",
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "detail": {"type": "string"},
                "instance": {"type": "string"},
            },
            "required": ["type", "title", "status"],
        }
        for ops in schema.get("paths", {}).values():
            for method, op in ops.items():
                responses = op.setdefault("responses", {})
                codes = dict(_SERVICE_RESPONSES)
                if method == "post":
                    codes["409"] = "Idempotency-Key reused with another body, or its first request still runs"
                if method in ("post", "put", "patch"):
                    codes["415"] = "a Content-Encoding other than gzip"
                for code, why in codes.items():
                    responses.setdefault(code, {"description": why, "content": problem})
                # every other error is a problem document too (placement-api.md, Errors)
                responses.setdefault("default", {"description": "error (problem+json)", "content": problem})
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _depth(app: Any) -> float:
    try:
        return float(app.state.jobs.depth())
    except Exception:  # a scrape must not fail because the queue is unreachable
        return float("nan")
