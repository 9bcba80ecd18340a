"""`karpenter-like`: one region, every instance type there, spot first, consolidation.

- kube-scheduler binds pending pods to nodes that fit (ready ones, then nodes being launched,
  as Karpenter nominates pods to its in-flight NodeClaims).
- Provisioning: the rest are packed largest first onto new NodeClaims. A claim keeps every
  instance type that still fits all its pods; a pod joins the first claim that some type can
  still hold. Pods that tolerate spot go on spot claims, the others on on-demand ones. Each
  claim launches the cheapest type left (price-capacity-optimized reduced to price, as the
  simulator has no capacity pools); spot falls back to on-demand only where no spot type fits.
- Consolidation (WhenEmptyOrUnderutilized): nodes older than `consolidate_after` are
  candidates, the least used first. Empty: delete. Delete: all its pods fit on the other nodes.
  Replace: its pods fit one cheaper node (on-demand -> cheaper on-demand or spot; spot -> spot
  replacement is off, as Karpenter's SpotToSpotConsolidation gate is by default). At most
  `budget_pct` of the nodes are disrupted at once (Karpenter's default budget: 10 %).
Declared requests; latency SLOs are only counted.
"""

from __future__ import annotations

import math
import re

import numpy as np

from broker.core.pooltable import BoolArray, IntArray, PoolTable
from broker.kube_model import EPS
from broker.simulate.cluster import READY, STARTING, Cluster
from broker.simulate.fleet import FleetIn
from broker.simulate.market import ONDEMAND, SPOT, Market
from broker.simulate.policies.base import Requests, SimContext, StepView, plan_moves, schedule_pending

MAX_PODS = 110  # kubelet's default maxPods
# the getting-started NodePool: instance categories c, m, r of generation 3 and newer (AWS names)
DEFAULT_CATEGORIES = ("c", "m", "r")
_AWS_TYPE = re.compile(r"^([a-z]+?)(\d+)[a-z-]*\.")


def _node_pool_types(t: PoolTable, categories: list[str]) -> BoolArray:
    """Pools whose instance type the NodePool allows; only AWS names carry category and generation."""
    out = np.ones(t.n_pools, dtype=bool)
    for i, p in enumerate(t.pools):
        if not p.site.startswith("aws:"):
            continue
        m = _AWS_TYPE.match(p.instance_type)
        out[i] = bool(m) and m.group(1) in categories and int(m.group(2)) > 2 if m else False
    return out


class KarpenterLike:
    name = "karpenter-like"

    def __init__(self, fleet: FleetIn, market: Market) -> None:
        cfg = fleet.policies.karpenter_like
        site_id = cfg.site if cfg is not None else fleet.policies.kube_default.site
        loc = ["policies", "karpenter-like" if cfg is not None else "kube-default", "site"]
        self.site = market.site_id(site_id, loc)
        self.after_s = (cfg.consolidate_after_minutes if cfg is not None else 5.0) * 60.0
        self.budget_pct = cfg.budget_pct if cfg is not None else 10.0
        families = cfg.instance_categories if cfg is not None else list(DEFAULT_CATEGORIES)
        t = market.table
        here = t.site_idx == self.site
        self.req = Requests.declared(market)
        allowed = np.array([[c in w.capacity_types for c in ("ondemand", "spot")] for w in market.workloads])
        self.spot_ok = allowed[:, 1]
        caps = np.isin(t.cap_idx, [ONDEMAND, SPOT])
        self.pool_ok = (
            market.hardware_ok
            & (here & caps)[None, :]
            & market.residency_ok[:, [self.site]]
            & ((t.cap_idx == ONDEMAND)[None, :] | self.spot_ok[:, None])
        )
        self.types = np.flatnonzero(here & caps & ~t.dominated & _node_pool_types(t, families))
        self.market = market
        self.idle_pass: tuple[int, int, bytes] | None = None

    def start(self, ctx: SimContext) -> None:
        pass

    def decide(self, c: Cluster, view: StepView) -> None:
        left = schedule_pending(c, self.req, self.pool_ok)
        if len(left) and self.site not in c.down:
            self._provision(c, left)
        if self.site not in c.down:
            self._consolidate(c)

    # ---- provisioning --------------------------------------------------------------

    def _provision(self, c: Cluster, pending: IntArray) -> None:
        t = self.market.table
        w = c.rep_w[pending]
        size = self.req.cpu[w] / 4 + self.req.memory_gib[w] / 16  # largest first, cpu and memory alike
        order = np.argsort(-size, kind="stable")
        claims: list[tuple[bool, np.ndarray, list[int]]] = []  # (spot, types that still fit, pods)
        totals: list[np.ndarray] = []
        cap = np.vstack([t.vcpus, t.memory_gib, t.gpus])
        for r in pending[order].tolist():
            k = int(c.rep_w[r])
            need = self.req.of(k)
            spot = bool(self.spot_ok[k])
            placed = False
            # spot first: a pod that tolerates spot joins an on-demand claim only when no spot claim holds it
            tries = sorted(range(len(claims)), key=lambda i: not claims[i][0]) if spot else range(len(claims))
            for i in tries:
                is_spot, types, pods = claims[i]
                if (is_spot and not spot) or len(pods) >= MAX_PODS:
                    continue
                if spot and not is_spot and self._spot_fits(k, need):
                    continue
                total = totals[i] + need
                keep = types[(cap[:, types] >= total[:, None] - EPS).all(axis=0) & self.pool_ok[k, types]]
                if len(keep):
                    claims[i] = (is_spot, keep, [*pods, r])
                    totals[i] = total
                    placed = True
                    break
            if placed:
                continue
            for want_spot in [True, False] if spot else [False]:
                kind = SPOT if want_spot else ONDEMAND
                types = self.types[(t.cap_idx[self.types] == kind) & self.pool_ok[k, self.types]]
                types = types[(cap[:, types] >= need[:, None] - EPS).all(axis=0)]
                if len(types):
                    claims.append((want_spot, types, [r]))
                    totals.append(need.copy())
                    break
        for _, types, pods in claims:
            best = int(types[int(np.argmin(c.price[types]))])
            node = c.launch(best)
            for r in pods:
                c.bind(r, node)

    def _spot_fits(self, k: int, need: np.ndarray) -> bool:
        t = self.market.table
        types = self.types[(t.cap_idx[self.types] == SPOT) & self.pool_ok[k, self.types]]
        return bool(
            (np.vstack([t.vcpus[types], t.memory_gib[types], t.gpus[types]]) >= need[:, None] - EPS).all(axis=0).any()
        )

    # ---- consolidation -------------------------------------------------------------

    def _consolidate(self, c: Cluster) -> None:
        n = c.n_nodes
        live = c.nodes
        if len(live) == 0:
            return
        disrupting = int((c.node_drain[live]).sum())
        budget = max(1, math.floor(len(live) * self.budget_pct / 100.0)) - disrupting
        if budget <= 0 or (c.node_state[live] == STARTING).any():
            return  # Karpenter waits for launches to settle before it consolidates
        held = c.reserved(self.req.cpu, self.req.memory_gib, self.req.gpus)
        cpu, mem, _ = c.node_capacity()
        use = (held[0, live] / cpu[live] + held[1, live] / mem[live]) / 2
        old = (c.now_s - c.node_ready_s[live]) >= self.after_s
        cands = live[old & ~c.node_drain[live]]
        cands = cands[np.argsort(use[np.searchsorted(live, cands)], kind="stable")]
        # a pass over the same cluster, candidates and budget as the last one, which did nothing,
        # does nothing again: skipped (on a quiet fleet most steps are such passes)
        key = (c.version, budget, cands.tobytes())
        if key == self.idle_pass:
            return
        ready = (c.node_state[:n] == READY) & ~c.node_drain[:n]
        for node in cands.tolist():
            if budget <= 0:
                break
            reps = c.replicas_on(node)
            if len(reps) == 0:
                c.drain(node)
                budget -= 1
                continue
            others = ready.copy()
            others[node] = False
            targets = plan_moves(c, reps, self.req, others, self.pool_ok)
            if targets is not None:
                for r, target in zip(reps.tolist(), targets, strict=True):
                    c.move(int(r), target)
                c.drain(node)
                ready[node] = False
                budget -= 1
                continue
            if self._replace(c, node, reps):
                ready[node] = False
                budget -= 1
        if c.version == key[0]:
            self.idle_pass = key

    def _replace(self, c: Cluster, node: int, reps: IntArray) -> bool:
        t = self.market.table
        pool = int(c.node_pool[node])
        if t.cap_idx[pool] == SPOT:
            return False
        w = c.rep_w[reps]
        total = np.array([self.req.cpu[w].sum(), self.req.memory_gib[w].sum(), self.req.gpus[w].sum()])
        ok = np.all(self.pool_ok[w][:, self.types], axis=0)
        types = self.types[ok]
        cap = np.vstack([t.vcpus[types], t.memory_gib[types], t.gpus[types]])
        types = types[(cap >= total[:, None] - EPS).all(axis=0) & (c.price[types] < c.price[pool] - EPS)]
        if len(types) == 0:
            return False
        best = int(types[int(np.argmin(c.price[types]))])
        new = c.launch(best)
        for r in reps.tolist():
            c.move(int(r), new)
        c.drain(node)
        return True
