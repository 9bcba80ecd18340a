"""Private data centres and edge sites: validate a sites document and store it.

The document format is in ../shared/spec/cli-and-files.md. Each node type becomes one
pool ``<site>/<name>/reserved`` with ``max_nodes = count`` and a price per node-hour
from the TCO model (``pricing.tco``) or a flat monthly rate. An import is one
transaction: an invalid document changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from broker.catalog.store import bump_version
from broker.core.domain import Arch, CapacityType, Pool
from broker.db.models import PoolRow, SiteRow
from broker.db.price_models import ListPriceRow, PriceHistoryRow, SiteDefinitionRow
from broker.db.session import transaction
from broker.errors import InvalidRequest
from pricing.tco import Tco, flat_price_per_node_hour, jurisdictions

TCO_SOURCE = "tco-model"
FLAT_SOURCE = "flat-rate"
Slug = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9._\-]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TcoIn(_Strict):
    hardware_usd: float = Field(ge=0, le=1e8)
    amortization_months: float = Field(gt=0, le=240)
    power_kw: float = Field(ge=0, le=1000)
    pue: float = Field(ge=1.0, le=5.0)
    usd_per_kwh: float = Field(ge=0, le=10)
    monthly_usd: float = Field(0.0, ge=0, le=1e7)

    def to_pure(self) -> Tco:
        return Tco(**self.model_dump())


class NodeTypeIn(_Strict):
    name: Slug
    vcpus: float = Field(gt=0, le=4096)
    memory_gib: float = Field(gt=0, le=65_536)
    arch: Arch = Arch.AMD64
    gpus: float = Field(0, ge=0, le=64)
    gpu_model: str | None = Field(None, max_length=80)
    count: int = Field(ge=0, le=1_000_000)
    tco: TcoIn | None = None
    flat_monthly_usd: float | None = Field(None, ge=0, le=1e7)

    @model_validator(mode="after")
    def _one_price(self) -> NodeTypeIn:
        if (self.tco is None) == (self.flat_monthly_usd is None):
            raise ValueError("give exactly one of tco or flat_monthly_usd")
        return self

    def price(self) -> tuple[float, str]:
        if self.tco is not None:
            return self.tco.to_pure().price_per_node_hour(), TCO_SOURCE
        return flat_price_per_node_hour(float(self.flat_monthly_usd or 0.0)), FLAT_SOURCE


class SiteIn(_Strict):
    id: str = Field(pattern=r"^(private|edge):[a-z0-9][a-z0-9._\-]{0,99}$")
    kind: Literal["private", "edge"]
    name: str = Field("", max_length=200)
    country: str = Field(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2")
    lat: float | None = Field(None, ge=-90, le=90)
    lon: float | None = Field(None, ge=-180, le=180)
    carbon_g_per_kwh: float | None = Field(None, ge=0, le=2000)
    node_types: list[NodeTypeIn] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> SiteIn:
        if self.id.split(":", 1)[0] != self.kind:
            raise ValueError(f"a {self.kind} site's id must start with '{self.kind}:'")
        if (self.lat is None) != (self.lon is None):
            raise ValueError("give both lat and lon, or neither")
        names = [n.name for n in self.node_types]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate node type name(s) {dup}")
        return self


class SitesDocument(_Strict):
    sites: list[SiteIn] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> SitesDocument:
        ids = [s.id for s in self.sites]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate site id(s) {dup}")
        return self


def parse_sites(doc: Any, *, origin: str = "body") -> SitesDocument:
    """Validate a sites document; errors name the origin (file or body), the field and the reason."""
    if not isinstance(doc, dict):
        raise InvalidRequest(
            f"{origin}: a sites document must be a mapping with a 'sites' list",
            errors=[{"loc": [origin], "msg": "not a mapping with a 'sites' list"}],
        )
    try:
        return SitesDocument.model_validate(doc)
    except ValidationError as exc:
        errors = [
            {"loc": [origin, *e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_context=False)
        ]
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in errors[:3])
        raise InvalidRequest(f"{origin}: invalid sites document ({where})", errors=errors) from exc


def read_sites_file(path: Path) -> SitesDocument:
    try:
        text = path.read_text()
    except OSError as exc:
        raise InvalidRequest(
            f"{path}: cannot read ({exc.strerror})", errors=[{"loc": [str(path)], "msg": str(exc)}]
        ) from exc
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidRequest(
            f"{path}: not valid YAML/JSON: {exc}", errors=[{"loc": [str(path)], "msg": str(exc)}]
        ) from exc
    return parse_sites(doc, origin=str(path))


def site_pools(site: SiteIn, as_of: str) -> list[Pool]:
    pools = []
    for nt in site.node_types:
        price, source = nt.price()
        pools.append(
            Pool(
                id=Pool.make_id(site.id, nt.name, CapacityType.RESERVED),
                site=site.id,
                instance_type=nt.name,
                capacity_type=CapacityType.RESERVED,
                arch=nt.arch,
                vcpus=nt.vcpus,
                memory_gib=nt.memory_gib,
                gpus=nt.gpus,
                gpu_model=nt.gpu_model,
                price_per_hour=round(price, 6),
                max_nodes=nt.count,
                price_source=source,
                price_as_of=as_of,
            )
        )
    return pools


def import_sites(factory: sessionmaker[Session], doc: SitesDocument) -> dict[str, Any]:
    """Add or replace the given sites and their pools in one transaction; bump the catalog version."""
    now = datetime.now(UTC)
    as_of = now.isoformat(timespec="seconds")
    out: dict[str, Any] = {"sites": [], "pools": 0}
    with transaction(factory) as s:
        for site in doc.sites:
            s.execute(delete(PoolRow).where(PoolRow.site == site.id))
            s.merge(
                SiteRow(
                    id=site.id,
                    provider=site.kind,
                    kind=site.kind,
                    region=site.id.split(":", 1)[1],
                    name=site.name or site.id.split(":", 1)[1],
                    country=site.country,
                    jurisdictions=list(jurisdictions(site.country)),
                    lat=site.lat,
                    lon=site.lon,
                    carbon_g_per_kwh=site.carbon_g_per_kwh,
                    carbon_source="sites file" if site.carbon_g_per_kwh is not None else None,
                    updated_at=now,
                )
            )
            s.merge(SiteDefinitionRow(site_id=site.id, document=site.model_dump(mode="json"), imported_at=now))
            pools = site_pools(site, as_of)
            for p in pools:
                s.add(PoolRow.from_domain(p))
                s.merge(ListPriceRow(pool_id=p.id, price_per_hour=p.price_per_hour, source=p.price_source, as_of=as_of))
                s.add(
                    PriceHistoryRow(
                        pool_id=p.id,
                        price_per_hour=p.price_per_hour,
                        list_price_per_hour=p.price_per_hour,
                        source=p.price_source,
                        effective_at=as_of,
                        recorded_at=now,
                    )
                )
            out["sites"].append(
                {
                    "id": site.id,
                    "pools": [
                        {"id": p.id, "price_per_hour": p.price_per_hour, "max_nodes": p.max_nodes} for p in pools
                    ],
                }
            )
            out["pools"] += len(pools)
        out["catalog_version"] = bump_version(s)
    return out
