"""Reading and adjusting the price book: pool price history, staleness, discount rules.

Discount rules change effective prices from the list prices the feeds gave (kept in
``list_prices``; a pool never refreshed uses its catalog price as list price), in one
transaction that also records the new prices in the history and bumps the catalog version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from broker.catalog.refresh import PROVIDERS, discount_rules
from broker.catalog.store import bump_version
from broker.core.domain import CapacityType
from broker.core.placement import PoolPrice, PriceSnapshot
from broker.db.models import PoolRow, SiteRow
from broker.db.price_models import DiscountRuleRow, ListPriceRow, PriceHistoryRow
from broker.db.session import transaction
from broker.errors import InvalidRequest, NotFound
from pricing.discounts import DiscountRule, effective_price


def _parse_time(text: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def stale_sources(
    price_as_of: Mapping[str, str], *, max_age_days: float, now: datetime | None = None
) -> dict[str, str]:
    """The price sources (provider -> as-of date) older than `max_age_days`."""
    limit = (now or datetime.now(UTC)) - timedelta(days=max_age_days)
    out = {}
    for source, as_of in price_as_of.items():
        t = _parse_time(as_of)
        if t is not None and t < limit:
            out[source] = as_of
    return out


def price_dates(factory: sessionmaker[Session]) -> dict[str, dict[str, str]]:
    """Per provider: the newest and oldest price date of its pools (read from the store, not the
    in-memory catalog, so it answers at once after a refresh)."""
    with factory() as s:
        rows = s.execute(
            select(SiteRow.provider, func.max(PoolRow.price_as_of), func.min(PoolRow.price_as_of))
            .join(SiteRow, SiteRow.id == PoolRow.site)
            .group_by(SiteRow.provider)
        ).all()
    return {p: {"newest": newest, "oldest": oldest} for p, newest, oldest in rows}


def pool_history(factory: sessionmaker[Session], pool_id: str, *, limit: int = 500) -> dict[str, Any]:
    with factory() as s:
        pool = s.get(PoolRow, pool_id)
        rows = list(
            s.scalars(
                select(PriceHistoryRow)
                .where(PriceHistoryRow.pool_id == pool_id)
                .order_by(PriceHistoryRow.recorded_at.desc(), PriceHistoryRow.id.desc())
                .limit(limit)
            )
        )
    if pool is None and not rows:
        raise NotFound(f"pool {pool_id!r} does not exist")
    return {
        "pool": pool_id,
        "current": None
        if pool is None
        else {
            "price_per_hour": pool.price_per_hour,
            "price_source": pool.price_source,
            "price_as_of": pool.price_as_of,
        },
        "history": [
            {
                "price_per_hour": r.price_per_hour,
                "list_price_per_hour": r.list_price_per_hour,
                "source": r.source,
                "effective_at": r.effective_at,
                "recorded_at": r.recorded_at.isoformat(),
                "refresh_id": r.refresh_id,
            }
            for r in rows
        ],
    }


def list_discounts(factory: sessionmaker[Session]) -> list[dict[str, Any]]:
    with factory() as s:
        return [_rule_doc(r) for r in s.scalars(select(DiscountRuleRow).order_by(DiscountRuleRow.id))]


def _rule_doc(r: DiscountRuleRow) -> dict[str, Any]:
    return {
        "id": r.id,
        "provider": r.provider,
        "family": r.family,
        "region": r.region,
        "capacity_types": list(r.capacity_types or []),
        "discount_pct": r.discount_pct,
        "note": r.note,
    }


def add_discount(
    factory: sessionmaker[Session],
    *,
    provider: str,
    discount_pct: float,
    family: str = "*",
    region: str = "*",
    capacity_types: list[str] | None = None,
    note: str = "",
) -> dict[str, Any]:
    """Store a rule and re-price the provider's pools from their list prices, in one transaction."""
    with transaction(factory) as s:
        row = DiscountRuleRow(
            provider=provider,
            family=family,
            region=region,
            capacity_types=list(capacity_types or []),
            discount_pct=discount_pct,
            note=note,
            created_at=datetime.now(UTC),
        )
        s.add(row)
        s.flush()
        changed = _reprice(s, row)
        bump_version(s)
        return {**_rule_doc(row), "repriced_pools": changed}


def _like(glob: str) -> str:
    # an over-approximation of the glob for SQL (LIKE's "_" matches any character); fnmatch decides
    return glob.replace("*", "%").replace("?", "_")


def _reprice(s: Session, rule: DiscountRuleRow) -> int:
    """Re-price the pools a new rule matches: rules do not stack, so no other pool can change."""
    provider = rule.provider
    new_rule = DiscountRule(provider, rule.discount_pct, rule.family, rule.region, frozenset(rule.capacity_types))
    rules = discount_rules(s)
    now = datetime.now(UTC)
    rows = s.execute(
        select(PoolRow.id, PoolRow.site, PoolRow.instance_type, PoolRow.capacity_type)
        .add_columns(PoolRow.price_per_hour, PoolRow.price_source, PoolRow.price_as_of)
        .where(PoolRow.site.like(f"{provider}:{_like(rule.region)}"), PoolRow.instance_type.like(_like(rule.family)))
        .where(PoolRow.price_source != COMMITTED)
    ).all()
    pools = [r for r in rows if new_rule.matches(provider, r[1].split(":", 1)[1], r[2], r[3])]
    listed: dict[str, float] = {}
    for i in range(0, len(pools), 5000):
        ids = [p[0] for p in pools[i : i + 5000]]
        q = select(ListPriceRow.pool_id, ListPriceRow.price_per_hour).where(ListPriceRow.pool_id.in_(ids))
        listed.update({pid: price for pid, price in s.execute(q)})
    # first discount on a snapshot price: that price is the list price
    first = [
        {"pool_id": p[0], "price_per_hour": p[4], "source": p[5], "as_of": p[6]} for p in pools if p[0] not in listed
    ]
    if first:
        s.execute(insert(ListPriceRow), first)
    updates, history = [], []
    for pid, site, itype, ctype, price, source, _as_of in pools:
        list_price = listed.get(pid, price)
        new = effective_price(
            list_price, rules, provider=provider, region=site.split(":", 1)[1], instance_type=itype, capacity_type=ctype
        )
        if abs(new - price) > 1e-9:
            updates.append({"id": pid, "price_per_hour": new})
            history.append(
                {
                    "pool_id": pid,
                    "price_per_hour": new,
                    "list_price_per_hour": list_price,
                    "source": f"{source}+discount",
                    "effective_at": now.isoformat(timespec="seconds"),
                    "recorded_at": now,
                }
            )
    if updates:
        s.execute(update(PoolRow), updates)
        s.execute(insert(PriceHistoryRow), history)
    return len(updates)


COMMITTED = "committed"


def commit_capacity(
    factory: sessionmaker[Session],
    *,
    site: str,
    instance_type: str,
    count: int,
    usd_per_hour: float = 0.0,
    note: str = "",
) -> dict[str, Any]:
    """Already-bought capacity (reserved instances, committed nodes): the site's reserved pool of that
    type becomes `count` nodes at a sunk marginal price (0 by default, or the recurring part still
    paid per hour), so the solver fills it before anything it would have to buy. Feeds and discount
    rules leave such a pool alone; its former price stays the list price."""
    if count < 0 or usd_per_hour < 0:
        raise InvalidRequest("count and usd_per_hour must be >= 0", errors=[{"loc": ["body", "count"], "msg": ">= 0"}])
    pool_id = f"{site}/{instance_type}/reserved"
    now = datetime.now(UTC)
    with transaction(factory) as s:
        like = s.scalars(select(PoolRow).where(PoolRow.site == site, PoolRow.instance_type == instance_type)).first()
        if like is None:
            raise InvalidRequest(
                f"{site} has no pool of instance type {instance_type!r}",
                errors=[{"loc": ["body", "instance_type"], "msg": f"not sold at {site}"}],
            )
        pool = s.get(PoolRow, pool_id)
        if pool is None:
            # the reserved pool of a type sold here: the same node, bought capacity
            pool = PoolRow.from_domain(
                replace(like.to_domain(), id=pool_id, capacity_type=CapacityType.RESERVED, max_nodes=None)
            )
            s.add(pool)
        if pool.price_source != COMMITTED:
            s.merge(
                ListPriceRow(
                    pool_id=pool_id,
                    price_per_hour=pool.price_per_hour,
                    source=pool.price_source,
                    as_of=pool.price_as_of,
                )
            )
        list_price = pool.price_per_hour if pool.price_source != COMMITTED else usd_per_hour
        pool.price_per_hour, pool.max_nodes, pool.price_source = usd_per_hour, count, COMMITTED
        pool.price_as_of = now.isoformat(timespec="seconds")
        s.add(
            PriceHistoryRow(
                pool_id=pool_id,
                price_per_hour=usd_per_hour,
                list_price_per_hour=list_price,
                source=COMMITTED,
                effective_at=pool.price_as_of,
                recorded_at=now,
                refresh_id=note[:40] or None,
            )
        )
        version = bump_version(s)
    return {"pool": pool_id, "max_nodes": count, "price_per_hour": usd_per_hour, "catalog_version": version}


def price_snapshot(
    catalog_version: str, pools: Mapping[str, tuple[float, str, str]], *, stale_after_days: float
) -> PriceSnapshot:
    """What a placement records about the prices it used: the catalog version, each used pool's
    price, source and date, and which of those are older than `stale_after_days`."""
    stale = stale_sources({pid: d for pid, (_p, _s, d) in pools.items()}, max_age_days=stale_after_days)
    return PriceSnapshot(
        catalog_version=catalog_version,
        stale_after_days=stale_after_days,
        pools={pid: PoolPrice(p, s, d, pid in stale) for pid, (p, s, d) in pools.items()},
    )


def stale_warning(snapshot: PriceSnapshot, *, now: datetime | None = None) -> str | None:
    """One line for a placement's `warnings` when it used stale prices (price_snapshot): how
    many of its pools, the oldest price's age, and how to refresh. None when all are fresh."""
    stale = snapshot.stale_pools
    if not stale:
        return None
    as_of = {pid: _parse_time(snapshot.pools[pid].as_of) for pid in stale}
    dated = [(t, pid) for pid, t in as_of.items() if t is not None]
    oldest = ""
    if dated:
        t, pid = min(dated)
        age = ((now or datetime.now(UTC)) - t) / timedelta(days=1)
        oldest = f"; oldest {age:.0f} days ({pid}, {t.date().isoformat()})"
    return (
        f"stale prices: {len(stale)} of {len(snapshot.pools)} pools in this plan are priced from data older than "
        f"{snapshot.stale_after_days:g} days{oldest}; costs and savings may be off. Refresh with `broker pricing "
        "refresh --provider all` (POST /v1/pricing/refresh)"
    )


__all__ = [
    "PROVIDERS",
    "add_discount",
    "list_discounts",
    "pool_history",
    "price_dates",
    "price_snapshot",
    "stale_sources",
    "stale_warning",
]
