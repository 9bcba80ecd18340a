"""The per-pool arrays both baselines read."""

from __future__ import annotations

from dataclasses import dataclass

from broker.core.pooltable import FloatArray, IntArray


@dataclass(frozen=True)
class PoolArrays:
    node_cost: FloatArray
    vcpus: FloatArray
    mem: FloatArray
    gpus: FloatArray
    max_nodes: FloatArray
    site_idx: IntArray
    cap_idx: IntArray
