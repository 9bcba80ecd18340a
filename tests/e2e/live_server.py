"""The API served by uvicorn in a thread, on a free local port, for browser and README tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from broker.app import Broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(broker: Broker, port: int | None = None, start_timeout_s: float = 30) -> Iterator[int]:
    """The port the broker's API answers on until the block ends."""
    from api.app import create_app

    port = port if port is not None else free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(broker=broker), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
