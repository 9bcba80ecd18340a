"""Refresh the catalog's prices from the providers' live feeds.

Fetching happens first and outside any transaction; then each provider's prices are
written in one transaction (pools, list prices, history, storage, catalog version), so
a failed fetch or write keeps that provider's last good prices and never half of them.

How feed prices map to pools: an offer for ``<provider>, <region>, <type>, <capacity>``
updates pool ``<provider>:<region>/<type>/<capacity>``. A pool that exists gets the new
price; an offer for a type the catalog does not have yet becomes a new pool when the feed
also gave its specs (vCPUs, memory, arch, GPUs), and is skipped otherwise. Pools the feed
did not mention keep their price and its date (``price_as_of``), so they show up as stale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from broker.catalog.store import bump_version
from broker.core.domain import Arch, CapacityType, Pool
from broker.db.models import PoolRow, SiteRow
from broker.db.price_models import (
    DiscountRuleRow,
    InstanceTypeFactRow,
    ListPriceRow,
    PriceHistoryRow,
    SiteStoragePriceRow,
)
from broker.db.session import transaction
from broker.errors import InvalidRequest, PricingUnavailable
from broker.problems import error_problem
from broker.settings import Settings
from pricing.discounts import DiscountRule, effective_price
from pricing.offers import FeedResult, InstanceSpec
from providers.base import FeedOptions, FeedUnavailable, PriceSource, Progress
from providers.gcp import GcpPriceSource

PROVIDERS = ("aws", "azure", "gcp")
# what a failed provider's problem document names as its instance: where refreshes are asked for
REFRESH_PATH = "/v1/pricing/refresh"


def make_source(provider: str, *, settings: Settings, endpoint: str | None = None) -> PriceSource:
    options = FeedOptions(endpoint=endpoint, timeout_s=settings.pricing_timeout_s, attempts=settings.pricing_attempts)
    if provider == "aws":
        from providers.aws import AwsPriceSource

        return AwsPriceSource(options)
    if provider == "azure":
        from providers.azure import AzurePriceSource

        return AzurePriceSource(options, subscription_id=settings.azure_subscription_id or None)
    if provider == "gcp":
        from providers.gcp import GcpPriceSource

        return GcpPriceSource(options, project=settings.gcp_project or None)
    raise InvalidRequest(
        f"unknown provider {provider!r}", errors=[{"loc": ["provider"], "msg": f"one of {[*PROVIDERS, 'all']}"}]
    )


@dataclass
class ProviderOutcome:
    provider: str
    ok: bool
    regions: list[str] = field(default_factory=list)
    updated: int = 0
    added: int = 0
    skipped_no_spec: int = 0
    unchanged: int = 0
    storage: int = 0
    error: str | None = None
    problem: dict[str, Any] | None = None  # a failed feed: the pricing-unavailable problem document
    catalog_version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def provider_regions(factory: sessionmaker[Session], provider: str, wanted: Sequence[str] | None) -> list[str]:
    """The provider's catalog regions (public and AWS Local/Wavelength zones), or the asked ones."""
    with factory() as s:
        known = set(s.scalars(select(SiteRow.region).where(SiteRow.provider == provider)))
    if not wanted:
        return sorted(known)
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise InvalidRequest(
            f"{provider} has no catalog region(s) {unknown}",
            errors=[{"loc": ["region"], "msg": f"unknown {provider} region(s) {unknown}"}],
        )
    return list(dict.fromkeys(wanted))


def discount_rules(s: Session) -> list[DiscountRule]:
    return [
        DiscountRule(r.provider, r.discount_pct, r.family, r.region, frozenset(r.capacity_types or ()))
        for r in s.scalars(select(DiscountRuleRow))
    ]


_CHUNK = 5000


def replace_list_prices(s: Session, rows: list[dict[str, Any]]) -> None:
    """Upsert list prices portably (SQLite and PostgreSQL): delete the ids, insert them again."""
    for i in range(0, len(rows), _CHUNK):
        chunk = rows[i : i + _CHUNK]
        s.execute(delete(ListPriceRow).where(ListPriceRow.pool_id.in_([r["pool_id"] for r in chunk])))
        s.execute(insert(ListPriceRow), chunk)


def write_instance_facts(s: Session, feed: FeedResult, as_of: str) -> None:
    """What the feed states about its types beyond their size (processor, GPU memory, bare metal),
    for instance requirements; read back over the bundled catalog's facts (store.instance_facts)."""
    for spec in feed.specs.values():
        if spec.has_facts:
            s.merge(
                InstanceTypeFactRow(
                    provider=feed.provider,
                    instance_type=spec.instance_type,
                    processor=spec.processor,
                    gpu_memory_gib=spec.gpu_memory_gib,
                    bare_metal=spec.bare_metal,
                    as_of=as_of,
                )
            )


def write_feed(factory: sessionmaker[Session], feed: FeedResult, *, refresh_id: str | None = None) -> ProviderOutcome:
    """Write one provider's feed in one transaction and bump the catalog version.

    Bulk statements (not one ORM object per pool): a full AWS refresh is ~70k offers."""
    out = ProviderOutcome(feed.provider, ok=True, regions=list(feed.regions))
    now = datetime.now(UTC)
    as_of = now.isoformat(timespec="seconds")
    with transaction(factory) as s:
        rules = discount_rules(s)
        site_ids = {f"{feed.provider}:{r}" for r in feed.regions}
        q = select(PoolRow.id, PoolRow.instance_type, PoolRow.price_per_hour, PoolRow.vcpus, PoolRow.memory_gib)
        q = q.add_columns(PoolRow.arch, PoolRow.gpus, PoolRow.gpu_model, PoolRow.price_source)
        q = q.where(PoolRow.site.in_(site_ids))
        existing: dict[str, Any] = {r[0]: r for r in s.execute(q)}
        # a new capacity type of a type the catalog knows (e.g. a first reserved offer) reuses its specs
        catalog_specs = {r[1]: InstanceSpec(r[1], r[3], r[4], r[5], r[6], r[7]) for r in existing.values()}
        updates: list[dict[str, Any]] = []
        inserts: list[dict[str, Any]] = []
        history: list[dict[str, Any]] = []
        listed: dict[str, dict[str, Any]] = {}
        for offer in feed.offers:
            site = f"{offer.provider}:{offer.region}"
            if site not in site_ids:
                continue
            price = effective_price(
                offer.price_per_hour,
                rules,
                provider=offer.provider,
                region=offer.region,
                instance_type=offer.instance_type,
                capacity_type=offer.capacity_type,
            )
            old = existing.get(offer.pool_id)
            if old is not None and old[8] == "committed":  # bought capacity keeps its sunk price
                continue
            if old is None:
                spec = feed.specs.get(offer.instance_type) or catalog_specs.get(offer.instance_type)
                if spec is None or offer.region in spec.restricted_regions:
                    out.skipped_no_spec += 1
                    continue
                pool = Pool(
                    id=offer.pool_id,
                    site=site,
                    instance_type=offer.instance_type,
                    capacity_type=CapacityType(offer.capacity_type),
                    arch=Arch(spec.arch),
                    vcpus=spec.vcpus,
                    memory_gib=spec.memory_gib,
                    gpus=spec.gpus,
                    gpu_model=spec.gpu_model,
                    price_per_hour=price,
                    max_nodes=None,
                    price_source=feed.provider,
                    price_as_of=as_of,
                )
                inserts.append(PoolRow.values(pool, reserved_3yr_per_hour=offer.reserved_3yr_per_hour))
                changed = True
            else:
                changed = abs(old[2] - price) > 1e-9
                upd = {
                    "id": offer.pool_id,
                    "price_per_hour": price,
                    "price_source": feed.provider,
                    "price_as_of": as_of,
                }
                if offer.reserved_3yr_per_hour is not None:
                    upd["reserved_3yr_per_hour"] = offer.reserved_3yr_per_hour
                updates.append(upd)
            out.added += int(old is None)
            out.updated += int(old is not None and changed)
            out.unchanged += int(not changed)
            listed[offer.pool_id] = {
                "pool_id": offer.pool_id,
                "price_per_hour": offer.price_per_hour,
                "source": feed.provider,
                "as_of": as_of,
            }
            if changed:  # history keeps each distinct price once, with when the provider made it effective
                history.append(
                    {
                        "pool_id": offer.pool_id,
                        "price_per_hour": price,
                        "list_price_per_hour": offer.price_per_hour,
                        "source": feed.provider,
                        "effective_at": offer.effective_at or as_of,
                        "recorded_at": now,
                        "refresh_id": refresh_id,
                    }
                )
        with_3yr = [u for u in updates if "reserved_3yr_per_hour" in u]
        for batch in (with_3yr, [u for u in updates if "reserved_3yr_per_hour" not in u]):
            if batch:  # executemany needs one key set per statement
                s.execute(update(PoolRow), batch)
        if inserts:
            s.execute(insert(PoolRow), inserts)
        if history:
            s.execute(insert(PriceHistoryRow), history)
        replace_list_prices(s, list(listed.values()))
        write_instance_facts(s, feed, as_of)
        for sp in feed.storage:
            s.merge(
                SiteStoragePriceRow(
                    site=f"{sp.provider}:{sp.region}",
                    tier=sp.tier,
                    usd_per_gb_month=sp.usd_per_gb_month,
                    product=sp.product,
                    source=sp.provider,
                    as_of=as_of,
                )
            )
            out.storage += 1
        out.catalog_version = bump_version(s)
    return out


def refresh(
    factory: sessionmaker[Session],
    settings: Settings,
    *,
    provider: str = "all",
    regions: Sequence[str] | None = None,
    endpoint: str | None = None,
    progress: Progress | None = None,
    sources: Callable[[str], PriceSource] | None = None,
    refresh_id: str | None = None,
) -> list[ProviderOutcome]:
    """Refresh one provider or all; each is its own transaction. Failures are reported per provider."""
    names = list(PROVIDERS) if provider == "all" else [provider]
    if provider != "all" and provider not in PROVIDERS:
        make_source(provider, settings=settings)  # raises InvalidRequest naming the choices
    if regions and provider == "all":
        raise InvalidRequest(
            "--region needs one --provider", errors=[{"loc": ["region"], "msg": "give one provider with regions"}]
        )
    outcomes = []
    for name in names:
        wanted = provider_regions(factory, name, regions)
        source = sources(name) if sources else make_source(name, settings=settings, endpoint=endpoint)
        if isinstance(source, GcpPriceSource) and not source.project:
            source.fallback_specs = _catalog_specs(factory, name, wanted)  # price the types we know
        try:
            feed = fetch_feed(source, wanted, progress)
        except PricingUnavailable as exc:
            problem = error_problem(exc, instance=REFRESH_PATH)
            outcomes.append(ProviderOutcome(name, ok=False, regions=wanted, error=exc.detail, problem=problem))
            continue
        outcomes.append(write_feed(factory, feed, refresh_id=refresh_id))
    return outcomes


def fetch_feed(source: PriceSource, regions: Sequence[str], progress: Progress | None) -> FeedResult:
    """The source's feed; a feed that cannot be read or understood is the broker's PricingUnavailable."""
    try:
        return source.fetch(regions, progress)
    except FeedUnavailable as exc:
        raise PricingUnavailable(exc.provider, exc.region, str(exc)) from exc


def _catalog_specs(
    factory: sessionmaker[Session], provider: str, regions: Sequence[str]
) -> dict[tuple[str, str], InstanceSpec]:
    cols = (PoolRow.site, PoolRow.instance_type, PoolRow.vcpus, PoolRow.memory_gib, PoolRow.arch, PoolRow.gpus)
    q = select(*cols, PoolRow.gpu_model).where(PoolRow.site.in_([f"{provider}:{r}" for r in regions]))
    with factory() as s:
        return {
            (site.split(":", 1)[1], it): InstanceSpec(it, v, m, arch, g, gm)
            for site, it, v, m, arch, g, gm in s.execute(q)
        }
