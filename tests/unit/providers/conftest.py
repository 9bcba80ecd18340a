"""A local HTTP server that serves recorded provider responses, so each adapter's real network
code path (SDK or httpx, retries, paging, endpoint override) runs without the internet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.providers.recorded import FeedServer, running_feed_server


@pytest.fixture()
def feed_server() -> Iterator[FeedServer]:
    with running_feed_server() as server:
        yield server
