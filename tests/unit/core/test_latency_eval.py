from __future__ import annotations

import itertools
import random

import pytest

from broker.core.domain import Site, SiteKind
from broker.core.latency import LatencyModel, haversine_km
from broker.core.latency_eval import (
    check_targets,
    evaluate_kfold,
    evaluate_leave_one_region_out,
    placeable_pairs,
    score,
)
from pricing import snapshot


def test_score_figures() -> None:
    s = score([90.0, 110.0, 200.0, 50.0], [100.0, 100.0, 100.0, 100.0], ["anchored"] * 3 + ["distance"])
    assert s.n == 4
    assert s.median_ape_pct == pytest.approx(30.0)  # |errors| 10, 10, 50, 100 %
    assert s.median_error_pct == pytest.approx(0.0)  # -10, 10, 100, -50 %
    assert s.underestimated_pct == pytest.approx(50.0)
    assert s.overestimated_50_pct == pytest.approx(25.0)
    assert s.by_method == {"anchored": 3, "distance": 1}
    with pytest.raises(ValueError):
        score([1.0], [0.0])


# ---- a synthetic world: RTT follows distance, each pair off by up to +-15 % -------------


def _grid() -> tuple[dict[str, Site], list[tuple[str, str, float, float]]]:
    rnd = random.Random(7)
    sites = {}
    for i, (lat, lon) in enumerate(itertools.product(range(30, 51, 5), range(-120, -69, 10))):
        sid = f"aws:r{i}"
        sites[sid] = Site(sid, "aws", SiteKind.PUBLIC, f"r{i}", "US", ("US",), float(lat), float(lon))
    rows = []
    for a, b in itertools.combinations(sorted(sites), 2):
        pa, pb = sites[a], sites[b]
        km = haversine_km((pa.lat or 0.0, pa.lon or 0.0), (pb.lat or 0.0, pb.lon or 0.0))
        typical = (2.0 + 0.02 * km) * rnd.uniform(0.85, 1.15)
        rows.append((a, b, typical, typical * 1.1))
    return sites, rows


def test_kfold_holds_every_pair_out_once_and_scores_a_consistent_world_well() -> None:
    sites, rows = _grid()
    ev = evaluate_kfold(sites, rows, folds=5)
    assert ev.scores["p50"].n == ev.scores["p95"].n == len(rows)
    assert ev.scores["p50"].median_ape_pct < 12
    assert ev.scores["p95"].underestimated_pct <= 10


def test_a_worse_model_scores_worse() -> None:
    sites, rows = _grid()
    good = evaluate_kfold(sites, rows)
    bad = evaluate_kfold(sites, rows, factory=lambda s, r: LatencyModel(s, r, access_ms_per_km=0.2))
    assert bad.scores["p50"].median_ape_pct > good.scores["p50"].median_ape_pct + 3


def test_leave_one_region_out_estimates_the_region_from_the_rest() -> None:
    sites, rows = _grid()
    ev = evaluate_leave_one_region_out(sites, rows, regions=["aws:r0", "aws:r7"])
    # each held-out region is measured with every other one
    assert ev.scores["p50"].n == 2 * (len(sites) - 1)
    assert ev.scores["p50"].median_ape_pct < 15
    with pytest.raises(ValueError):
        evaluate_leave_one_region_out(sites, rows, regions=["aws:nowhere"])


def test_pairs_without_coordinates_are_not_held_out() -> None:
    sites, rows = _grid()
    sites["private:x"] = Site("private:x", "private", SiteKind.PRIVATE, "x", "US", ("US",), None, None)
    pairs = placeable_pairs(sites, [*rows, ("private:x", "aws:r0", 5.0, 6.0)])
    assert len(pairs) == len(rows)


# ---- the bundled snapshot: the accuracy targets of docs/latency.md ---------------------


@pytest.fixture(scope="module")
def real() -> tuple[dict[str, Site], list[dict[str, object]]]:
    sites = {
        s["id"]: Site(
            s["id"],
            s["provider"],
            SiteKind(s["kind"]),
            s["region"],
            s["country"],
            s["jurisdictions"],
            s["lat"],
            s["lon"],
        )
        for s in snapshot.read_sites()
    }
    return sites, snapshot.read_latency().to_dict("records")


def test_bundled_snapshot_meets_the_held_out_targets(real: tuple[dict[str, Site], list[dict[str, object]]]) -> None:
    sites, rows = real
    kfold = evaluate_kfold(sites, rows)
    assert kfold.scores["p50"].n > 3000
    results = check_targets([kfold])
    assert {(r["quantile"], r["metric"]) for r in results} == {
        ("p50", "median_ape_pct"),
        ("p50", "overestimated_50_pct"),
        ("p95", "underestimated_pct"),
    }
    assert all(r["met"] for r in results), results
