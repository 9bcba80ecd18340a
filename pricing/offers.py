"""What a price feed yields, independent of the provider: offers, instance specs, storage prices.

Pure value types; the provider adapters (``providers/``) produce them and the refresh
service (``broker.catalog.refresh``) writes them into the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Offer:
    """One price of one instance type in one region: pool ``<provider>:<region>/<type>/<capacity>``."""

    provider: str
    region: str
    instance_type: str
    capacity_type: str  # ondemand | spot | reserved
    price_per_hour: float
    effective_at: str  # ISO 8601, as the feed states it (or the fetch time)
    reserved_3yr_per_hour: float | None = None  # reserved offers: the 3-year effective rate

    @property
    def pool_id(self) -> str:
        return f"{self.provider}:{self.region}/{self.instance_type}/{self.capacity_type}"


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    instance_type: str
    vcpus: float
    memory_gib: float
    arch: str = "amd64"  # amd64 | arm64
    gpus: float = 0.0
    gpu_model: str | None = None
    # regions where the provider does not sell it to this account (Azure SKU restrictions)
    restricted_regions: frozenset[str] = frozenset()
    # what the feed states beyond the size, for instance requirements (None: not stated)
    processor: str | None = None
    gpu_memory_gib: float | None = None  # per GPU
    bare_metal: bool | None = None

    @property
    def has_facts(self) -> bool:
        return self.processor is not None or self.gpu_memory_gib is not None or self.bare_metal is not None


@dataclass(frozen=True, slots=True)
class StoragePrice:
    provider: str
    region: str
    tier: str  # standard | ssd | premium
    usd_per_gb_month: float
    product: str  # "EBS gp3", "Premium SSD Managed Disks P10", "pd-ssd", ...
    effective_at: str


@dataclass(slots=True)
class FeedResult:
    """Everything one provider's feed returned for a set of regions."""

    provider: str
    offers: list[Offer] = field(default_factory=list)
    specs: dict[str, InstanceSpec] = field(default_factory=dict)
    storage: list[StoragePrice] = field(default_factory=list)
    regions: list[str] = field(default_factory=list)
