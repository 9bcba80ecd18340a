"""The savings ledger in the database: derived from stored placements, read by window.

`sync` records every stored placement that the ledger does not have yet (its
cost, baseline, savings and cost items) and marks the placements it replaces
as superseded, in one transaction. It is idempotent and cheap when nothing is
new, so readers call it first; placements stored before the ledger existed are
picked up the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import String, and_, cast, exists, func, insert, or_, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from broker.db.finops_models import LedgerEntryRow, LedgerItemRow
from broker.db.models import Base, PoolRow
from broker.db.placement_models import PlacementRow, load_placements
from broker.db.price_models import ListPriceRow
from broker.db.session import transaction
from broker.finops.ledger import (
    LedgerEntry,
    LedgerItem,
    entry_from_placement,
    items_from_placement,
    ondemand_counterpart,
)

_CHUNK = 500


def utc(t: datetime) -> datetime:
    """A time given without an offset (a query's `from`, a stored as-of) is UTC."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _list_prices(session: Session, pools: Iterable[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Per on-demand pool: (the public list price the feed gave, before any discount rule; the
    negotiated price the catalog charges now). A pool no discount ever touched has one price."""
    wanted = sorted({ondemand_counterpart(p) for p in pools})
    listed: dict[str, float] = {}
    negotiated: dict[str, float] = {}
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i : i + _CHUNK]
        rows = session.execute(select(PoolRow.id, PoolRow.price_per_hour).where(PoolRow.id.in_(chunk)))
        negotiated.update({str(r[0]): float(r[1]) for r in rows})
        feed = session.execute(
            select(ListPriceRow.pool_id, ListPriceRow.price_per_hour).where(ListPriceRow.pool_id.in_(chunk))
        )
        listed.update({str(r[0]): float(r[1]) for r in feed})
    return {**negotiated, **listed}, negotiated


def sync(factory: sessionmaker[Session]) -> int:
    """Record placements missing from the ledger. Returns how many were added."""
    with factory() as s:
        missing = load_placements(s, ~exists().where(LedgerEntryRow.placement_id == PlacementRow.id))
        if not missing:
            return 0
        listed, negotiated = _list_prices(s, (a.pool for m in missing for a in m.result.assignments))
    entries: list[LedgerEntry] = []
    items: list[LedgerItem] = []
    for m in missing:
        entry = entry_from_placement(m)
        entries.append(entry)
        items += items_from_placement(
            entry,
            m,
            lambda p: listed.get(ondemand_counterpart(p)),
            lambda p: negotiated.get(ondemand_counterpart(p)),
        )
    try:
        with transaction(factory) as s:
            for i in range(0, len(entries), _CHUNK):
                s.connection().execute(
                    insert(Base.metadata.tables["finops_ledger"]), [_entry_row(e) for e in entries[i : i + _CHUNK]]
                )
            for i in range(0, len(items), _CHUNK):
                s.connection().execute(
                    insert(Base.metadata.tables["finops_ledger_items"]), [_item_row(it) for it in items[i : i + _CHUNK]]
                )
            _mark_superseded(s, {(e.tenant, e.name) for e in entries})
    except IntegrityError:
        return 0  # a concurrent reader recorded the same placements first
    return len(entries)


# what says which entry of a (tenant, name) supersedes which
_SUPERSEDING = (
    LedgerEntryRow.placement_id,
    LedgerEntryRow.tenant,
    LedgerEntryRow.name,
    LedgerEntryRow.created_at,
    LedgerEntryRow.superseded_at,
)


def _mark_superseded(s: Session, groups: set[tuple[str, str]]) -> None:
    keys = sorted(groups)
    for i in range(0, len(keys), _CHUNK):
        rows = s.execute(
            select(*_SUPERSEDING)
            .where(tuple_(LedgerEntryRow.tenant, LedgerEntryRow.name).in_(keys[i : i + _CHUNK]))
            .order_by(
                LedgerEntryRow.tenant,
                LedgerEntryRow.name,
                LedgerEntryRow.created_at,
                LedgerEntryRow.placement_id,
            )
        ).all()
        changes = []
        for cur, nxt in zip(rows, [*rows[1:], None], strict=True):
            same = nxt is not None and (nxt.tenant, nxt.name) == (cur.tenant, cur.name)
            when = nxt.created_at if same and nxt is not None else None
            if when != cur.superseded_at:
                changes.append({"placement_id": cur.placement_id, "superseded_at": when})
        if changes:
            s.execute(update(LedgerEntryRow), changes)  # bulk UPDATE by primary key


def _entry_row(e: LedgerEntry) -> dict[str, Any]:
    return {
        "placement_id": e.placement_id,
        "tenant": e.tenant,
        "name": e.name,
        "created_at": e.created_at,
        "superseded_at": None,
        "cost_per_hour": e.cost_per_hour,
        "baseline_cost_per_hour": e.baseline_cost_per_hour,
        "has_baseline": e.has_baseline,
        "baseline_policy": e.baseline_policy,
        "greedy_cost_per_hour": e.greedy_cost_per_hour,
        "savings_per_hour": e.savings_per_hour,
        "savings_per_month": e.savings_per_month,
    }


_ITEM_FIELDS = (
    "placement_id", "line", "kind", "workload", "team", "provider", "site", "pool", "quantity",
    "unit_price_per_hour", "list_unit_price_per_hour", "cost_per_hour", "baseline_cost_per_hour",
    "greedy_cost_per_hour", "contracted_unit_price_per_hour",
)  # fmt: skip


def _item(values: dict[str, Any]) -> LedgerItem:
    if values["greedy_cost_per_hour"] is None:  # read as the item's cost: no savings claimed against it
        values["greedy_cost_per_hour"] = values["cost_per_hour"]
    return LedgerItem(**values)


def _item_row(i: LedgerItem) -> dict[str, Any]:
    return {f: getattr(i, f) for f in _ITEM_FIELDS}


def _window(tenant: str | None, start: datetime, end: datetime) -> Any:
    cond = and_(
        LedgerEntryRow.created_at < end,
        or_(LedgerEntryRow.superseded_at.is_(None), LedgerEntryRow.superseded_at > start),
    )
    return cond if tenant is None else and_(cond, LedgerEntryRow.tenant == tenant)


# every placement `broker finops seed-demo` stores carries this warning, so the API and the CLI show
# it with the placement and the dashboard counts a window's demo placements by it (demo_count)
DEMO_WARNING = "demo data: stored by `broker finops seed-demo` to try the dashboard; not a real placement"


def demo_count(factory: sessionmaker[Session], *, tenant: str | None, start: datetime, end: datetime) -> int:
    """How many of the window's ledger entries are demo placements (their warnings hold DEMO_WARNING)."""
    marker = f"%{DEMO_WARNING}%"  # no LIKE wildcard (_ or %) in it; JSON keeps it as it is
    with factory() as s:
        q = (
            select(func.count())
            .select_from(LedgerEntryRow)
            .join(PlacementRow, PlacementRow.id == LedgerEntryRow.placement_id)
            .where(_window(tenant, start, end), cast(PlacementRow.warnings, String).like(marker))
        )
        return int(s.scalar(q) or 0)


def load(
    factory: sessionmaker[Session], *, tenant: str | None, start: datetime, end: datetime
) -> tuple[list[LedgerEntry], list[LedgerItem]]:
    """Ledger entries current at some time in [start, end), and their items."""
    with factory() as s:
        entries = [
            LedgerEntry(
                placement_id=r.placement_id,
                tenant=r.tenant,
                name=r.name,
                created_at=r.created_at,
                superseded_at=r.superseded_at,
                cost_per_hour=r.cost_per_hour,
                baseline_cost_per_hour=r.baseline_cost_per_hour,
                has_baseline=r.has_baseline,
                baseline_policy=r.baseline_policy,
                greedy_cost_per_hour=r.greedy_cost_per_hour,
            )
            for r in s.execute(
                select(
                    *_SUPERSEDING,
                    LedgerEntryRow.cost_per_hour,
                    LedgerEntryRow.baseline_cost_per_hour,
                    LedgerEntryRow.has_baseline,
                    LedgerEntryRow.baseline_policy,
                    LedgerEntryRow.greedy_cost_per_hour,
                ).where(_window(tenant, start, end))
            )
        ]
        # plain tuples, not ORM objects: tens of thousands of items load in milliseconds
        columns = [getattr(LedgerItemRow, f) for f in _ITEM_FIELDS]
        rows = s.execute(
            select(*columns)
            .join(LedgerEntryRow, LedgerEntryRow.placement_id == LedgerItemRow.placement_id)
            .where(_window(tenant, start, end))
        )
        items = [_item(dict(zip(_ITEM_FIELDS, r, strict=True))) for r in rows]
    return entries, items


def tenants(factory: sessionmaker[Session]) -> list[str]:
    with factory() as s:
        return sorted(s.scalars(select(LedgerEntryRow.tenant).distinct()))
