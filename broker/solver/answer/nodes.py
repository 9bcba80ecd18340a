"""The packed placement as the answer states it: node assignments, the packing report, warnings."""

from __future__ import annotations

from collections.abc import Sequence

from broker.core.domain import NodeAssignment, NodeReplicas, PackingReport
from broker.core.pooltable import PoolTable
from broker.solver.answer.packing import NodeRows, PackingStats
from broker.solver.prepare.classes import WorkloadData


def node_assignments(
    t: PoolTable, workloads: Sequence[WorkloadData], nodes: dict[int, NodeRows]
) -> tuple[NodeAssignment, ...]:
    """Per pool (in pool-id order, as the answer's `nodes`) its nodes in order, each with the
    replicas it runs by workload name."""
    out: list[NodeAssignment] = []
    for p in sorted(nodes, key=lambda q: t.pools[q].id):
        for b, node in enumerate(nodes[p]):
            reps = tuple(
                NodeReplicas(
                    workload=workloads[k].w.name,
                    replicas=n,
                    cpu=workloads[k].w.cpu,
                    memory_gib=workloads[k].w.memory_gib,
                    gpus=workloads[k].w.gpus,
                )
                for k, n in sorted(node, key=lambda kn: workloads[kn[0]].w.name)
            )
            out.append(NodeAssignment(pool=t.pools[p].id, node=b, replicas=reps))
    return tuple(out)


def packing_report(
    stats: PackingStats, *, aggregate_nodes: int, aggregate_cost: float, aggregate_gap: float
) -> PackingReport:
    return PackingReport(
        aggregate_nodes=aggregate_nodes,
        nodes=stats.nodes,
        aggregate_cost_per_hour=round(aggregate_cost, 6),
        aggregate_gap_pct=round(aggregate_gap, 3),
        moved_replicas=stats.moved,
        pools=stats.pools,
        pools_proven=stats.proven,
        pools_cp_sat=stats.cp_sat_pools,
        pools_cp_sat_better=stats.cp_sat_better,
        ffd_nodes=stats.ffd_nodes,
        packing_ms=int(stats.seconds * 1000),
        nodes_consolidated=stats.consolidated,
    )


def packing_warnings(stats: PackingStats, aggregate_cost: float, cost: float) -> list[str]:
    """What exact packing changed, where the user looks."""
    out: list[str] = []
    if cost > aggregate_cost + 1e-9:
        out.append(
            f"exact packing: the replicas need more nodes than the aggregate capacity rule counts "
            f"(+{cost - aggregate_cost:.4f} USD/h)"
        )
    if stats.moved:
        out.append(f"exact packing: {stats.moved} replicas moved off owned pools whose nodes could not hold them")
    if stats.unmoved:
        out.append(
            f"exact packing: {stats.unmoved} replicas do not fit the owned nodes of their pool and no other "
            "allowed pool could take them"
        )
    return out
