"""Fair share of scarce (private and edge) capacity between tenants.

The rule, applied before the solver runs by lowering the pools' max_nodes:

* Nodes that other tenants' active placements use (their latest placement per
  name) are not available: cap = max_nodes - used_by_others.
* With weights configured (BROKER_FAIR_SHARE_WEIGHTS, tenant -> weight), a
  tenant t may use at most floor(max_nodes * w_t / W) nodes of each private or
  edge pool, where W sums the weights of the configured tenants and t (an
  unlisted tenant weighs 1). So no tenant can take a whole data centre.

Public pools (unbounded) are never touched. The solver itself is unchanged: it
sees a pool table whose capacity is the tenant's share.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from broker.core.domain import NodeAllocation
from broker.core.pooltable import PoolTable
from broker.db.service_models import CommitmentRow


def used_by_others(sessions: sessionmaker[Session], tenant: str) -> dict[str, int]:
    used: dict[str, int] = {}
    with sessions() as s:
        for nodes in s.scalars(select(CommitmentRow.scarce_nodes).where(CommitmentRow.tenant != tenant)):
            for pool, count in (nodes or {}).items():
                used[pool] = used.get(pool, 0) + int(count)
    return used


def share(max_nodes: float, tenant: str, weights: Mapping[str, float]) -> float:
    """The most nodes of a pool with max_nodes that `tenant` may use under `weights`."""
    if not weights:
        return max_nodes
    mine = float(weights.get(tenant, 1.0))
    total = sum(float(w) for t, w in weights.items() if t != tenant) + mine
    return float(math.floor(max_nodes * mine / total)) if total > 0 else 0.0


def capped_table(
    table: PoolTable, *, tenant: str, weights: Mapping[str, float], others: Mapping[str, int]
) -> PoolTable:
    """The pool table as `tenant` may use it; the same object when nothing is capped."""
    if not weights and not others:
        return table
    max_nodes = table.max_nodes.copy()
    scarce = np.flatnonzero(np.isfinite(max_nodes))
    for p in scarce:
        full = float(table.max_nodes[p])
        cap = min(share(full, tenant, weights), full - others.get(table.pools[p].id, 0))
        max_nodes[p] = max(0.0, cap)
    if np.array_equal(max_nodes, table.max_nodes):
        return table
    return dataclasses.replace(table, max_nodes=max_nodes)


def scarce_nodes(table: PoolTable, nodes: Iterable[NodeAllocation]) -> dict[str, int]:
    """The private/edge part of a placement's nodes: pool id -> count."""
    out: dict[str, int] = {}
    for n in nodes:
        p = table.pool_index.get(n.pool)
        if p is not None and math.isfinite(float(table.max_nodes[p])):
            out[n.pool] = out.get(n.pool, 0) + n.count
    return out
