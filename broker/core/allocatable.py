"""What pods can request on a node: its raw size minus what its managed Kubernetes reserves
(kube-reserved, system-reserved and the eviction threshold, reservations.py) minus the
DaemonSets every node runs (a setting, passed down from the edge).

`allocatable` is applied once, where the catalog's pools become the solver's pool table
(Catalog.solver_table and Catalog.table_for): every capacity the solver, its fit checks, node counts and
explanations read is then allocatable, never raw.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from broker.core.pooltable import FloatArray, PoolTable


@dataclass(frozen=True)
class NodeOverhead:
    """Per node, what DaemonSets (CNI, kube-proxy, log and metrics agents) request."""

    daemonset_vcpus: float = 0.1
    daemonset_memory_gib: float = 0.25


def allocatable_capacity(
    raw_vcpus: FloatArray,
    raw_memory_gib: FloatArray,
    reserved_vcpus: FloatArray,
    reserved_memory_gib: FloatArray,
    overhead: NodeOverhead,
) -> tuple[FloatArray, FloatArray]:
    """Element-wise (vCPUs, GiB) a node offers pods, never below zero."""
    cpu = np.maximum(raw_vcpus - reserved_vcpus - overhead.daemonset_vcpus, 0.0)
    mem = np.maximum(raw_memory_gib - reserved_memory_gib - overhead.daemonset_memory_gib, 0.0)
    return cpu, mem


def allocatable(table: PoolTable, overhead: NodeOverhead, *, burst: bool = False) -> PoolTable:
    """The table with each pool's vcpus and memory_gib set to its allocatable capacity (from its
    raw size, so applying it twice changes nothing). A node left with nothing to offer (a
    0.5 GiB t3a.nano) can never start a pod: it is marked dominated, so `compact` drops it.

    A burstable node sustains only its baseline share of each vCPU (pricing/node_classes.py): its
    pods' CPU requests are packed within that (`burst` False, the default), the reservations and
    DaemonSets included, so the replicas on it never run above the baseline for long; with `burst`
    (a request with a `burstable: allow` workload) at its full size, as any other node."""
    cpu, mem = allocatable_capacity(
        table.raw_vcpus, table.raw_memory_gib, table.reserved_vcpus, table.reserved_memory_gib, overhead
    )
    if not burst:
        sustained, _ = allocatable_capacity(
            table.raw_vcpus * table.baseline, table.raw_memory_gib, table.reserved_vcpus,
            table.reserved_memory_gib, overhead,
        )  # fmt: skip
        cpu = np.minimum(cpu, sustained)
    useless = (cpu <= 0) | (mem <= 0)
    return dataclasses.replace(
        table, vcpus=cpu, memory_gib=mem, dominated=table.dominated | useless, burst_capacity=burst
    )
