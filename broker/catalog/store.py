"""The catalog: sites, pools, latencies and transfer/storage prices.

Stored in the database (loaded from the bundled snapshot, refreshed from
provider feeds) and read into one immutable in-memory `Catalog` per catalog
version, which every placement of that version shares.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from platformdirs import user_cache_dir
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from broker.core.allocatable import NodeOverhead, allocatable
from broker.core.domain import Arch, BurstablePolicy, CapacityType, PlacementRequest, Pool, Site, SiteKind, UserRegion
from broker.core.instance_attributes import InstanceFacts
from broker.core.latency import DEFAULT_QUANTILE, LatencyModel
from broker.core.pool_list import PoolList
from broker.core.pooltable import FloatArray, PoolTable, build_pool_table
from broker.db.models import (
    CatalogMetaRow,
    EgressRow,
    LatencyRow,
    PoolRow,
    SiteRow,
    StoragePriceRow,
)
from broker.db.price_models import InstanceTypeFactRow, SiteStoragePriceRow
from broker.db.session import transaction
from broker.solver.problem import STORAGE_TIERS
from pricing import snapshot
from pricing.build_snapshot import POOL_COLUMNS

PUBLIC_PROVIDERS = ("aws", "azure", "gcp")
_CHUNK = 20_000
#: Part of the on-disk cache file name: a catalog pickled by code whose classes had another
#: shape (e.g. the latency model before anchored estimates, pool tables before raw and reserved
#: sizes, pools as objects before PoolList) must not be loaded.
_PICKLE_FORMAT = 5  # 5: pool tables with baselines, node classes and quota groups


@dataclass(frozen=True)
class Catalog:
    version: str
    sites: dict[str, Site]
    table: PoolTable
    latency: LatencyModel
    egress: FloatArray  # [site, site] USD/GB, NaN unknown
    internet_egress: FloatArray  # [site] USD/GB
    storage: FloatArray  # [site, tier] USD per GB-month
    price_as_of: dict[str, str]  # provider -> newest price date

    # derived from `table` and `latency`: not init fields, so a catalog copied with other sites,
    # another table or latency model (dataclasses.replace) starts with empty caches instead of
    # sharing the original's
    _rtt_memo: dict[tuple[str | tuple[float, float], str], FloatArray] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    _tables: dict[tuple[NodeOverhead, bool, bool], PoolTable] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    # a re-plan's table keeps the pools its placement runs on: compacting the whole catalog again
    # for each re-plan of the same placement (a drill, an alert storm) is time on the critical path
    _kept: dict[tuple[NodeOverhead, frozenset[str], bool], PoolTable] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def _allocatable(self, overhead: NodeOverhead, *, compact: bool, burst: bool = False) -> PoolTable:
        """Each pool at what Kubernetes can allocate on its nodes: the one place raw sizes become
        allocatable (docs/solver.md, "Allocatable capacity"); compact: dominated pools left out;
        burst: burstable pools at their full vCPUs, not their sustained baseline."""
        key = (overhead, compact, burst)
        table = self._tables.get(key)
        if table is None:
            table = allocatable(self.table, overhead, burst=burst)
            if compact:
                table = table.compact()
            if len(self._tables) > 4:  # one overhead per process (its settings)
                self._tables.clear()
            self._tables[key] = table
        return table

    def solver_table(self, overhead: NodeOverhead) -> PoolTable:
        """What placements without instance requirements solve over (allocatable, compact)."""
        return self._allocatable(overhead, compact=True)

    def table_for(
        self,
        request: PlacementRequest,
        overhead: NodeOverhead,
        keep: Collection[str] = (),
        family_quotas: Mapping[str, float] | None = None,
    ) -> PoolTable:
        """The table a request solves over, at allocatable capacity. A pool another dominates (as
        large, as cheap) may still be the only one an instance requirement or a tenant's family
        quota allows (m7i when the m6i is cheaper), so a request with requirements or quotas keeps
        every pool; the solver skips dominated ones only for its workloads without them. `keep`:
        pools kept even when dominated (a placement in force runs on them: its baseline prices them;
        never candidates). A request with a `burstable: allow` workload sees burstable pools at
        their full vCPUs (its other workloads are then kept off them: filters.py)."""
        burst = any(w.burstable is BurstablePolicy.ALLOW for w in request.workloads)
        if family_quotas or any(w.requirements for w in request.workloads):
            return self._allocatable(overhead, compact=False, burst=burst)
        if keep:
            key = (overhead, frozenset(keep), burst)
            table = self._kept.get(key)
            if table is None:
                table = self._allocatable(overhead, compact=False, burst=burst).compact(keep=keep)
                if len(self._kept) >= 16:
                    self._kept.clear()
                self._kept[key] = table
            return table
        return self._allocatable(overhead, compact=True, burst=burst)

    def user_rtt(self, regions: Iterable[UserRegion], quantile: str = DEFAULT_QUANTILE) -> dict[str, FloatArray]:
        """RTT from every site to each user region (measured where known, else estimated), as
        the given statistic (p50 typical, p95 conservative). Pipelines send the same few
        regions again and again: each is computed once per statistic."""
        out: dict[str, FloatArray] = {}
        for u in regions:
            dst: str | tuple[float, float] = (
                u.site if u.site is not None else (float(u.lat or 0.0), float(u.lon or 0.0))
            )
            key = (dst, quantile)
            if key not in self._rtt_memo:
                if len(self._rtt_memo) > 1024:
                    self._rtt_memo.clear()
                ids = [s.id for s in self.table.sites]
                rtt = np.array(self.latency.rtt_from_sites(ids, dst, quantile), dtype=np.float64)
                if isinstance(dst, str) and dst in self.table.site_index:
                    rtt[self.table.site_index[dst]] = 0.0  # users at a site are served by that site
                rtt.flags.writeable = False
                self._rtt_memo[key] = rtt
            out[u.name] = self._rtt_memo[key]
        return out


# ---- loading the bundled snapshot ---------------------------------------------------


def _bulk_insert(session: Session, table: Any, rows: list[dict[str, Any]]) -> None:
    for i in range(0, len(rows), _CHUNK):
        session.execute(insert(table), rows[i : i + _CHUNK])


def _bulk_load(session: Session, table: Any, rows: list[dict[str, Any]]) -> None:
    """Insert many plain rows (strings, numbers, NULLs; every row the same keys) in the
    session's transaction, below the ORM, whose per-row bookkeeping cost more than the writes:

    - PostgreSQL: COPY FROM STDIN (psycopg's `cursor.copy`);
    - SQLite: one prepared INSERT, executemany on the driver's cursor;
    - elsewhere: the ORM's bulk INSERTs.
    """
    if not rows:
        return
    conn = session.connection()
    quote = conn.dialect.identifier_preparer.quote
    cols = list(rows[0])
    names = f"{quote(table.__table__.name)} ({', '.join(quote(c) for c in cols)})"
    dbapi: Any = conn.connection.driver_connection  # the driver's connection of this transaction
    if conn.dialect.name == "postgresql":
        with dbapi.cursor() as cur, cur.copy(f"COPY {names} FROM STDIN") as copy:
            for r in rows:
                copy.write_row([r[c] for c in cols])
    elif conn.dialect.name == "sqlite":
        cur = dbapi.cursor()
        try:
            cur.executemany(
                f"INSERT INTO {names} VALUES ({', '.join('?' * len(cols))})", [tuple(r[c] for c in cols) for r in rows]
            )
        finally:
            cur.close()
    else:
        _bulk_insert(session, table, rows)


def bump_version(session: Session) -> str:
    version = uuid.uuid4().hex
    CatalogCache.generation += 1  # this process re-reads the version at once, others within the TTL
    session.merge(CatalogMetaRow(key="version", value=version))
    session.merge(CatalogMetaRow(key="updated_at", value=datetime.now(UTC).isoformat()))
    return version


def load_snapshot(factory: sessionmaker[Session]) -> dict[str, int]:
    """(Re)load the bundled public catalog in one transaction; private/edge sites stay."""
    sites = snapshot.read_sites()
    pools = snapshot.read_pools()
    site_ids = {s["id"] for s in sites}
    pool_rows = _pool_rows(pools, site_ids)
    latency = snapshot.read_latency()
    egress = snapshot.read_egress()
    internet = snapshot.read_internet_egress()
    storage = snapshot.read_storage()
    with transaction(factory) as s:
        public = select(SiteRow.id).where(SiteRow.provider.in_(PUBLIC_PROVIDERS))
        s.execute(delete(PoolRow).where(PoolRow.site.in_(public)))
        s.execute(delete(SiteRow).where(SiteRow.provider.in_(PUBLIC_PROVIDERS)))
        s.execute(delete(LatencyRow))
        s.execute(delete(EgressRow))
        s.execute(delete(StoragePriceRow).where(StoragePriceRow.provider.in_(PUBLIC_PROVIDERS)))
        s.execute(delete(InstanceTypeFactRow))  # the bundled facts are the snapshot's own again
        now = datetime.now(UTC)
        _bulk_insert(
            s,
            SiteRow,
            [{**site, "jurisdictions": list(site["jurisdictions"]), "updated_at": now} for site in sites],
        )
        _bulk_load(s, PoolRow, pool_rows)
        _bulk_load(
            s,
            LatencyRow,
            [
                {"src": a, "dst": b, "rtt_ms": float(r), "statistic": str(st), "source": str(so), "rtt_p95_ms": p95}
                for a, b, r, st, so, p95 in zip(
                    latency["src"],
                    latency["dst"],
                    latency["rtt_ms"],
                    latency["statistic"],
                    latency["source"],
                    latency["rtt_p95_ms"].astype(float),
                    strict=True,
                )
            ],
        )
        egress_rows = [
            {"src": str(a), "dst": str(b), "usd_per_gb": float(p)}
            for a, b, p in zip(egress["src"], egress["dst"], egress["usd_per_gb"], strict=True)
        ]
        egress_rows += [{"src": k, "dst": "internet", "usd_per_gb": v} for k, v in internet.items()]
        _bulk_load(s, EgressRow, egress_rows)
        _bulk_insert(
            s,
            StoragePriceRow,
            [
                {
                    "provider": str(p),
                    "tier": str(t),
                    "usd_per_gb_month": float(v),
                    "product": str(pr),
                    "source": str(so),
                }
                for p, t, v, pr, so in zip(
                    storage["provider"],
                    storage["tier"],
                    storage["usd_per_gb_month"],
                    storage["product"],
                    storage["source"],
                    strict=True,
                )
                if str(p) in PUBLIC_PROVIDERS
            ],
        )
        bump_version(s)
    return {"sites": len(sites), "pools": len(pool_rows), "latency_pairs": len(latency)}


def _pool_rows(pools: Any, site_ids: set[str]) -> list[dict[str, Any]]:
    cols = [pools[c].tolist() for c in POOL_COLUMNS]
    caps = {c.value: c for c in CapacityType}
    arches = {a.value: a for a in Arch}
    rows = []
    for site, it, ct, arch, v, m, g, gm, price, src, asof, r3 in zip(*cols, strict=True):
        if site not in site_ids:
            continue
        # positional: a frozen dataclass built by keyword costs ~40 % more, over ~190k pools
        gpus = float(g) if g == g else 0.0
        gpu_model = gm if isinstance(gm, str) and gm else None
        pool = Pool(
            f"{site}/{it}/{ct}", site, it, caps[ct], arches[arch], float(v), float(m), gpus, gpu_model,
            float(price), None, src, str(asof),
        )  # fmt: skip
        r3_or_none = float(r3) if r3 == r3 and r3 is not None else None
        rows.append(PoolRow.values(pool, reserved_3yr_per_hour=r3_or_none))
    return rows


def is_empty(factory: sessionmaker[Session]) -> bool:
    with factory() as s:
        return not s.scalar(select(func.count()).select_from(PoolRow))


def current_version(session: Session) -> str:
    return session.scalar(select(CatalogMetaRow.value).where(CatalogMetaRow.key == "version")) or "empty"


# ---- reading it back ----------------------------------------------------------------


def read_catalog(factory: sessionmaker[Session]) -> Catalog:
    with factory() as s:
        version = current_version(s)
        sites = [r.to_domain() for r in s.scalars(select(SiteRow).order_by(SiteRow.id))]
        rows = s.execute(select(*PoolRow.domain_columns()).order_by(PoolRow.id)).all()
        latency_rows = s.execute(select(LatencyRow.src, LatencyRow.dst, LatencyRow.rtt_ms, LatencyRow.rtt_p95_ms)).all()
        egress_rows = s.execute(select(EgressRow.src, EgressRow.dst, EgressRow.usd_per_gb)).all()
        storage_rows = s.execute(
            select(StoragePriceRow.provider, StoragePriceRow.tier, StoragePriceRow.usd_per_gb_month)
        ).all()
        site_storage_rows = s.execute(
            select(SiteStoragePriceRow.site, SiteStoragePriceRow.tier, SiteStoragePriceRow.usd_per_gb_month)
        ).all()
        fed = {  # what live feeds stated, over the bundled catalog's facts
            (r.provider, r.instance_type): InstanceFacts(r.processor, r.gpu_memory_gib, r.bare_metal)
            for r in s.scalars(select(InstanceTypeFactRow))
        }
    table = build_pool_table(sites, PoolList.from_rows(rows), {**instance_facts(), **fed})
    site_map = {s.id: s for s in sites}
    latency = LatencyModel(site_map, [tuple(r) for r in latency_rows])

    n = len(sites)
    idx = table.site_index
    egress = np.full((n, n), np.nan)
    internet_by_key: dict[str, float] = {}
    for src, dst, price in egress_rows:
        if dst == "internet":
            internet_by_key[src] = price
        elif src in idx and dst in idx:
            egress[idx[src], idx[dst]] = price
    internet = np.array(
        [
            internet_by_key.get(
                s.id, internet_by_key.get(f"{s.provider}:*", 0.0 if s.kind != SiteKind.PUBLIC else 0.09)
            )
            for s in sites
        ]
    )
    tier_col = {t.value: i for i, t in enumerate(STORAGE_TIERS)}
    by_provider: dict[str, np.ndarray] = {}
    for provider, tier, price in storage_rows:
        if tier in tier_col:
            by_provider.setdefault(provider, np.zeros(len(STORAGE_TIERS)))[tier_col[tier]] = price
    storage = np.array([by_provider.get(s.provider, np.zeros(len(STORAGE_TIERS))) for s in sites]).reshape(
        n, len(STORAGE_TIERS)
    )
    for site_id, tier, price in site_storage_rows:  # a region's live feed price beats the provider's
        if site_id in idx and tier in tier_col:
            storage[idx[site_id], tier_col[tier]] = price
    as_of: dict[str, str] = {}
    for site, when in zip(table.pools.column("site"), table.pools.column("price_as_of"), strict=True):
        provider = site.split(":", 1)[0]
        if when > as_of.get(provider, ""):
            as_of[provider] = when
    return Catalog(version, site_map, table, latency, egress, internet, storage, as_of)


def instance_facts() -> dict[tuple[str, str], InstanceFacts]:
    """What the bundled catalog states about public instance types (processor, GPU memory, bare
    metal); live feeds' statements (`instance_type_facts`) are laid over them in read_catalog, and a
    type neither lists keeps what its name says."""
    return {
        key: InstanceFacts(processor=proc, gpu_memory_gib=mem, bare_metal=bare)
        for key, (proc, mem, bare) in snapshot.read_instance_types().items()
    }


def default_cache_dir() -> Path:
    return Path(user_cache_dir("placement-broker", appauthor=False))


def _load_from_disk(path: Path, version: str) -> Catalog | None:
    try:
        with path.open("rb") as fh:
            cat = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    return cat if isinstance(cat, Catalog) and cat.version == version else None


def _save_to_disk(path: Path, cat: Catalog) -> None:
    """Best effort: a CLI run then starts in seconds instead of rebuilding the catalog."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob("catalog-*.pickle"):
            old.unlink(missing_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(cat, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
    except OSError:
        pass


class CatalogCache:
    """One in-memory catalog per catalog version; rebuilt when the version changes.

    Built catalogs are kept process-wide by version, and on disk in the user's
    cache directory (a version is a fresh uuid at every load, so equal versions
    mean equal content, e.g. a copied database or another process).
    """

    _by_version: ClassVar[dict[str, Catalog]] = {}
    _lock = threading.Lock()
    generation: ClassVar[int] = 0  # bumped with every version written by this process
    # the version is one query per placement otherwise; another replica's reload shows within this
    VERSION_TTL_S: ClassVar[float] = 1.0

    def __init__(self, factory: sessionmaker[Session], disk_dir: Path | None = None) -> None:
        self._factory = factory
        self._disk_dir = disk_dir
        self._seen: tuple[str, float, int] | None = None  # (version, when read, generation)

    def _version(self) -> str:
        seen = self._seen
        now = time.monotonic()
        if seen is None or now - seen[1] > self.VERSION_TTL_S or seen[2] != CatalogCache.generation:
            gen = CatalogCache.generation
            with self._factory() as s:
                seen = (current_version(s), now, gen)
            self._seen = seen
        return seen[0]

    def get(self) -> Catalog:
        version = self._version()
        cat = self._by_version.get(version)
        if cat is not None:
            return cat
        with self._lock:
            cat = self._by_version.get(version)
            if cat is None:
                path = self._disk_dir / f"catalog-{version}.f{_PICKLE_FORMAT}.pickle" if self._disk_dir else None
                cat = _load_from_disk(path, version) if path else None
                if cat is None:
                    cat = read_catalog(self._factory)
                    if path:
                        _save_to_disk(path, cat)
                self._by_version.clear()  # keep one: a catalog is ~hundreds of MB of objects
                self._by_version[cat.version] = cat
            return cat
