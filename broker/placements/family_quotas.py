"""Tenants' vCPU quotas per provider quota group, set by the operator (API, CLI, or a CSV import).

A new AWS account has 0 vCPUs of Inf, P, Trn, DL and HPC on demand and spot; an Azure subscription
0 in most GPU and HPC families. A placement that ignores that is refused at apply. The operator
records what the tenant's accounts can launch; placements keep to it (prepare/filters.py: a
group whose quota is below one node's vCPUs offers no candidate) and name it when it decides
("quota:aws:Inf 0 vCPUs"). Groups are the pool attribute `quota_group` (pricing/node_classes.py).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from broker.core.pooltable import PoolTable
from broker.db.service_models import FamilyQuotaRow
from broker.db.session import transaction
from broker.errors import InvalidRequest, NotFound

MAX_VCPUS = 1e9


def quota_groups(table: PoolTable) -> frozenset[str]:
    """The quota groups of a catalog's pools (owned capacity has none)."""
    return frozenset(str(g) for g in np.unique(table.quota_group.astype(str)) if g)


def _check(group: str, vcpus: float, known: Collection[str] | None, loc: list[str | int]) -> None:
    if not isinstance(vcpus, int | float) or not math.isfinite(vcpus) or not 0 <= vcpus <= MAX_VCPUS:
        raise InvalidRequest(
            "a family quota is a number of vCPUs, 0 or more",
            errors=[{"loc": [*loc, "vcpus"], "msg": f"must be between 0 and {MAX_VCPUS:g}"}],
        )
    if known is not None and group not in known:
        hint = ", ".join(sorted(g for g in known if g.split(":", 1)[0] == group.split(":", 1)[0])[:12])
        raise InvalidRequest(
            f"unknown quota group {group!r}",
            errors=[
                {"loc": [*loc, "quota_group"], "msg": f"not a quota group of the catalog (e.g. {hint or 'aws:Inf'})"}
            ],
        )


class FamilyQuotas:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def set(
        self, *, tenant: str, quota_group: str, vcpus: float, known: Collection[str] | None = None
    ) -> dict[str, Any]:
        """Set one quota; `known`: the catalog's quota groups (a group outside it is a 422)."""
        _check(quota_group, vcpus, known, ["body"])
        with transaction(self._sessions) as s:
            _upsert(s, tenant, quota_group, float(vcpus))
        return {"quota_group": quota_group, "vcpus": float(vcpus)}

    def import_csv(self, *, tenant: str, text: str, known: Collection[str] | None = None) -> int:
        """Set every quota of a `quota_group,vcpus` CSV (a header line is required) in one transaction."""
        reader = csv.DictReader(io.StringIO(text))
        if reader.fieldnames is None or not {"quota_group", "vcpus"} <= set(reader.fieldnames):
            raise InvalidRequest("a quota file has the columns quota_group,vcpus")
        rows: list[tuple[str, float]] = []
        for i, r in enumerate(reader, start=2):
            try:
                v = float(r["vcpus"])
            except (TypeError, ValueError):
                raise InvalidRequest(f"line {i}: vcpus {r['vcpus']!r} is not a number") from None
            try:
                _check(r["quota_group"], v, known, ["line", i])
            except InvalidRequest as exc:
                raise InvalidRequest(f"line {i}: {exc.detail}", errors=exc.errors) from None
            rows.append((r["quota_group"], v))
        with transaction(self._sessions) as s:
            for group, v in rows:
                _upsert(s, tenant, group, v)
        return len(rows)

    def delete(self, *, tenant: str, quota_group: str) -> None:
        with transaction(self._sessions) as s:
            gone = s.execute(
                delete(FamilyQuotaRow).where(FamilyQuotaRow.tenant == tenant, FamilyQuotaRow.quota_group == quota_group)
            )
            if getattr(gone, "rowcount", 0) == 0:
                raise NotFound(f"the tenant has no quota for {quota_group!r}")

    def for_tenant(self, tenant: str) -> dict[str, float]:
        with self._sessions() as s:
            rows = s.execute(
                select(FamilyQuotaRow.quota_group, FamilyQuotaRow.vcpus)
                .where(FamilyQuotaRow.tenant == tenant)
                .order_by(FamilyQuotaRow.quota_group)
            ).all()
        return {str(g): float(v) for g, v in rows}


def _upsert(s: Session, tenant: str, group: str, vcpus: float) -> None:
    row = s.scalar(select(FamilyQuotaRow).where(FamilyQuotaRow.tenant == tenant, FamilyQuotaRow.quota_group == group))
    if row is None:
        row = FamilyQuotaRow(tenant=tenant, quota_group=group, vcpus=vcpus)
        s.add(row)
    row.vcpus = vcpus
    row.updated_at = datetime.now(UTC)
