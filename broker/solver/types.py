"""Types shared across the solver's steps, in a module that depends on none of them.

Placements as dictionaries, and the prices the bounds read from a model: the dual prices of an
LP's capacity rows (the restricted master makes them, the node-share bound reads them) and the
egress rates of the layout's egress columns.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray

if TYPE_CHECKING:
    from broker.solver.model.layout import Layout, ModelInput

Placement = dict[tuple[int, int], int]  # (workload index, pool index) -> replicas
ClassPlacement = dict[tuple[int, int], int]  # (class index, pool index) -> replicas


@dataclass
class BestSoFar:
    """The best bound a thread has proven so far, readable before it ends: a search whose time
    is up takes it rather than wait for the thread (waiting made solves overrun their limit)."""

    value: float = -math.inf
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # set by the first finite offer (or by whoever stops waiting for one): a search whose time
    # is up waits for this, not for the thread to end
    proven: threading.Event = field(default_factory=threading.Event, repr=False)

    def offer(self, value: float) -> None:
        with self._lock:
            self.value = max(self.value, value)
        if self.value > -math.inf:
            self.proven.set()


@dataclass(frozen=True)
class EgressColumns:
    """The layout's egress columns: class k's traffic to v leaving site s costs `cost` per unit
    of k's share of replicas at s that v does not match there: the cheapest rate it can leave
    at. With `far` and `near` (two tiers, as the layout has them), it costs `far` unless v runs
    at another site of s's cloud, then `near` (inf: no such tier), the gate a bound can keep."""

    k: IntArray
    v: IntArray
    site: IntArray
    cost: FloatArray
    far: FloatArray | None = None
    near: FloatArray | None = None

    def select(self, mine: BoolArray) -> EgressColumns:
        """The columns `mine`."""
        far = self.far[mine] if self.far is not None else None
        near = self.near[mine] if self.near is not None else None
        return EgressColumns(self.k[mine], self.v[mine], self.site[mine], self.cost[mine], far, near)

    @classmethod
    def of(cls, lay: Layout) -> EgressColumns:
        """The layout's egress columns at the cheapest rate their traffic can leave at: within
        the cloud (a near column) where v may run at another site of it, else the far price.
        The far price alone overstated the floor of a pair whose peer may run in the same
        cloud (the bound could pass the full LP)."""
        near = np.full(lay.n_e, np.inf)
        np.minimum.at(near, lay.near_e, lay.near_cost)
        return cls(lay.e_class, lay.e_peer, lay.e_site, np.minimum(lay.e_cost, near), lay.e_cost.copy(), near)


@dataclass(frozen=True)
class DualPrices:
    """Capacity prices for the pools of an LP (bounds/relaxed_lp.py), from its duals: per unit of cpu,
    memory and GPU, and what they leave of a node's cost (`slack`), split over cpu and memory as
    elsewhere. Any prices >= 0 that charge no more than a node costs are as valid as a split."""

    unit: FloatArray  # (n_pools, 3); 0 for pools not in the LP
    slack: FloatArray  # per pool: the node cost left to split; NaN for pools not in the LP

    @classmethod
    def of(cls, mi: ModelInput, pools: IntArray, unit: FloatArray) -> DualPrices:
        """From the capacity rows' duals (`unit`, per pool of `pools`), scaled down where, by
        solver tolerances, they would charge more than the node costs."""
        unit = np.maximum(unit, 0.0)
        paid = (unit * np.stack([mi.vcpus[pools], mi.mem[pools], mi.gpus[pools]], axis=1)).sum(axis=1)
        cost = mi.node_cost[pools]
        scale = np.minimum(1.0, cost / np.maximum(paid, 1e-300))
        full = np.zeros((mi.n_pools, 3))
        full[pools] = unit * scale[:, None]
        slack = np.full(mi.n_pools, np.nan)
        slack[pools] = np.maximum(cost - paid * scale, 0.0)
        return cls(full, slack)
