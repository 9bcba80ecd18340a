"""What every price-feed adapter shares: the interface, the one error, retries and timeouts.

Adapters import their SDK lazily (inside fetch), so importing ``providers`` costs nothing
and a missing SDK only fails the provider that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from pricing.offers import FeedResult

T = TypeVar("T")
Progress = Callable[[str, int, int], None]  # (what, done, total)


class FeedUnavailable(Exception):
    """A feed could not be read or understood. The broker maps it to ``PricingUnavailable``."""

    def __init__(self, provider: str, region: str | None, detail: str) -> None:
        super().__init__(f"{provider}{':' + region if region else ''}: {detail}")
        self.provider = provider
        self.region = region
        self.detail = detail


class MalformedResponse(ValueError):
    """A pure parser met a response that is not in the provider's documented format."""


@dataclass(frozen=True, slots=True)
class FeedOptions:
    endpoint: str | None = None  # base URL override: tests, proxies, sovereign clouds
    timeout_s: float = 30.0
    attempts: int = 4  # per request, with exponential backoff and jitter
    backoff_s: float = 0.5


class PriceSource(Protocol):
    name: str

    def fetch(self, regions: Sequence[str], progress: Progress | None = None) -> FeedResult: ...


def with_retries(call: Callable[[], T], *, options: FeedOptions, retryable: Callable[[BaseException], bool]) -> T:
    """Run `call`, retrying transient failures (`retryable`) with exponential backoff and jitter."""
    for attempt in Retrying(
        stop=stop_after_attempt(options.attempts),
        wait=wait_exponential_jitter(multiplier=options.backoff_s, max=options.backoff_s * 16),
        retry=retry_if_exception(retryable),
        reraise=True,
    ):
        with attempt:
            return call()
    raise AssertionError("unreachable: tenacity reraises the last error")  # pragma: no cover


def noop_progress(what: str, done: int, total: int) -> None:
    return None
