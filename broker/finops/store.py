"""The savings ledger in the database: derived from stored placements, read by window.

`sync` records every stored placement that the ledger does not have yet (its
cost, baseline, savings and cost items) and marks the placements it replaces
as superseded, in one transaction. It is idempotent and cheap when nothing is
new, so readers call it first; placements stored before the ledger existed are
picked up the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, exists, or_, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from broker.db.finops_models import LedgerEntryRow, LedgerItemRow
from broker.db.models import PlacementRow, PoolRow
from broker.db.session import transaction
from broker.finops.ledger import (
    LedgerEntry,
    LedgerItem,
    entry_from_placement,
    items_from_placement,
    ondemand_counterpart,
)

_CHUNK = 500


def utc(dt: datetime) -> datetime:
    """SQLite hands back naive datetimes for timezone-aware columns; they were stored as UTC."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _list_prices(session: Session, pools: Iterable[str]) -> dict[str, float]:
    wanted = sorted({ondemand_counterpart(p) for p in pools})
    out: dict[str, float] = {}
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i : i + _CHUNK]
        rows = session.execute(select(PoolRow.id, PoolRow.price_per_hour).where(PoolRow.id.in_(chunk)))
        out.update({str(r[0]): float(r[1]) for r in rows})
    return out


def sync(factory: sessionmaker[Session]) -> int:
    """Record placements missing from the ledger. Returns how many were added."""
    with factory() as s:
        missing = s.execute(
            select(
                PlacementRow.id,
                PlacementRow.tenant,
                PlacementRow.name,
                PlacementRow.created_at,
                PlacementRow.request,
                PlacementRow.result,
            ).where(~exists().where(LedgerEntryRow.placement_id == PlacementRow.id))
        ).all()
        if not missing:
            return 0
        prices = _list_prices(s, (a["pool"] for m in missing for a in (m.result or {}).get("assignments", [])))
    entries: list[LedgerEntry] = []
    items: list[LedgerItem] = []
    for m in missing:
        entry = entry_from_placement(
            placement_id=m.id, tenant=m.tenant, name=m.name, created_at=utc(m.created_at), result=m.result
        )
        entries.append(entry)
        items += items_from_placement(entry, m.result, m.request or {}, lambda p: prices.get(ondemand_counterpart(p)))
    try:
        with transaction(factory) as s:
            s.add_all(_entry_row(e) for e in entries)
            s.flush()
            s.add_all(_item_row(i) for i in items)
            _mark_superseded(s, {(e.tenant, e.name) for e in entries})
    except IntegrityError:
        return 0  # a concurrent reader recorded the same placements first
    return len(entries)


def _mark_superseded(s: Session, groups: set[tuple[str, str]]) -> None:
    keys = sorted(groups)
    for i in range(0, len(keys), _CHUNK):
        rows = s.execute(
            select(
                LedgerEntryRow.placement_id,
                LedgerEntryRow.tenant,
                LedgerEntryRow.name,
                LedgerEntryRow.created_at,
            )
            .where(tuple_(LedgerEntryRow.tenant, LedgerEntryRow.name).in_(keys[i : i + _CHUNK]))
            .order_by(
                LedgerEntryRow.tenant,
                LedgerEntryRow.name,
                LedgerEntryRow.created_at,
                LedgerEntryRow.placement_id,
            )
        ).all()
        for cur, nxt in zip(rows, [*rows[1:], None], strict=True):
            same = nxt is not None and (nxt.tenant, nxt.name) == (cur.tenant, cur.name)
            s.execute(
                update(LedgerEntryRow)
                .where(LedgerEntryRow.placement_id == cur.placement_id)
                .values(superseded_at=nxt.created_at if same and nxt is not None else None)
            )


def _entry_row(e: LedgerEntry) -> LedgerEntryRow:
    return LedgerEntryRow(
        placement_id=e.placement_id,
        tenant=e.tenant,
        name=e.name,
        created_at=e.created_at,
        superseded_at=None,
        cost_per_hour=e.cost_per_hour,
        baseline_cost_per_hour=e.baseline_cost_per_hour,
        has_baseline=e.has_baseline,
        savings_per_hour=e.savings_per_hour,
        savings_per_month=e.savings_per_month,
    )


def _item_row(i: LedgerItem) -> LedgerItemRow:
    return LedgerItemRow(
        placement_id=i.placement_id,
        line=i.line,
        kind=i.kind,
        workload=i.workload,
        team=i.team,
        provider=i.provider,
        site=i.site,
        pool=i.pool,
        quantity=i.quantity,
        unit_price_per_hour=i.unit_price_per_hour,
        list_unit_price_per_hour=i.list_unit_price_per_hour,
        cost_per_hour=i.cost_per_hour,
        baseline_cost_per_hour=i.baseline_cost_per_hour,
    )


def _window(tenant: str | None, start: datetime, end: datetime) -> Any:
    cond = and_(
        LedgerEntryRow.created_at < end,
        or_(LedgerEntryRow.superseded_at.is_(None), LedgerEntryRow.superseded_at > start),
    )
    return cond if tenant is None else and_(cond, LedgerEntryRow.tenant == tenant)


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
                created_at=utc(r.created_at),
                superseded_at=utc(r.superseded_at) if r.superseded_at is not None else None,
                cost_per_hour=r.cost_per_hour,
                baseline_cost_per_hour=r.baseline_cost_per_hour,
                has_baseline=r.has_baseline,
            )
            for r in s.scalars(select(LedgerEntryRow).where(_window(tenant, start, end)))
        ]
        rows = s.execute(
            select(LedgerItemRow)
            .join(LedgerEntryRow, LedgerEntryRow.placement_id == LedgerItemRow.placement_id)
            .where(_window(tenant, start, end))
        ).scalars()
        items = [
            LedgerItem(
                placement_id=r.placement_id,
                line=r.line,
                kind=r.kind,
                workload=r.workload,
                team=r.team,
                provider=r.provider,
                site=r.site,
                pool=r.pool,
                quantity=r.quantity,
                unit_price_per_hour=r.unit_price_per_hour,
                list_unit_price_per_hour=r.list_unit_price_per_hour,
                cost_per_hour=r.cost_per_hour,
                baseline_cost_per_hour=r.baseline_cost_per_hour,
            )
            for r in rows
        ]
    return entries, items


def tenants(factory: sessionmaker[Session]) -> list[str]:
    with factory() as s:
        return sorted(s.scalars(select(LedgerEntryRow.tenant).distinct()))


def latest_documents(factory: sessionmaker[Session], ids: Sequence[str]) -> list[dict[str, Any]]:
    """The stored result documents of a few placements (newest first), with their tenant."""
    if not ids:
        return []
    with factory() as s:
        rows = s.execute(
            select(PlacementRow.id, PlacementRow.tenant, PlacementRow.result).where(PlacementRow.id.in_(list(ids)))
        ).all()
    docs = {r.id: {**(r.result or {}), "id": r.id, "tenant": r.tenant} for r in rows}
    return [docs[i] for i in ids if i in docs]
