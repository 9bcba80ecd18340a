"""The capacity-row multipliers the Lagrangian bound tries on every pool (lagrangian.py): the
restricted LP's own duals where it has them, and a few resource directions everywhere. Any
choice gives a valid bound (docs/solver-proof.md); the bound keeps, per pool, the one that drags
its columns least below their class's LP price."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray

# fixed resource directions tried on every pool: cpu, memory, half-half, gpu
DIRECTIONS = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
CANDIDATES = ("lp", "lp-scaled", "site-avg", "global-avg", "cpu", "memory", "half", "gpu")


@dataclass
class Multipliers:
    mu: FloatArray  # [pools, 3] >= 0, multipliers of the capacity rows
    phi_scale: FloatArray  # [pools] multiplier of the LP's fit-row duals
    valid: BoolArray  # [pools]


def candidates(
    site: IntArray,
    n_sites: int,
    inpool: BoolArray,
    cap: FloatArray,
    eff: FloatArray,
    mu_lp: FloatArray,
    fitphi: FloatArray,
) -> list[Multipliers]:
    """Capacity-row multipliers per pool, one set per name in CANDIDATES."""
    n_p = len(site)
    zeros = np.zeros(n_p)
    pos = np.maximum(eff, 0.0)
    out = [Multipliers(mu_lp, np.ones(n_p), inpool)]
    load = (cap * mu_lp).sum(axis=1) + fitphi
    scale = np.where(load > 0, pos / np.where(load > 0, load, 1.0), 0.0)
    out.append(Multipliers(mu_lp * scale[:, None], scale, inpool))
    # the LP's resource directions, normalised, averaged over in-model pools
    w_lp = cap * mu_lp
    s = w_lp.sum(axis=1)
    good = inpool & (s > 0) & (eff > 0)
    w_lp = np.where(good[:, None], w_lp / np.where(s > 0, s, 1.0)[:, None], 0.0)
    glob = w_lp[good].mean(axis=0) if good.any() else np.array([0.5, 0.5, 0.0])
    per_site = np.zeros((n_sites, 3))
    for r in range(3):
        per_site[:, r] = np.bincount(site[good], weights=w_lp[good, r], minlength=n_sites)
    cnt = np.bincount(site[good], minlength=n_sites)
    site_w = np.where(cnt[:, None] > 0, per_site / np.maximum(cnt, 1)[:, None], glob)
    out.append(_direction(site_w[site], cap, pos))
    out.append(_direction(np.broadcast_to(glob, (n_p, 3)), cap, pos))
    for w in DIRECTIONS:
        out.append(_direction(np.broadcast_to(w, (n_p, 3)), cap, pos))
    for c in out[2:]:
        c.phi_scale = zeros
    return out


def _direction(w: FloatArray, cap: FloatArray, pos_eff: FloatArray) -> Multipliers:
    """mu = eff * w / cap with w renormalised over the resources the pool has (sum 1)."""
    w = np.where(cap > 0, w, 0.0)
    s = w.sum(axis=1)
    w = w / np.where(s > 0, s, 1.0)[:, None]
    mu = np.where(cap > 0, pos_eff[:, None] * w / np.where(cap > 0, cap, 1.0), 0.0)
    return Multipliers(mu, np.zeros(len(s)), s > 0)
