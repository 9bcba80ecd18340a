"""A start from each class's cheapest share of a node.

The baselines' starts place workloads as a scheduler would (the Kubernetes-style packer: its
home cloud's nodes, least allocated first; the per-workload cheapest fit: whole nodes of its
own). On big requests, where column generation has time for a round or two and RENS can miss,
the search's answer is mostly its best start improved by small neighbourhoods, so a start built
the way the model prices compute is worth its fraction of a second: every class on the candidate
where a replica costs least at a fully used node (its share of the node's cost plus its storage
and latency costs there), spot within its cap, so classes of the same shape meet on the same
pools and fill their nodes. Spread classes (whose sites must differ) keep the base placement,
and no class is moved onto an owned pool (bounded node counts), so the start keeps every rule
the base keeps.
"""

from __future__ import annotations

import numpy as np

from broker.core.pooltable import FloatArray
from broker.solver.model.layout import ModelInput
from broker.solver.prepare.classes import SPOT
from broker.solver.search.placements import class_nodes, columns_of, feasible, objective
from broker.solver.search.state import SearchState
from broker.solver.types import ClassPlacement


def share_start(mi: ModelInput, base: ClassPlacement) -> ClassPlacement | None:
    """`base` with every class that needs one site only moved to its cheapest candidates by
    their share of a fully used node; None when that is not feasible (a cap on moves, or a class
    with no such candidate off spot for the replicas its cap keeps off it)."""
    if mi.max_moves is not None:  # moving every class would break the cap on moves
        return None
    owned = np.isfinite(mi.max_nodes)
    x: ClassPlacement = {}
    groups: dict[tuple[int, tuple[float, ...]], FloatArray] = {}
    for c, cl in enumerate(mi.classes):
        if cl.min_sites > 1:
            x.update({(cc, p): r for (cc, p), r in base.items() if cc == c})
            continue
        key = (id(cl.cand), tuple(cl.demand.tolist()))
        if key not in groups:  # classes of one shape and candidate set share their nodes' shares
            groups[key] = np.where(owned[cl.cand], np.inf, mi.node_share(cl.cand, cl.demand))
        share = groups[key] + cl.rep_cost
        spot = mi.cap_idx[cl.cand] == SPOT
        off = np.where(spot, np.inf, share)
        on = np.where(spot, share, np.inf)
        i_off, i_on = int(np.argmin(off)), int(np.argmin(on))
        n_spot = cl.replicas if cl.spot_cap is None else min(cl.spot_cap, cl.replicas)
        if n_spot > 0 and np.isfinite(on[i_on]) and on[i_on] < off[i_off]:
            x[(c, int(cl.cand[i_on]))] = n_spot
            rest = cl.replicas - n_spot
        else:
            rest = cl.replicas
        if rest:
            if not np.isfinite(off[i_off]):
                return None
            x[(c, int(cl.cand[i_off]))] = rest
    return x if feasible(mi, x, class_nodes(mi, x)) else None


def with_share_start(st: SearchState, starts: list[ClassPlacement]) -> list[ClassPlacement]:
    """`starts` and, when feasible and cheaper than each of them, the share start built on the
    cheapest feasible one (its columns join the master)."""
    mi, lay = st.mi, st.lay
    ok = [(objective(mi, lay, x0), i) for i, x0 in enumerate(starts) if feasible(mi, x0, class_nodes(mi, x0))]
    if not ok:
        return starts
    value, i = min(ok)
    x = share_start(mi, starts[i])
    if x is None or objective(mi, lay, x) >= value - 1e-9:
        return starts
    st.m.add_columns(columns_of(x, st.uni.cols))
    return [*starts, x]
