"""FinOps use cases: savings by group, FOCUS rows, and the dashboard's aggregates.

Everything is aggregated here, server-side, so the dashboard downloads a few
kilobytes however many placements are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from broker.app import Broker
from broker.core.domain import Site
from broker.core.placement import Placement
from broker.errors import InvalidRequest
from broker.finops import store
from broker.finops.demand import actual_demand, bucket_seconds
from broker.finops.focus import focus_rows
from broker.finops.ledger import (
    GROUP_BYS,
    Figures,
    GroupFigures,
    LedgerEntry,
    SeriesPoint,
    series,
    summarize,
    summarize_by,
)
from broker.placements.store import PlacementStore
from broker.usage.day_ahead import day_ahead
from broker.usage.service import UsageStore

DEFAULT_WINDOW = timedelta(days=30)
MAX_FOCUS_WINDOW = timedelta(days=366)
LATEST = 15
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(2200, 1, 1, tzinfo=UTC)
MAX_DASHBOARD_WINDOW = timedelta(days=5 * 366)


#: The type of a window's ends, `?from=`/`?to=` of GET /v1/savings, /v1/export/focus and /v1/dashboard
#: (api/routes/finops.py), and the one the CLI parses its --from/--to with (broker.cli.options.api_time),
#: so both take the same values the same way: pydantic's datetime, an ISO 8601 date or date-time, or
#: Unix seconds (a bare number: `20240101` is seconds, not a date); a time without an offset is UTC (window).
WindowTime = datetime


def window(start: datetime | None, end: datetime | None, *, now: datetime | None = None) -> tuple[datetime, datetime]:
    """Resolve ?from=&to= (naive times are UTC): default the last 30 days up to now; a window
    reaching past now ends now."""
    for value, field in ((start, "from"), (end, "to")):
        if value is not None and not EARLIEST <= store.utc(value) <= LATEST_TIME:
            raise InvalidRequest(
                f"'{field}' is outside {EARLIEST.year}-{LATEST_TIME.year}",
                errors=[{"loc": ["query", field], "msg": "a time between 1970 and 2200"}],
            )
    now = now or datetime.now(UTC)
    end = store.utc(end) if end is not None else now
    start = store.utc(start) if start is not None else end - DEFAULT_WINDOW
    if start >= end:
        raise InvalidRequest(
            "the time window is empty",
            errors=[{"loc": ["query", "from"], "msg": "'from' must be before 'to'"}],
        )
    if start >= now:
        raise InvalidRequest(
            "nothing has accrued yet in a window that starts in the future",
            errors=[{"loc": ["query", "from"], "msg": f"a time before now ({now.isoformat(timespec='seconds')})"}],
        )
    # figures are what accrued (FOCUS BilledCost is billed spend): not the future part of a window
    return start, min(end, now)


@dataclass(frozen=True, slots=True)
class SavingsReport:
    start: datetime
    end: datetime
    tenant: str | None  # None: every tenant
    group_by: str
    totals: Figures
    groups: list[GroupFigures]


@dataclass(frozen=True, slots=True)
class PriceAge:
    provider: str
    price_as_of: str
    age_days: float | None  # None: the date does not parse
    stale: bool


@dataclass(frozen=True, slots=True)
class Dashboard:
    """Everything the dashboard draws for a window, aggregated server-side."""

    start: datetime
    end: datetime
    tenant: str | None
    totals: Figures
    step: timedelta
    series: list[SeriesPoint]
    by: dict[str, list[GroupFigures]]  # provider, site, tenant, team
    sites: Mapping[str, Site]  # the catalog's sites, for the site groups' map
    latest: list[Placement]  # the newest placements of the window
    prices: list[PriceAge]
    forecast: Mapping[str, Any]  # the forecasting area's comparison, as it reports it
    tenants: list[str]
    price_stale_after_days: float = 30.0  # the age past which `prices` are stale (the banner says it)
    demo_placements: int = 0  # of the window's placements, those `broker finops seed-demo` stored


@dataclass
class FinOps:
    broker: Broker

    def _load(self, tenant: str | None, start: datetime, end: datetime) -> tuple[list[LedgerEntry], list[Any]]:
        store.sync(self.broker.sessions)
        return store.load(self.broker.sessions, tenant=tenant, start=start, end=end)

    def savings(
        self, *, tenant: str | None, group_by: str, start: datetime | None = None, end: datetime | None = None
    ) -> SavingsReport:
        if group_by not in GROUP_BYS:
            raise InvalidRequest(
                f"cannot group by {group_by!r}",
                errors=[{"loc": ["query", "group_by"], "msg": f"one of {', '.join(GROUP_BYS)}"}],
            )
        lo, hi = window(start, end)
        entries, items = self._load(tenant, lo, hi)
        totals, groups = summarize(entries, items, group_by=group_by, start=lo, end=hi)
        return SavingsReport(lo, hi, tenant, group_by, totals, groups)

    def focus(
        self, *, tenant: str | None, start: datetime | None = None, end: datetime | None = None
    ) -> list[dict[str, Any]]:
        lo, hi = window(start, end)
        if hi - lo > MAX_FOCUS_WINDOW:
            raise InvalidRequest(
                "the export window is longer than 366 days",
                errors=[{"loc": ["query", "from"], "msg": "export at most 366 days at a time"}],
            )
        entries, items = self._load(tenant, lo, hi)
        return focus_rows(entries, items, start=lo, end=hi)

    def dashboard(self, *, tenant: str | None, start: datetime | None = None, end: datetime | None = None) -> Dashboard:
        lo, hi = window(start, end)
        if hi - lo > MAX_DASHBOARD_WINDOW:
            raise InvalidRequest(
                "the dashboard shows at most five years",
                errors=[{"loc": ["query", "from"], "msg": "a window of at most five years"}],
            )
        entries, items = self._load(tenant, lo, hi)
        step = timedelta(days=1) if hi - lo <= timedelta(days=120) else timedelta(days=7)
        totals, by = summarize_by(entries, items, group_bys=("provider", "site", "tenant", "team"), start=lo, end=hi)
        newest = sorted(entries, key=lambda e: (e.created_at, e.placement_id), reverse=True)[:LATEST]
        return Dashboard(
            start=lo,
            end=hi,
            tenant=tenant,
            totals=totals,
            step=step,
            series=series(entries, start=lo, end=hi, step=step),
            by=by,
            sites=self.broker.catalog().sites,
            latest=PlacementStore(self.broker.sessions).by_ids([e.placement_id for e in newest]),
            prices=self._prices(),
            forecast=self._forecast(tenant, lo, hi),
            tenants=store.tenants(self.broker.sessions),
            price_stale_after_days=self.broker.settings.price_stale_after_days,
            demo_placements=store.demo_count(self.broker.sessions, tenant=tenant, start=lo, end=hi),
        )

    def _prices(self) -> list[PriceAge]:
        cat = self.broker.catalog()
        limit = self.broker.settings.price_stale_after_days
        out = []
        for provider, as_of in sorted(cat.price_as_of.items()):
            try:
                when = store.utc(datetime.fromisoformat(as_of))
                age: float | None = round((datetime.now(UTC) - when) / timedelta(days=1), 1)
            except ValueError:
                age = None
            out.append(PriceAge(provider, as_of, age, age is None or age > limit))
        return out

    def _forecast(self, tenant: str | None, start: datetime, end: datetime) -> dict[str, Any]:
        """Forecast vs actual demand: the usage history's demand per bucket, and the day-ahead
        forecast of its last day (broker/usage/day_ahead.py) on the buckets of that day."""
        actual = actual_demand(self.broker.sessions, tenant=tenant, start=start, end=end)
        if not actual:
            return {"available": False, "reason": "no usage history in this window", "series": []}
        bucket = bucket_seconds(start, end)
        ahead = day_ahead(UsageStore(self.broker.sessions), tenant=tenant, start=start, end=end, bucket_s=bucket)
        if ahead is None:
            reason = "actual demand only: no usage history before its last day to forecast it from"
            return {"available": True, "reason": reason, "series": actual}
        points = {p["timestamp"]: p for p in actual}
        for b, (p50, p95) in ahead.buckets.items():
            stamp = datetime.fromtimestamp(b, UTC).isoformat()
            point = points.setdefault(stamp, {"timestamp": stamp, "actual": None, "p50": None, "p95": None})
            point["p50"], point["p95"] = round(p50, 4), round(p95, 4)
        return {
            "available": True,
            "reason": "",
            "series": [points[k] for k in sorted(points)],  # one ISO format, UTC: sorts as time
            "forecast": {
                "from": datetime.fromtimestamp(ahead.start, UTC).isoformat(),
                "to": datetime.fromtimestamp(ahead.end, UTC).isoformat(),
                "model_version": ahead.model_version,
                "method": ahead.method,
            },
        }
