from __future__ import annotations

import numpy as np
import pytest

from broker.core.domain import UserRegion
from broker.core.latency_measured import Measurement, apply_measurements, combine, lookup, parse_measurements
from broker.errors import InvalidRequest

SITES = {"aws:us-east-1", "aws:us-west-2", "gcp:us-central1"}
INDEX = {"aws:us-east-1": 0, "aws:us-west-2": 1, "gcp:us-central1": 2}


def test_rows_are_validated_and_normalised() -> None:
    got = parse_measurements(
        [
            {"from": "aws:us-east-1", "to": "oregon-users", "rtt_ms": "71.5", "statistic": "p50", "source": "probes"},
            {"from": "aws:us-east-1", "to": "geo:45.52,-122.68", "rtt_ms": 80},
            {"from": "aws:us-west-2", "to": "aws:us-east-1", "rtt_ms": 66.0, "statistic": "p95", "source": ""},
        ],
        SITES,
    )
    assert got == [
        Measurement("aws:us-east-1", "oregon-users", "p50", 71.5, "probes"),
        Measurement("aws:us-east-1", "geo:45.5200,-122.6800", "p50", 80.0, "import"),
        Measurement("aws:us-west-2", "aws:us-east-1", "p95", 66.0, "import"),
    ]


def test_every_bad_cell_is_named_and_nothing_is_returned() -> None:
    rows = [
        {"from": "aws:us-east-1", "to": "oregon-users", "rtt_ms": 10},
        {"from": "geo:1,2", "to": "aws:nowhere-1", "rtt_ms": "fast", "statistic": "p90"},
        {"from": "aws:us-east-1", "to": "geo:95,0", "rtt_ms": -1},
        {"from": "aws:us-east-1", "to": "aws:us-east-1", "rtt_ms": 1},
    ]
    with pytest.raises(InvalidRequest) as exc:
        parse_measurements(rows, SITES, loc=("body", "measurements"))
    locs = {tuple(e["loc"]) for e in exc.value.errors}
    assert locs == {
        ("body", "measurements", 1, "from"),
        ("body", "measurements", 1, "to"),
        ("body", "measurements", 1, "rtt_ms"),
        ("body", "measurements", 1, "statistic"),
        ("body", "measurements", 2, "to"),
        ("body", "measurements", 2, "rtt_ms"),
        ("body", "measurements", 3, "to"),
    }
    with pytest.raises(InvalidRequest):
        parse_measurements([], SITES)


def test_one_statistic_per_path_median_and_highest() -> None:
    ms = [
        Measurement("aws:us-east-1", "x", "p50", 10.0, "a"),
        Measurement("aws:us-east-1", "x", "p50", 30.0, "b"),
        Measurement("aws:us-east-1", "x", "p50", 12.0, "c"),
        Measurement("aws:us-east-1", "x", "p95", 40.0, "a"),
        Measurement("aws:us-east-1", "x", "p95", 50.0, "b"),
        Measurement("aws:us-west-2", "aws:us-east-1", "p50", 66.0, "a"),
    ]
    assert combine(ms, "p50")[("aws:us-east-1", "x")] == 12.0
    assert combine(ms, "p95") == {("aws:us-east-1", "x"): 50.0}
    # a site-to-site path in either order; a region name is no site
    assert lookup(ms, "aws:us-east-1", "aws:us-west-2", "p50") == 66.0
    assert lookup(ms, "x", "aws:us-east-1", "p50") == 12.0
    assert lookup(ms, "aws:us-east-1", "aws:us-west-2", "p95") is None


def _rtt() -> dict[str, np.ndarray]:
    out = {}
    for name in ("oregon-users", "hq", "east"):
        a = np.array([64.0, 15.0, 40.0])
        a.flags.writeable = False  # as the catalog's shared arrays
        out[name] = a
    return out


def test_measurements_win_for_the_region_they_name() -> None:
    regions = [
        UserRegion("oregon-users", 45.52, -122.68),
        UserRegion("hq", 45.52, -122.68),
        UserRegion("east", site="aws:us-east-1"),
    ]
    ms = [
        Measurement("aws:us-east-1", "geo:45.5200,-122.6800", "p50", 70.0, "a"),  # both regions at that point
        Measurement("aws:us-east-1", "oregon-users", "p50", 71.0, "b"),  # by name: wins for oregon-users
        Measurement("gcp:us-central1", "aws:us-east-1", "p50", 29.0, "a"),  # the site region, other order
        Measurement("aws:us-west-2", "oregon-users", "p95", 9.0, "a"),  # another statistic
    ]
    before = _rtt()
    got = apply_measurements(before, regions, ms, INDEX, "p50")
    assert got["oregon-users"].tolist() == [71.0, 15.0, 40.0]
    assert got["hq"].tolist() == [70.0, 15.0, 40.0]
    assert got["east"].tolist() == [64.0, 15.0, 29.0]
    assert before["oregon-users"].tolist() == [64.0, 15.0, 40.0]  # the shared arrays stay as they were
    p95 = apply_measurements(before, regions, ms, INDEX, "p95")
    assert p95["oregon-users"].tolist() == [64.0, 9.0, 40.0] and p95["hq"] is before["hq"]
