"""The simulator's edge: fleet files, trace files and the catalog snapshot, read from disk.

The CLI simulates over the bundled catalog snapshot (pricing/snapshot/), read straight from its
files for the fleet's sites only (no database, so a first run on a fresh clone takes seconds);
the API passes the broker's own catalog instead (`parts_of`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from broker.core.domain import Arch, CapacityType, Pool, Site, SiteKind
from broker.core.latency import LatencyModel
from broker.core.pooltable import build_pool_table
from broker.errors import InvalidRequest
from broker.simulate.market import CatalogParts
from broker.solver.problem import STORAGE_TIERS
from pricing import snapshot
from pricing.traces import read_usage_traces


def read_document(path: Path) -> Any:
    """A fleet file (YAML, or JSON by its suffix); InvalidRequest naming the file otherwise."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InvalidRequest(
            f"cannot read {path}: {exc.strerror}", errors=[{"loc": ["file"], "msg": str(exc)}]
        ) from exc
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        msg = f"{path} is not valid JSON/YAML: {exc}"
        raise InvalidRequest(msg, errors=[{"loc": ["file"], "msg": str(exc)}]) from exc


def traces(extra: str | None, base: Path | None) -> pd.DataFrame:
    """The bundled traces, with the columns of the fleet's own `traces` file (same layout: a
    `step` column, then `<series>:cpu` / `<series>:mem` in percent) added or overriding."""
    bundled = read_usage_traces()
    if extra is None:
        return bundled
    path = (base / extra) if base is not None else Path(extra)
    try:
        own = pd.read_csv(path).set_index("step").astype("float64")
    except (OSError, ValueError, KeyError) as exc:
        raise InvalidRequest(
            f"traces: cannot read {path}: {exc}", errors=[{"loc": ["traces"], "msg": f"cannot read {path}: {exc}"}]
        ) from exc
    bad = [c for c in own.columns if not str(c).endswith((":cpu", ":mem"))]
    if bad:
        msg = f"columns must be <series>:cpu or <series>:mem, got {bad[:3]}"
        raise InvalidRequest(f"traces: {msg}", errors=[{"loc": ["traces"], "msg": msg}])
    if len(own) < len(bundled):
        return own
    return pd.concat([bundled.drop(columns=[c for c in own.columns if c in bundled.columns]), own], axis=1).dropna()


def snapshot_parts(site_ids: Iterable[str] | None = None) -> CatalogParts:
    """The bundled catalog's pools at these sites (every site when None), latencies, transfer
    and storage prices, as broker.catalog.store.read_catalog builds them from the database."""
    site_rows = snapshot.read_sites()
    sites = [
        Site(
            id=r["id"],
            provider=r["provider"],
            kind=SiteKind(r["kind"]),
            region=r["region"],
            country=r["country"],
            jurisdictions=tuple(r["jurisdictions"]),
            lat=r["lat"],
            lon=r["lon"],
            carbon_g_per_kwh=r["carbon_g_per_kwh"],
            name=r["name"],
        )
        for r in sorted(site_rows, key=lambda r: str(r["id"]))
    ]
    wanted = set(site_ids) if site_ids is not None else {s.id for s in sites}
    frame = snapshot.read_pools()
    frame = frame[frame["site"].astype(str).isin(wanted) & (frame["capacity_type"].astype(str) != "reserved")]
    caps = {c.value: c for c in CapacityType}
    arches = {a.value: a for a in Arch}
    pools = [
        Pool(
            Pool.make_id(site, it, ct),
            site,
            it,
            caps[ct],
            arches[arch],
            float(v),
            float(m),
            float(g) if g == g else 0.0,
            gm if isinstance(gm, str) and gm else None,
            float(price),
            None,
            str(src),
            str(asof),
        )
        for site, it, ct, arch, v, m, g, gm, price, src, asof in zip(
            *(
                frame[c].astype(object).tolist()
                for c in (
                    "site",
                    "instance_type",
                    "capacity_type",
                    "arch",
                    "vcpus",
                    "memory_gib",
                    "gpus",
                    "gpu_model",
                    "price_per_hour",
                    "price_source",
                    "price_as_of",
                )
            ),
            strict=True,
        )
    ]
    table = build_pool_table(sites, sorted(pools, key=lambda p: p.id))
    lat = snapshot.read_latency()
    latency = LatencyModel(
        {s.id: s for s in sites},
        list(zip(lat["src"].astype(str), lat["dst"].astype(str), lat["rtt_ms"], lat["rtt_p95_ms"], strict=True)),
    )
    idx = table.site_index
    n = len(sites)
    egress = np.full((n, n), np.nan)
    eg = snapshot.read_egress()
    for src, dst, price in zip(eg["src"].astype(str), eg["dst"].astype(str), eg["usd_per_gb"], strict=True):
        if src in idx and dst in idx:
            egress[idx[src], idx[dst]] = price
    by_key = snapshot.read_internet_egress()
    internet = np.array([_internet(s, by_key) for s in sites])
    storage = np.zeros((n, len(STORAGE_TIERS)))
    st = snapshot.read_storage()
    tier_col = {t.value: i for i, t in enumerate(STORAGE_TIERS)}
    by_provider: dict[str, np.ndarray] = {}
    for provider, tier, price in zip(
        st["provider"].astype(str), st["tier"].astype(str), st["usd_per_gb_month"], strict=True
    ):
        if tier in tier_col:
            by_provider.setdefault(provider, np.zeros(len(STORAGE_TIERS)))[tier_col[tier]] = price
    for i, s in enumerate(sites):
        storage[i] = by_provider.get(s.provider, np.zeros(len(STORAGE_TIERS)))
    return CatalogParts(table=table, latency=latency, egress=egress, internet_egress=internet, storage=storage)


def _internet(site: Site, by_key: dict[str, float]) -> float:
    """As read_catalog prices it: the site's own price, its provider's, else 0.09 (public) or 0."""
    fallback = 0.0 if site.kind != SiteKind.PUBLIC else 0.09
    return float(by_key.get(site.id, by_key.get(f"{site.provider}:*", fallback)))


def parts_of(catalog: Any) -> CatalogParts:
    """The parts of the broker's catalog (broker.catalog.store.Catalog)."""
    return CatalogParts(
        table=catalog.table,
        latency=catalog.latency,
        egress=catalog.egress,
        internet_egress=catalog.internet_egress,
        storage=catalog.storage,
    )
