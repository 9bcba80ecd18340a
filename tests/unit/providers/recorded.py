"""Recorded provider responses (tests/fixtures/providers/), in the providers' documented formats."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "providers"


def fixture_bytes(name: str, base: str = "") -> bytes:
    """A recorded body; ``{BASE}`` (in next-page links) becomes the local server's URL."""
    return (FIXTURES / name).read_bytes().replace(b"{BASE}", base.encode())


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    @property
    def form(self) -> dict[str, list[str]]:  # EC2 query-protocol requests are form-encoded
        return parse_qs(self.body.decode())

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


Reply = tuple[int, str, bytes]


@dataclass
class FeedServer:
    url: str
    route: Callable[[Seen], Reply] = lambda seen: (404, "text/plain", b"no route")
    seen: list[Seen] = field(default_factory=list)


@contextmanager
def running_feed_server() -> Iterator[FeedServer]:
    """A threaded HTTP server on 127.0.0.1 (random port) that answers with `state.route(request)`."""
    state = FeedServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            n = int(self.headers.get("Content-Length") or 0)
            seen = Seen(self.command, parts.path, parse_qs(parts.query), dict(self.headers), self.rfile.read(n))
            state.seen.append(seen)
            status, ctype, body = state.route(seen)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _serve

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
