"""Held-out accuracy of the latency model, in both settings (p50 typical, p95 conservative).

Two schemes, both over the measured pairs (docs/latency.md reports their figures):

- **k-fold over pairs** (default 5 folds): the model is built on 80 % of the measured pairs
  and estimates the other 20 % as site-to-site pairs; every pair is held out once.
- **leave one region out**: every measurement of one site is removed and the model
  estimates that site's pairs from the rest. This is what an end user's point or an
  unmeasured site looks like: nothing measured at that end.

An estimate in a setting is compared with the measured value of the same statistic.

Pure: no I/O.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from broker.core.domain import Site
from broker.core.latency import QUANTILES, LatencyModel, Quantile, combine_measurements

Pair = tuple[str, str]

#: The accuracy targets of docs/latency.md: (metric, setting, bound, "max").
TARGETS: tuple[tuple[str, Quantile, float], ...] = (
    ("median_ape_pct", "p50", 15.0),
    ("overestimated_50_pct", "p50", 5.0),
    ("underestimated_pct", "p95", 10.0),
)


@dataclass(frozen=True, slots=True)
class Scores:
    """Errors of estimates against held-out measurements (percent of the measured value)."""

    n: int
    median_ape_pct: float  # median |estimate - measured| / measured
    median_error_pct: float  # median (estimate - measured) / measured; > 0 = pessimistic
    underestimated_pct: float  # share with estimate < measured
    overestimated_50_pct: float  # share with estimate > 1.5 x measured
    by_method: Mapping[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "median_ape_pct": self.median_ape_pct,
            "median_error_pct": self.median_error_pct,
            "underestimated_pct": self.underestimated_pct,
            "overestimated_50_pct": self.overestimated_50_pct,
            "by_method": dict(self.by_method),
        }


def score(estimates: Sequence[float], measured: Sequence[float], methods: Iterable[str] = ()) -> Scores:
    """Scores of estimates against measured values (pairs with a measured value <= 0 are skipped)."""
    est = np.asarray(estimates, dtype=np.float64)
    meas = np.asarray(measured, dtype=np.float64)
    keep = meas > 0
    rel = (est[keep] - meas[keep]) / meas[keep]
    if len(rel) == 0:
        raise ValueError("no measured pairs to score")
    return Scores(
        n=len(rel),
        median_ape_pct=float(np.median(np.abs(rel)) * 100),
        median_error_pct=float(np.median(rel) * 100),
        underestimated_pct=float((rel < 0).mean() * 100),
        overestimated_50_pct=float((rel > 0.5).mean() * 100),
        by_method=dict(sorted(Counter(methods).items())),
    )


@dataclass(frozen=True, slots=True)
class Evaluation:
    scheme: str
    scores: Mapping[Quantile, Scores]

    def as_dict(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "scores": {q: s.as_dict() for q, s in self.scores.items()}}


ModelFactory = Callable[[Mapping[str, Site], list[tuple[str, str, float, float]]], LatencyModel]


def _default_factory(sites: Mapping[str, Site], rows: list[tuple[str, str, float, float]]) -> LatencyModel:
    return LatencyModel(sites, rows)


def _rows(pairs: Mapping[Pair, tuple[float, float]], keep: Iterable[Pair]) -> list[tuple[str, str, float, float]]:
    return [(a, b, *pairs[(a, b)]) for a, b in keep]


def _scored(
    sites: Mapping[str, Site],
    pairs: Mapping[Pair, tuple[float, float]],
    rounds: Iterable[tuple[list[Pair], list[tuple[Pair, str]]]],
    factory: ModelFactory,
    scheme: str,
) -> Evaluation:
    """Each round: (training pairs, [(held-out pair, the end to estimate towards)])."""
    est: dict[Quantile, list[float]] = {q: [] for q in QUANTILES}
    meas: dict[Quantile, list[float]] = {q: [] for q in QUANTILES}
    methods: dict[Quantile, list[str]] = {q: [] for q in QUANTILES}
    for train, tests in rounds:
        model = factory(sites, _rows(pairs, train))
        for (a, b), far in tests:
            near = a if far == b else b
            for i, q in enumerate(QUANTILES):
                e = model.estimate(near, far, q)
                est[q].append(e.rtt_ms)
                meas[q].append(pairs[(a, b)][i])
                methods[q].append(e.method)
    return Evaluation(scheme, {q: score(est[q], meas[q], methods[q]) for q in QUANTILES})


def placeable_pairs(sites: Mapping[str, Site], rows: Iterable[Any]) -> dict[Pair, tuple[float, float]]:
    """Measured pairs (p50, p95) between known sites with coordinates: what can be held out."""

    def placed(s: str) -> bool:
        site = sites.get(s)
        return site is not None and site.lat is not None and site.lon is not None

    return {k: v for k, v in combine_measurements(rows).items() if placed(k[0]) and placed(k[1])}


def evaluate_kfold(
    sites: Mapping[str, Site],
    rows: Iterable[Any],
    *,
    folds: int = 5,
    seed: int = 0,
    factory: ModelFactory = _default_factory,
) -> Evaluation:
    """Hold out each fold of the measured pairs in turn (folds=5: fit on 80 %, test on 20 %)."""
    if folds < 2:
        raise ValueError("folds must be at least 2")
    pairs = placeable_pairs(sites, rows)
    order = sorted(pairs)
    random.Random(seed).shuffle(order)
    chunks = [order[i::folds] for i in range(folds)]

    def rounds() -> Iterable[tuple[list[Pair], list[tuple[Pair, str]]]]:
        for i, test in enumerate(chunks):
            train = [p for j, c in enumerate(chunks) if j != i for p in c]
            yield train, [(p, p[1]) for p in test]

    return _scored(sites, pairs, rounds(), factory, f"{folds}-fold over pairs (seed {seed})")


def evaluate_leave_one_region_out(
    sites: Mapping[str, Site],
    rows: Iterable[Any],
    *,
    regions: Sequence[str] | None = None,
    factory: ModelFactory = _default_factory,
) -> Evaluation:
    """Remove every measurement of one site at a time and estimate its pairs from the rest."""
    pairs = placeable_pairs(sites, rows)
    measured_sites = sorted({s for p in pairs for s in p})
    chosen = measured_sites if regions is None else [r for r in regions if r in set(measured_sites)]
    if not chosen:
        raise ValueError("none of the given regions has measured pairs")

    def rounds() -> Iterable[tuple[list[Pair], list[tuple[Pair, str]]]]:
        for region in chosen:
            train = [p for p in pairs if region not in p]
            yield train, [(p, region) for p in pairs if region in p]

    scheme = "leave one region out" + ("" if regions is None else f" ({len(chosen)} regions)")
    return _scored(sites, pairs, rounds(), factory, scheme)


def check_targets(evaluations: Iterable[Evaluation]) -> list[dict[str, Any]]:
    """Each target of TARGETS against each evaluation: value, bound and whether it is met."""
    out = []
    for ev in evaluations:
        for metric, q, bound in TARGETS:
            value = float(getattr(ev.scores[q], metric))
            row = {"scheme": ev.scheme, "quantile": q, "metric": metric, "value": value, "max": bound}
            out.append({**row, "met": value <= bound})
    return out
