"""Compressed request bodies: `Content-Encoding: gzip`, decompressed under the body limit.

Request documents compress well (figures in docs/operations.md), so clients that send big
requests can compress them. The limit (BROKER_MAX_BODY_BYTES) holds for the compressed bytes
read and for the decompressed ones: decompression stops as soon as the output would pass it,
so a small "gzip bomb" costs at most the limit in memory.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.types import Receive, Scope

SUPPORTED = ("gzip", "x-gzip")


class BodyRefused(Exception):
    """An answer for a body that cannot be read: status, title, detail, problem type, extras."""

    def __init__(self, status: int, title: str, detail: str, type_: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.type_, self.extra = status, title, detail, type_, extra


def content_encoding(scope: Scope) -> str | None:
    """The request's content coding, lower case; None for none or `identity`."""
    for k, v in scope.get("headers", []):
        if k == b"content-encoding":
            codings = [c.strip().lower() for c in bytes(v).decode("latin-1").split(",") if c.strip()]
            codings = [c for c in codings if c != "identity"]
            return ", ".join(codings) or None
    return None


async def body_chunks(receive: Receive) -> AsyncIterator[bytes]:
    """The request body's chunks as the server hands them over, up to the last one or a disconnect."""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


async def read_decoded(receive: Receive, encoding: str, limit: int) -> bytes:
    """The whole body, decompressed; BodyRefused when it is too large, not gzip, or another coding."""
    if encoding not in SUPPORTED:
        raise BodyRefused(
            415,
            "Unsupported content encoding",
            f"Content-Encoding {encoding!r} is not supported; send the body uncompressed or gzip-compressed",
            "unsupported-content-encoding",
            headers={"Accept-Encoding": "gzip"},
        )
    out = bytearray()
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    read = 0
    try:
        async for chunk in body_chunks(receive):
            read += len(chunk)
            if read > limit:
                raise _too_large(limit, "compressed")
            while chunk:
                out += d.decompress(chunk, limit + 1 - len(out))
                if len(out) > limit:
                    raise _too_large(limit, "decompressed")
                chunk = d.unconsumed_tail
                if d.eof and d.unused_data:  # another gzip member follows (RFC 1952 allows several)
                    chunk, d = d.unused_data, zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        out += d.flush()
    except zlib.error as exc:
        msg = f"the body is not valid gzip ({exc})"
        raise BodyRefused(
            422, "Invalid request", msg, "invalid-request", errors=[{"loc": ["body"], "msg": msg, "type": "gzip"}]
        ) from exc
    if len(out) > limit:
        raise _too_large(limit, "decompressed")
    if read and not d.eof:
        msg = "the body is not valid gzip (it ends before the compressed stream does)"
        raise BodyRefused(
            422, "Invalid request", msg, "invalid-request", errors=[{"loc": ["body"], "msg": msg, "type": "gzip"}]
        )
    return bytes(out)


def _too_large(limit: int, what: str) -> BodyRefused:
    return BodyRefused(413, "Request too large", f"the {what} body exceeds {limit} bytes", "request-too-large")


def decoded_scope(scope: Scope, body: bytes) -> Scope:
    """The scope the app sees for a decompressed body: no Content-Encoding, its real length."""
    headers = [(k, v) for k, v in scope.get("headers", []) if k not in (b"content-encoding", b"content-length")]
    return {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
