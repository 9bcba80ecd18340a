"""The solver's input: one request over one snapshot of prices, sites and latencies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from broker.core.domain import HOURS_PER_MONTH, PlacementRequest, StorageTier
from broker.core.pooltable import FloatArray, PoolTable

GIB_IN_GB = 1.073741824  # egress is priced per GB, traffic is declared in GiB
STORAGE_TIERS: tuple[StorageTier, ...] = tuple(StorageTier)

# Node power estimate (Cloud Carbon Footprint methodology, average of the
# providers' min/max watts per vCPU at 50 % utilisation, 0.392 W per GiB of
# memory, PUE 1.135): kW per node = (vcpus * W_PER_VCPU + gib * W_PER_GIB) * PUE / 1000.
W_PER_VCPU = 2.12
W_PER_GIB = 0.392
PUE = 1.135


@dataclass(frozen=True)
class PlacementProblem:
    request: PlacementRequest
    table: PoolTable
    # user region name -> RTT in ms from every site (index as table.sites)
    user_rtt: Mapping[str, FloatArray] = field(default_factory=dict)
    # [site, site] egress USD per GB; NaN where unknown (then internet egress is charged)
    egress_usd_per_gb: FloatArray | None = None
    # [site] internet egress USD per GB (fallback for unknown pairs)
    internet_egress_usd_per_gb: FloatArray | None = None
    # [site, tier] block storage USD per GB-month, tier order as STORAGE_TIERS
    storage_usd_per_gb_month: FloatArray | None = None
    # pools the solver should rather not move away from: pool id -> replicas per workload
    current: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # the request as the user declared it, when `request` was sized from demand forecasts: the
    # kubernetes-packer baseline runs the declared requests (None: `request` is as declared)
    declared: PlacementRequest | None = None
    # the tenant's vCPU quotas per provider quota group ("aws:Inf" -> 0): a pool of a group whose
    # quota is below one node's vCPUs is no candidate (prepare/filters.py)
    family_quotas: Mapping[str, float] = field(default_factory=dict)

    def storage_per_replica_hour(self, storage_gib: float, tier: StorageTier) -> FloatArray:
        """USD per replica-hour of block storage at each site."""
        n = self.table.n_sites
        if storage_gib <= 0 or self.storage_usd_per_gb_month is None:
            return np.zeros(n)
        col = STORAGE_TIERS.index(tier)
        per_month = self.storage_usd_per_gb_month[:, col] * storage_gib * GIB_IN_GB
        return np.nan_to_num(per_month / HOURS_PER_MONTH)

    def egress_matrix(self) -> FloatArray:
        """[site, site] USD per GB with internet egress filling unknown pairs, 0 on the diagonal."""
        n = self.table.n_sites
        internet = self.internet_egress_usd_per_gb if self.internet_egress_usd_per_gb is not None else np.full(n, 0.09)
        if self.egress_usd_per_gb is None:
            m = np.repeat(internet[:, None], n, axis=1)
        else:
            m = np.where(np.isnan(self.egress_usd_per_gb), internet[:, None], self.egress_usd_per_gb)
        m = m.copy()
        np.fill_diagonal(m, 0.0)
        return m

    def node_power_kw(self) -> FloatArray:
        t = self.table
        return (t.raw_vcpus * W_PER_VCPU + t.raw_memory_gib * W_PER_GIB) * PUE / 1000.0
