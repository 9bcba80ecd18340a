"""Bridging: replicas that would wait for a node to start run at once where usage leaves room.

A replica left pending by an event (a surge's new replicas, a reclaimed spot node, a failed
site) waits minutes for a new node when no node has room under the policy's requests. Yet the
requests are reservations, and most nodes' cores sit idle: a ready node whose replicas, at
their highest use of the last hour, leave room for the pending replica's own highest use (plus
a margin) can run it now. The broker policy binds it there and still gets it a proper home
(room under the requests, or a new node), then moves it make-before-break: the bridge node
keeps it running until the new node is up. Contention on the bridge node is accounted as any
other (starved core-minutes).
"""

from __future__ import annotations

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.kube_model import EPS
from broker.simulate.cluster import GONE, READY, Cluster
from broker.simulate.policies.base import StepView

RECENT_STEPS = 12  # an hour of 5-minute steps: the use a bridge must leave room for


def per_replica_peak(view: StepView) -> tuple[FloatArray, FloatArray]:
    """Per workload: the highest cores and GiB one replica used over the last hour (each
    workload's total split over the replicas it wants now)."""
    reps = np.maximum(view.replicas, 1).astype(np.float64)
    if view.cpu_seen.shape[1] == 0:
        zero = np.zeros(len(reps))
        return zero, zero
    cpu = np.nan_to_num(view.cpu_seen[:, -RECENT_STEPS:], nan=0.0).max(axis=1) / reps
    mem = np.nan_to_num(view.memory_seen[:, -RECENT_STEPS:], nan=0.0).max(axis=1) / reps
    return cpu, mem


def usage_room(c: Cluster, cpu: FloatArray, mem: FloatArray) -> FloatArray:
    """[2, node] cores and GiB each node has left under its replicas' recent peak use (replicas
    bound there and replicas moving there both count)."""
    return c.free(cpu, mem)[:2]


def bridge(c: Cluster, view: StepView, pending: IntArray, pool_ok: BoolArray, margin: float) -> IntArray:
    """Bind each pending replica that fits to the ready node with the most room left under
    recent use (its own recent peak x (1 + margin) must fit, cores and memory); returns the
    replicas bound. GPU replicas are not bridged (a GPU is not shared)."""
    if len(pending) == 0:
        return pending
    cpu, mem = per_replica_peak(view)
    room = usage_room(c, cpu, mem)
    cap_cpu, cap_mem, _ = c.node_capacity()
    n = c.n_nodes
    ok_node = (c.node_state[:n] == READY) & ~c.node_drain[:n] & (c.node_state[:n] != GONE)
    pool = c.node_pool[:n]
    gpus = [w.gpus for w in c.market.workloads]
    bound: list[int] = []
    # smallest first: when the room left cannot hold them all, most replicas run
    k_of = c.rep_w[pending]
    size = cpu[k_of] / max(float(cap_cpu[ok_node].max(initial=0.0)), EPS) + mem[k_of] / max(
        float(cap_mem[ok_node].max(initial=0.0)), EPS
    )
    for r in pending[np.argsort(size, kind="stable")].tolist():
        k = int(c.rep_w[r])
        if gpus[k] > 0:
            continue
        need = np.array([cpu[k], mem[k]]) * (1.0 + margin)
        hits = np.flatnonzero(ok_node & pool_ok[k, pool] & (room >= need[:, None] - EPS).all(axis=0))
        if len(hits) == 0:
            continue
        # the most room left, as a share of the node: the bridge adds least contention there
        share = room[0, hits] / np.maximum(cap_cpu[hits], EPS) + room[1, hits] / np.maximum(cap_mem[hits], EPS)
        node = int(hits[int(np.argmax(share))])
        c.bind(r, node)
        room[:, node] -= need
        bound.append(r)
    return np.array(bound, dtype=np.int64)
