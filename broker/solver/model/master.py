"""The restricted master: one HiGHS model that grows by pools and replica columns.

Column generation adds a few pools and columns per round. Rebuilding the model every round
made each LP a cold start; appending columns and rows to one model keeps the simplex basis, so
a round re-solves from where the last one stopped.

Layout (same rows and columns as layout.py describes, appended as they come):
fixed rows first (demand, spot, spread, node, egress, near-egress, Y, keep,
moves), then per pool its capacity and large-replica rows, and the replica columns' fit rows as
they join (when an LP breaks them, all of them for a MIP); z, e,
keep, near-egress and Y columns first, then pools and replica columns in the
order they were added.
"""

from __future__ import annotations

import math
import threading

import highspy
import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver.model.columns import ranges
from broker.solver.model.cut_rows import CutRows
from broker.solver.model.layout import INF, Layout, ModelInput, egress_values
from broker.solver.model.mip import LPResult, MIPResult, MipRunner, Outcome, model_of, outcome_of
from broker.solver.model.quiet_highs import QuietHighs
from broker.solver.model.universe import Universe
from broker.solver.types import DualPrices

Placement = dict[tuple[int, int], int]  # (class index, pool index) -> replicas
NO_NODE_LIMIT = 2**31 - 1  # HiGHS' mip_max_nodes default (kHighsIInf)


class Master:
    def __init__(
        self,
        mi: ModelInput,
        lay: Layout,
        universe: Universe,
        *,
        loose_fit: bool = False,
        relaxed: bool = False,
        eager_fit: bool = False,
    ) -> None:
        """`relaxed`: without fit rows, site rows and egress rows, the LP whose duals price the
        node-share bound (bounds/relaxed_lp.py). `eager_fit`: every column's fit row joins with
        it, not when an LP breaks it (small models: one LP run a round instead of several)."""
        self.mi, self.lay, self.uni, self.u = mi, lay, universe, universe.cols
        self.h = QuietHighs()
        self.h.setOptionValue("solver", "simplex")
        self.demand, self.replicas = mi.class_demand, mi.class_replicas
        self.pool_col = np.full(mi.n_pools, -1, dtype=np.int64)  # HiGHS column of n_p, -1 = absent
        self.cap_row = np.full((mi.n_pools, 3), -1, dtype=np.int64)  # capacity row per resource
        # large-replica row per (resource, k) (layout.py; -1: none)
        self.large_row = np.full((mi.n_pools, mi.large_kinds), -1, dtype=np.int64)
        self.cuts = CutRows(len(mi.classes))  # pattern cuts (patterns.py), added by add_pattern_cut
        self.x_uni = np.zeros(0, dtype=np.int64)  # universe index of each replica column, in order
        self.x_col = np.zeros(0, dtype=np.int64)  # its HiGHS column
        # its fit row x <= fit n_p (-1: none) and that fit; loose_fit: not capped at the class's
        # replicas until tighten()
        self.fit_row = np.zeros(0, dtype=np.int64)
        self.x_fit = np.zeros(0, dtype=np.float32)
        self.x_stronger = np.zeros(0, dtype=bool)  # whether its fit row is stronger than capacity
        self.loose_fit = loose_fit
        self.relaxed = relaxed
        self.eager_fit = eager_fit
        self.in_model = np.zeros(universe.size, dtype=bool)
        self.integer = False
        self.n_rows = lay.n_fixed_rows
        self.n_cols = 0
        row_lo, row_hi = lay.row_lo, lay.row_hi
        if relaxed:
            free = np.r_[lay.node_row0 : lay.node_row0 + lay.n_z, lay.e_row0 : lay.e_row0 + lay.n_e]
            row_lo, row_hi = row_lo.copy(), row_hi.copy()
            row_lo[free], row_hi[free] = -INF, INF
        self.h.addRows(lay.n_fixed_rows, row_lo, row_hi, 0, np.zeros(1, np.int32), np.zeros(0, np.int32), [])
        self._add_fixed_columns()
        # a tenant's family quotas: sum over the group's pools of a node's vCPUs x n_p <= quota
        nq = len(mi.quota_vcpus)
        none = np.zeros(0, dtype=np.int64)
        self.quota_row = self._add_rows(np.full(nq, -INF), mi.quota_vcpus, none, np.zeros(0), 0)

    # -- growing ------------------------------------------------------------------------

    def _add_fixed_columns(self) -> None:
        """z (spread slots), e (egress fractions) and keep columns with their fixed-row entries."""
        mi, lay = self.mi, self.lay
        nz, ne, nk = lay.n_z, lay.n_e, len(lay.keep_key)
        zc = np.arange(nz)
        z_rows = lay.n_classes + int((lay.spot_row >= 0).sum()) + zc
        z_size = np.array([float(mi.classes[int(c)].size) for c in lay.z_class])
        kc = nz + ne + np.arange(nk)
        moves = lay.moves_row >= 0
        vals = np.concatenate(
            [np.ones(nz), -np.ones(nz), -1.0 / z_size, np.ones(ne), np.ones(nk), -np.ones(nk if moves else 0)]
        )
        rows = np.concatenate(
            [
                z_rows,
                lay.spread_total_row[lay.z_class],
                lay.node_row0 + zc,
                lay.e_row0 + np.arange(ne),
                lay.keep_row0 + np.arange(nk),
                np.full(nk if moves else 0, lay.moves_row),
            ]
        ).astype(np.int64)
        cols = np.concatenate([zc, zc, zc, nz + np.arange(ne), kc, kc if moves else kc[:0]]).astype(np.int64)
        cost = np.concatenate([np.zeros(nz), lay.e_cost, np.full(nk, -mi.move_cost)])
        upper = np.concatenate([z_size, np.full(ne, INF), mi.keep_cur])
        self._add_cols(cost, np.zeros(len(cost)), upper, cols, rows, vals)
        self.h.changeObjectiveOffset(mi.move_cost * mi.current_total)  # moved = current - kept
        self.z_off, self.e_off, self.k_off = 0, nz, nz + ne
        # near-egress columns a (in their egress row and in a - Y + x_v(s) <= 0) and Y columns
        # (Y - sum x_v = 0, and -1 in the near rows they gate)
        na, ny = lay.n_near, lay.n_y
        self.a_off, self.y_off = nz + ne + nk, nz + ne + nk + na
        if na:
            ai, yi = np.arange(na), np.arange(ny)
            self._add_cols(
                np.concatenate([lay.near_cost, np.zeros(ny)]),
                np.zeros(na + ny),
                np.concatenate([np.full(na, INF), self.replicas[lay.y_class]]),
                np.concatenate([ai, ai, na + lay.near_y, na + yi]),
                np.concatenate([lay.e_row0 + lay.near_e, lay.near_row0 + ai, lay.near_row0 + ai, lay.y_row0 + yi]),
                np.concatenate([np.ones(na), np.ones(na), -np.ones(na), np.ones(ny)]),
            )

    def _add_cols(
        self, cost: FloatArray, lo: FloatArray, hi: FloatArray, col: IntArray, row: IntArray, val: FloatArray
    ) -> IntArray:
        """Columns with entries (col, row, val), col counted from 0 for the first new column."""
        n = len(cost)
        first = self.n_cols
        if n:
            order = np.argsort(col, kind="stable")
            starts = np.searchsorted(col[order], np.arange(n))
            self.h.addCols(
                n,
                cost.astype(np.float64),
                lo.astype(np.float64),
                hi.astype(np.float64),
                len(order),
                starts.astype(np.int32),
                row[order].astype(np.int32),
                val[order].astype(np.float64),
            )
            self.n_cols += n
        return np.arange(first, first + n, dtype=np.int64)

    def _add_rows(self, lo: FloatArray, hi: FloatArray, cols: IntArray, vals: FloatArray, per_row: int) -> IntArray:
        """Rows with `per_row` entries each (cols/vals laid out row after row)."""
        n = len(lo)
        first = self.n_rows
        if n:
            self.h.addRows(
                n,
                lo.astype(np.float64),
                hi.astype(np.float64),
                n * per_row,
                (np.arange(n) * per_row).astype(np.int32),
                cols.astype(np.int32),
                vals.astype(np.float64),
            )
            self.n_rows += n
        return np.arange(first, first + n, dtype=np.int64)

    def add_pools(self, pools: IntArray) -> None:
        mi = self.mi
        pools = np.unique(pools)
        pools = pools[self.pool_col[pools] < 0]
        if len(pools) == 0:
            return
        hi = np.where(np.isinf(mi.max_nodes[pools]), INF, mi.max_nodes[pools])
        # a node of p counts towards the distinct-site rows of every spread class that may use p,
        # whether or not that class's column on p is in the model yet: as in the full model
        # (one entry per spread (class, pool) column: a class has one column per pool)
        none = np.zeros(0, dtype=np.int64)
        rows, cols = none, none
        if (self.u.g_zpos >= 0).any():
            local = np.full(mi.n_pools, -1, dtype=np.int64)
            local[pools] = np.arange(len(pools))
            sel = self.uni.columns_on(pools)
            zpos = self.u.zpos(sel)
            spread = zpos >= 0
            rows, cols = self.lay.node_row0 + zpos[spread], local[self.u.pool[sel[spread]]]
        vals = np.ones(len(rows))
        if len(self.quota_row):  # their quota group's row
            group = mi.quota_of_pool[pools]
            on = np.flatnonzero(group >= 0)
            rows = np.r_[rows, self.quota_row[group[on]]]
            cols = np.r_[cols, on]
            vals = np.r_[vals, mi.quota_node_vcpus[pools[on]]]
        cols = self._add_cols(mi.node_cost[pools], np.zeros(len(pools)), hi, cols, rows, vals)
        self.pool_col[pools] = cols
        if self.integer:
            self._integral(cols)
        caps = (mi.vcpus, mi.mem, mi.gpus)
        gpu_needed = bool((self.demand[:, 2] > 0).any()) if len(self.demand) else False
        for r in range(3):
            on = pools if r < 2 else pools[(mi.gpus[pools] > 0) & gpu_needed]
            if len(on) == 0:
                continue
            rows = self._add_rows(
                np.full(len(on), -INF), np.zeros(len(on)), self.pool_col[on], -caps[r][on].astype(np.float64), 1
            )
            self.cap_row[on, r] = rows
        if self.relaxed:
            return
        need = mi.large_rows_needed(pools)
        for j in range(mi.large_kinds):
            on = pools[need[:, j]]
            n = len(on)
            if n:
                self.large_row[on, j] = self._add_rows(np.full(n, -INF), np.zeros(n), self.pool_col[on], -np.ones(n), 1)

    def add_columns(self, sel: IntArray, *, with_fit_rows: bool = False) -> None:
        """Universe columns `sel` (and the pools they need); with_fit_rows: their fit rows at once
        (the start's columns, most of which the first LP uses: re-solving after each batch of
        broken rows took longer there than the rows themselves), else when an LP breaks them."""
        sel = np.unique(sel)
        sel = sel[~self.in_model[sel]]
        if len(sel) == 0:
            return
        u = self.u
        self.add_pools(u.pool[sel])
        pool = u.pool[sel]
        # the columns' entries in the fixed rows, straight from the universe's CSC arrays
        f = u.g_fixed
        grp = u.group[sel]
        begin, count = f.indptr[grp], np.diff(f.indptr)[grp]
        pos = ranges(begin, count)
        rows, cols, vals = [f.indices[pos]], [np.repeat(np.arange(len(sel)), count)], [f.data[pos]]
        cls = u.cls(sel)
        d = self.demand[cls]
        for r in range(3):
            use = np.flatnonzero(d[:, r] > 0)
            rows.append(self.cap_row[pool[use], r])
            cols.append(use)
            vals.append(d[use, r])
        large = self.mi.large_weights(cls, pool)
        for j in range(self.mi.large_kinds):
            use = np.flatnonzero((large[:, j] > 0) & (self.large_row[pool, j] >= 0))
            rows.append(self.large_row[pool[use], j])
            cols.append(use)
            vals.append(large[use, j])
        at, cut_row, cut_coef = self.cuts.matching(cls, pool)
        rows.append(cut_row)
        cols.append(at)
        vals.append(cut_coef)
        xcols = self._add_cols(
            u.g_cost[grp],
            np.zeros(len(sel)),
            self.replicas[cls],
            np.concatenate(cols).astype(np.int64),
            np.concatenate(rows).astype(np.int64),
            np.concatenate(vals),
        )
        if self.integer:
            self._integral(xcols)
        self.in_model[sel] = True
        self.x_uni = np.concatenate([self.x_uni, sel])
        self.x_col = np.concatenate([self.x_col, xcols])
        fit, stronger = self.mi.fit(cls, pool, capped=not self.loose_fit)
        if self.relaxed:
            stronger = np.zeros(len(sel), dtype=bool)
        fit_row = np.full(len(sel), -1, dtype=np.int64)
        if self.integer or with_fit_rows or self.eager_fit:  # a MIP needs every row
            fit_row[stronger] = self._fit_rows(xcols[stronger], pool[stronger], fit[stronger].astype(np.float64))
        self.fit_row = np.concatenate([self.fit_row, fit_row])
        self.x_fit = np.concatenate([self.x_fit, fit])
        self.x_stronger = np.concatenate([self.x_stronger, stronger])

    def _fit_rows(self, xcols: IntArray, pool: IntArray, fit: FloatArray) -> IntArray:
        """A replica runs on one node: x_cp <= fit_cp * n_p."""
        both = np.stack([xcols, self.pool_col[pool]], axis=1).ravel()
        coef = np.stack([np.ones(len(xcols)), -fit], axis=1).ravel()
        return self._add_rows(np.full(len(xcols), -INF), np.zeros(len(xcols)), both, coef, 2)

    def add_pattern_cut(self, pool: int, cls: IntArray, pi: FloatArray) -> None:
        """The cut sum_c pi_c x_c,pool <= n_pool (patterns.py: pi is dual feasible for the
        pool's patterns), over the classes with pi_c > 0."""
        keep = pi > 1e-12
        cls, pi = cls[keep].astype(np.int64), pi[keep]
        mc, mp = self.x_keys()
        on = np.flatnonzero(mp == pool)
        coef = dict(zip(cls.tolist(), pi.tolist(), strict=True))
        sel = [int(i) for i in on if int(mc[i]) in coef]
        cols = np.r_[self.x_col[sel], self.pool_col[pool]]
        vals = np.r_[[coef[int(mc[i])] for i in sel], -1.0]
        row = self._add_rows(np.array([-INF]), np.zeros(1), cols, vals, len(cols))
        self.cuts.add(int(row[0]), pool, cls, pi)

    def tighten(self) -> None:
        """Cap the fit rows at each class's replicas (a used pool runs at least one node): rows
        change their coefficient, columns without a row gain one; later columns come capped."""
        if not self.loose_fit:
            return
        self.loose_fit = False
        cls, pool = self.x_keys()
        fit, stronger = self.mi.fit(cls, pool)
        has = self.fit_row >= 0
        change = np.flatnonzero(has & (fit < self.x_fit))
        for i in change:
            self.h.changeCoeff(int(self.fit_row[i]), int(self.pool_col[pool[i]]), -float(fit[i]))
        self.x_fit, self.x_stronger = fit, stronger

    def _add_fit_rows(self, which: IntArray) -> None:
        """The fit rows of replica columns `which` (positions in model order) that lack one."""
        which = which[(self.fit_row[which] < 0) & self.x_stronger[which]]
        if len(which):
            pool = self.u.pool[self.x_uni[which]]
            self.fit_row[which] = self._fit_rows(self.x_col[which], pool, self.x_fit[which].astype(np.float64))

    def _broken_fit_rows(self, col: FloatArray) -> IntArray:
        """Replica columns whose (not yet added) fit row the LP solution `col` breaks."""
        lazy = np.flatnonzero((self.fit_row < 0) & self.x_stronger)
        if len(lazy) == 0:
            return lazy
        nodes = col[self.pool_col[self.u.pool[self.x_uni[lazy]]]]
        x = col[self.x_col[lazy]]
        broken: IntArray = lazy[x > self.x_fit[lazy] * nodes + 1e-7 * np.maximum(1.0, x)]
        return broken

    def hold(self, free: BoolArray, x: Placement) -> None:
        """Every replica column of a class not `free` keeps its value in x."""
        cls, pool = self.x_keys()
        held = np.flatnonzero(~free[cls])
        val = np.array([float(x.get((int(cls[i]), int(pool[i])), 0)) for i in held])
        self.h.changeColsBounds(len(held), self.x_col[held].astype(np.int32), val, val)

    def _integral(self, cols: IntArray) -> None:
        kinds = np.full(len(cols), int(highspy.HighsVarType.kInteger.value), dtype=np.uint8)
        self.h.changeColsIntegrality(len(cols), cols.astype(np.int32), kinds)

    # -- reading ------------------------------------------------------------------------

    @property
    def pools(self) -> IntArray:
        return np.flatnonzero(self.pool_col >= 0)

    def dual_prices(self, row_dual: FloatArray) -> DualPrices:
        """What the LP's duals of the capacity rows charge per unit on its pools (rows of a <=
        kind: their duals are <= 0, the prices their negatives)."""
        pools = self.pools
        rows = self.cap_row[pools]
        return DualPrices.of(self.mi, pools, np.where(rows >= 0, -row_dual[np.maximum(rows, 0)], 0.0))

    def large_dual_terms(self, row_dual: FloatArray, cls: IntArray, pool: IntArray) -> FloatArray:
        """Per pair (cls[i], pool[i]): what the large-replica rows' and the pattern cuts' duals
        put in a replica column's A^T y."""
        out = self.cuts.dual_terms(row_dual, cls, pool)
        rows = self.large_row[pool]
        on = np.flatnonzero((rows >= 0).any(axis=1))
        if len(on):
            w = self.mi.large_weights(cls[on], pool[on])
            r = rows[on]
            out[on] += (np.where(r >= 0, w * row_dual[np.maximum(r, 0)], 0.0)).sum(axis=1)
        return out

    def x_keys(self) -> tuple[IntArray, IntArray]:
        """(class, pool) of each replica column, in model order."""
        return self.u.cls(self.x_uni), self.u.pool[self.x_uni]

    def solve_lp(self, time_limit_s: float = math.inf) -> LPResult | None:
        """The LP from the last basis; None when it is not solved to optimality (e.g. in time)."""
        # an LP's time limit counts HiGHS' run time over every run() of this model (a later
        # round would stop at once), so it is set past what earlier rounds took
        limit = self.h.getRunTime() + max(0.05, time_limit_s)
        self.h.setOptionValue("time_limit", limit if math.isfinite(limit) else INF)
        # fit rows join when the solution breaks them: most columns stay at zero, where their
        # fit row is slack, and a row per column made every LP about twice as big
        while True:
            self.h.run()
            if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                return None
            sol = self.h.getSolution()
            col = np.asarray(sol.col_value)
            broken = self._broken_fit_rows(col)
            if len(broken) == 0:
                break
            self._add_fit_rows(broken)
        return LPResult(
            value=float(self.h.getInfo().objective_function_value),
            row_dual=np.asarray(sol.row_dual),
            x=col[self.x_col],
            nodes=np.where(self.pool_col >= 0, col[np.maximum(self.pool_col, 0)], 0.0),
        )

    def make_integer(self) -> None:
        if not self.integer:
            self.integer = True
            self._add_fit_rows(np.arange(len(self.x_col)))
            self._integral(np.concatenate([self.pool_col[self.pools], self.x_col]))

    def solve_mip(
        self,
        *,
        time_limit_s: float,
        seed: int,
        hint: FloatArray | None,
        rel_gap: float,
        runner: MipRunner | None = None,
        max_nodes: int | None = None,
    ) -> MIPResult:
        """The MIP over the model's columns, in this process, or through `runner` (mip.py) for
        MIPs big enough that HiGHS' cut separation can overrun the limit; with `max_nodes`, it
        also ends after that many branch-and-bound nodes (a limit on work, not on time)."""
        self.make_integer()
        options = {"mip_rel_gap": rel_gap, "random_seed": int(seed), "mip_max_nodes": max_nodes or NO_NODE_LIMIT}
        if runner is None:
            out = self._solve_here(time_limit_s, hint, options)
        else:
            out = runner.solve(model_of(self.h), time_limit_s=max(0.05, time_limit_s), options=options, hint=hint)
        x = np.round(out.x[self.x_col]) if len(out.x) else np.zeros(0)
        return MIPResult(out.status, out.value, out.bound, x)

    def _solve_here(self, time_limit_s: float, hint: FloatArray | None, options: dict[str, float | int]) -> Outcome:
        h = self.h
        h.setOptionValue("time_limit", max(0.05, time_limit_s))
        for name, value in options.items():
            h.setOptionValue(name, value)
        if hint is not None:
            h.setSolution(self.n_cols, np.arange(self.n_cols, dtype=np.int32), hint)
        # HiGHS can run far past its time limit in stages that do not read the clock but do poll
        # the user-interrupt callback: a watchdog cancels the solve at the limit, keeping the
        # best solution found (stages that poll neither need a MipRunner)
        h.HandleUserInterrupt = True
        watchdog = threading.Timer(max(0.05, time_limit_s), h.cancelSolve)
        watchdog.start()
        try:
            h.run()
        finally:
            watchdog.cancel()
        return outcome_of(h)

    def placement(self, xv: FloatArray) -> Placement:
        cls, pool = self.x_keys()
        return {(int(cls[i]), int(pool[i])): int(xv[i]) for i in np.flatnonzero(xv > 0.5)}

    def hint(self, x: Placement, nodes: dict[int, int]) -> FloatArray | None:
        """A full column vector for placement x running `nodes` (None when x uses a column
        not in the model)."""
        mi, lay = self.mi, self.lay
        cls, pool = self.x_keys()
        col_of = {(int(c), int(p)): int(j) for c, p, j in zip(cls, pool, self.x_col, strict=True)}
        if any(k not in col_of for k in x) or any(self.pool_col[p] < 0 for p in nodes):
            return None
        col = np.zeros(self.n_cols)
        for p, n in nodes.items():
            col[self.pool_col[p]] = n
        at_site: dict[tuple[int, int], int] = {}
        for (c, p), r in x.items():
            col[col_of[(c, p)]] = r
            s = int(mi.site_idx[p])
            at_site[(c, s)] = at_site.get((c, s), 0) + r
        for i in range(lay.n_z):
            c, s = int(lay.z_class[i]), int(lay.z_site[i])
            col[self.z_off + i] = min(at_site.get((c, s), 0), mi.classes[c].size)
        eg = egress_values(mi, lay, x)
        col[self.e_off : self.e_off + lay.n_e] = eg.far
        col[self.a_off : self.a_off + lay.n_near] = eg.near
        col[self.y_off : self.y_off + lay.n_y] = eg.y
        for i, (c, p, cur) in enumerate(zip(mi.keep_class, mi.keep_pool, mi.keep_cur, strict=True)):
            col[self.k_off + i] = min(float(x.get((int(c), int(p)), 0)), float(cur))
        return col
