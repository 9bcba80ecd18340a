"""Error hierarchy of the broker. broker/problems.py turns them into problem documents (with
their HTTP status); api/errors.py is the only place that sends those as HTTP answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class BrokerError(Exception):
    title = "Broker error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class NotFound(BrokerError):
    title = "Not found"


class Forbidden(BrokerError):
    """The caller is known but may not do this: its role, or a tenant naming a path on the server
    (authentication failures are 401, in api/auth.py)."""

    title = "Forbidden"


class Conflict(BrokerError):
    title = "Conflict"


class NotConfigured(BrokerError):
    """The server lacks the configuration this request needs (e.g. no key to encrypt credentials)."""

    title = "Not configured"


class InvalidRequest(BrokerError):
    """Bad input. `errors` points at the offending fields: [{"loc": [...], "msg": ...}]."""

    title = "Invalid request"

    def __init__(self, detail: str, errors: Sequence[dict[str, Any]] = (), **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.errors = list(errors)


class Infeasible(BrokerError):
    """No placement satisfies every hard constraint; `conflicts` is a minimal conflicting set."""

    title = "Infeasible placement request"

    def __init__(self, detail: str, conflicts: Sequence[str], **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.conflicts = list(conflicts)


class OverBudget(BrokerError):
    title = "Over budget"


class Unavailable(BrokerError):
    """A service the broker depends on cannot be reached right now: a 503 with `Retry-After`
    (seconds), since the same request may well succeed once it is back."""

    title = "Service unavailable"
    retry_after_s = 5


class DatabaseUnavailable(Unavailable):
    title = "Database unavailable"


class QueueUnavailable(Unavailable):
    """The job queue (Redis) refused or could not take a job: nothing was queued."""

    title = "Job queue unavailable"


class RunnerStopped(BrokerError):
    """A job's runner (a `broker worker`, or the API process running it) stopped while it ran:
    killed, crashed, out of memory. The job is failed with this, not run again."""

    title = "Job runner stopped"


class PricingUnavailable(BrokerError):
    title = "Pricing unavailable"

    def __init__(self, provider: str, region: str | None = None, detail: str = "") -> None:
        where = f"{provider}:{region}" if region else provider
        super().__init__(detail or f"prices for {where} could not be fetched", provider=provider, region=region)
        self.provider = provider
        self.region = region
