"""Error hierarchy of the broker. Only api/errors.py maps these to HTTP."""

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


class Conflict(BrokerError):
    title = "Conflict"


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


class PricingUnavailable(BrokerError):
    title = "Pricing unavailable"

    def __init__(self, provider: str, region: str | None = None, detail: str = "") -> None:
        where = f"{provider}:{region}" if region else provider
        super().__init__(detail or f"prices for {where} could not be fetched", provider=provider, region=region)
        self.provider = provider
        self.region = region
