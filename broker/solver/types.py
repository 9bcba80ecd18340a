"""Types shared across the solver's steps, in a module that depends on none of them.

Placements as dictionaries, and the prices the bounds read from a model: the dual prices of an
LP's capacity rows (the restricted master makes them, the node-share bound reads them) and the
egress rates of the layout's egress columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from broker.core.pooltable import FloatArray, IntArray

if TYPE_CHECKING:
    from broker.solver.model.layout import Layout, ModelInput

Placement = dict[tuple[int, int], int]  # (workload index, pool index) -> replicas
ClassPlacement = dict[tuple[int, int], int]  # (class index, pool index) -> replicas


@dataclass(frozen=True)
class EgressColumns:
    """The layout's egress columns: class k's traffic to v leaving site s costs `cost` per unit
    of k's share of replicas at s that v does not match there."""

    k: IntArray
    v: IntArray
    site: IntArray
    cost: FloatArray

    @classmethod
    def of(cls, lay: Layout) -> EgressColumns:
        """The layout's egress columns at the cheapest rate their traffic can leave at: within
        the cloud (a near column) where v may run at another site of it, else the far price.
        The far price alone overstated the floor of a pair whose peer may run in the same
        cloud (the bound could pass the full LP)."""
        cost = lay.e_cost.copy()
        np.minimum.at(cost, lay.near_e, lay.near_cost)
        return cls(lay.e_class, lay.e_peer, lay.e_site, cost)


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
