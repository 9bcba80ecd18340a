from __future__ import annotations

import math

import pytest

from broker.core.domain import Site, SiteKind
from broker.core.latency import (
    LAST_MILE_MS,
    DistanceLine,
    LatencyModel,
    combine_measurements,
    fit_quantile_line,
    haversine_km,
    parse_geo,
)
from pricing import snapshot

OREGON_USERS = (45.52, -122.68)  # Portland
VIRGINIA_USERS = (38.9, -77.03)  # Washington / northern Virginia
TOKYO_USERS = (35.68, 139.69)


def _sites() -> dict[str, Site]:
    return {
        s["id"]: Site(
            id=s["id"],
            provider=s["provider"],
            kind=SiteKind(s["kind"]),
            region=s["region"],
            country=s["country"],
            jurisdictions=s["jurisdictions"],
            lat=s["lat"],
            lon=s["lon"],
        )
        for s in snapshot.read_sites()
    }


@pytest.fixture(scope="module")
def model() -> LatencyModel:
    return LatencyModel(_sites(), snapshot.read_latency().to_dict("records"))


# ---- a small synthetic world: every number below follows from these rows -----------------


def _site(sid: str, lat: float, lon: float, provider: str = "aws") -> Site:
    return Site(sid, provider, SiteKind.PUBLIC, sid.split(":")[1], "US", ("US",), lat, lon)


TOY_SITES = {
    s.id: s
    for s in (
        _site("aws:east", 38.9, -77.0),
        _site("aws:mid", 41.2, -95.9),
        _site("aws:west", 45.9, -119.3),
        _site("aws:south", 29.4, -98.5),
        _site("aws:unmeasured", 40.7, -74.0),  # New York: no measurement of its own
        Site("private:nocoords", "private", SiteKind.PRIVATE, "x", "US", ("US",), None, None),
    )
}
TOY_ROWS = [
    ("aws:east", "aws:mid", 30.0, 40.0),
    ("aws:east", "aws:west", 70.0, 75.0),
    ("aws:mid", "aws:west", 40.0, 45.0),
    ("aws:east", "aws:south", 50.0, 55.0),
    ("aws:mid", "aws:south", 25.0, 30.0),
    ("aws:west", "aws:south", 45.0, 50.0),
]


@pytest.fixture(scope="module")
def toy() -> LatencyModel:
    return LatencyModel(TOY_SITES, TOY_ROWS)


def test_measured_pair_answers_each_statistic(toy: LatencyModel) -> None:
    assert toy.estimate("aws:east", "aws:mid", "p50").rtt_ms == 30.0
    assert toy.estimate("aws:mid", "aws:east", "p95").rtt_ms == 40.0
    assert toy.estimate("aws:east", "aws:mid").method == "measured"


def test_user_point_is_anchored_on_the_measured_site_nearest_it(toy: LatencyModel) -> None:
    # a user 100 km from aws:west: east->west measured (70) + access for the 100 km + last mile
    p = (46.8, -119.3)
    d = haversine_km(p, (45.9, -119.3))
    e = toy.estimate("aws:east", p)
    assert e.method == "anchored" and e.via == ("aws:east", "aws:west")
    assert e.rtt_ms == pytest.approx(70.0 + 0.02 * d + LAST_MILE_MS)


def test_unmeasured_site_chains_through_its_anchor(toy: LatencyModel) -> None:
    # New York has no measurement: its nearest anchor (aws:east, ~330 km) carries it to aws:west
    e = toy.estimate("aws:unmeasured", "aws:west")
    d = haversine_km((40.7, -74.0), (38.9, -77.0))
    assert e.method == "anchored" and e.via == ("aws:east", "aws:west")
    assert e.rtt_ms == pytest.approx(70.0 + 0.02 * d)  # a site end: no last mile


def test_distance_line_only_where_nothing_measured_is_near(toy: LatencyModel) -> None:
    far = (-33.9, 18.4)  # Cape Town: no anchor within reach
    e = toy.estimate("aws:east", far)
    assert e.method == "distance"
    assert e.rtt_ms > LAST_MILE_MS


def test_p95_is_uplifted_and_not_below_p50(toy: LatencyModel) -> None:
    p = (46.8, -119.3)
    assert toy.estimate("aws:east", p, "p95").rtt_ms >= toy.estimate("aws:east", p, "p50").rtt_ms
    assert toy.conservative_uplift >= 0.0


def test_geo_on_both_ends_adds_two_last_miles(toy: LatencyModel) -> None:
    a, b = (39.0, -77.1), (45.8, -119.2)
    both = toy.estimate(a, b).rtt_ms
    one = toy.estimate("aws:east", b).rtt_ms
    assert both == pytest.approx(one + LAST_MILE_MS, abs=5.0)
    assert toy.rtt(f"geo:{a[0]},{a[1]}", b) == toy.rtt(a, b)


def test_unknown_and_unplaceable_ends(toy: LatencyModel) -> None:
    with pytest.raises(KeyError):
        toy.rtt("aws:nowhere", (0.0, 0.0))
    with pytest.raises(ValueError):
        toy.rtt("private:nocoords", (0.0, 0.0))
    with pytest.raises(ValueError):
        toy.rtt("aws:east", "aws:mid", "p99")
    assert toy.rtt_from_sites(["aws:east", "private:nocoords"], (40.0, -80.0))[1] == math.inf


def test_statistic_is_the_median_of_a_pairs_figures() -> None:
    rows = [
        {"src": "a", "dst": "b", "rtt_ms": 25.0},
        {"src": "b", "dst": "a", "rtt_ms": 26.0},
        {"src": "a", "dst": "b", "rtt_ms": 89.0, "rtt_p95_ms": 95.0},  # one outlier run
    ]
    assert combine_measurements(rows) == {("a", "b"): (26.0, 95.0)}
    # no p95 given: the p95 is the p50
    assert combine_measurements([("a", "b", 10.0)]) == {("a", "b"): (10.0, 10.0)}


# ---- the bundled snapshot ------------------------------------------------------------


def test_snapshot_rows_keep_one_statistic_per_column() -> None:
    lat = snapshot.read_latency()
    assert set(lat["statistic"].astype(str)) <= {"p50", "p95_30d"}
    assert (lat["rtt_p95_ms"] >= lat["rtt_ms"]).all()
    row = lat[(lat["src"] == "gcp:us-central1") & (lat["dst"] == "gcp:us-east4")].iloc[0]
    # runs of 22-38 ms and two Standard-tier runs of 80-89 ms: the median, not the outliers
    assert 22 <= row["rtt_ms"] <= 27 and row["samples"] == 8


@pytest.mark.parametrize(
    ("site", "users", "measured_ms"),
    [
        ("aws:us-east-1", OREGON_USERS, 69.0),  # us-east-1 <-> us-west-2: 68-70 ms
        ("aws:us-east-2", VIRGINIA_USERS, 13.5),  # us-east-2 <-> us-east-1: 11-16 ms
        ("gcp:us-central1", VIRGINIA_USERS, 29.5),  # us-central1 <-> aws:us-east-1: 29-30 ms
        ("aws:ap-south-1", TOKYO_USERS, 131.0),  # ap-south-1 <-> ap-northeast-1: 130-132 ms
    ],
)
def test_issue_examples_land_near_the_measured_region_pair(
    model: LatencyModel, site: str, users: tuple[float, float], measured_ms: float
) -> None:
    # the estimate less the end user's last mile is the network path the measurement describes
    rtt, source = model.rtt(site, users)
    assert source == "estimated"
    assert abs(rtt - LAST_MILE_MS - measured_ms) <= 0.2 * measured_ms


def test_local_users_get_a_local_figure(model: LatencyModel) -> None:
    rtt, _ = model.rtt("aws:eu-central-1", (50.11, 8.68))
    assert LAST_MILE_MS < rtt < 20
    assert model.rtt("aws:us-west-2", OREGON_USERS)[0] <= 80
    assert model.rtt("aws:us-west-2", VIRGINIA_USERS)[0] <= 120


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("aws:eu-central-1", "aws:us-east-1"),
        ("azure:westeurope", "azure:northeurope"),
        ("aws:us-east-1", "gcp:us-central1"),
    ],
)
def test_measured_and_symmetric(model: LatencyModel, a: str, b: str) -> None:
    lat = snapshot.read_latency()
    row = lat[(lat["src"] == a) & (lat["dst"] == b)].iloc[0]
    for q, col in (("p50", "rtt_ms"), ("p95", "rtt_p95_ms")):
        fwd, bwd = model.rtt(a, b, q), model.rtt(b, a, q)
        assert fwd == bwd == (float(row[col]), "measured")


def test_estimated_for_unmeasured_pair_and_geo_string(model: LatencyModel) -> None:
    rtt, kind = model.rtt("aws:eu-central-1-wl1-ber1", "aws:eu-central-1-wl1-muc1")
    assert kind == "estimated" and 0 < rtt < 40
    assert model.rtt("aws:eu-central-1", "geo:50.11,8.68") == model.rtt("aws:eu-central-1", (50.11, 8.68))


# ---- helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("geo:50.1,8.6", (50.1, 8.6)),
        ("geo:-33.87, 151.21", (-33.87, 151.21)),
        ("geo:0,0", (0.0, 0.0)),
        ("geo:+90,-180", (90.0, -180.0)),
    ],
)
def test_parse_geo_ok(text: str, want: tuple[float, float]) -> None:
    assert parse_geo(text) == want


@pytest.mark.parametrize(
    "text", ["50.1,8.6", "geo:", "geo:91,0", "geo:0,181", "geo:a,b", "geo:1,2,3", "geo:nan,1", "", "geo:1;2"]
)
def test_parse_geo_bad(text: str) -> None:
    with pytest.raises(ValueError):
        parse_geo(text)


@pytest.mark.parametrize(
    ("a", "b", "km", "tol"),
    [
        ((50.11, 8.68), (48.86, 2.35), 479, 5),
        ((40.71, -74.0), (51.51, -0.13), 5570, 20),
        ((0, 0), (0, 0), 0, 0.001),
    ],
)
def test_haversine(a: tuple[float, float], b: tuple[float, float], km: float, tol: float) -> None:
    assert abs(haversine_km(a, b) - km) <= tol


def test_quantile_line_recovers_upper_and_median_lines() -> None:
    xs = [float(i) for i in range(100)]
    ys = [10.0 + 0.5 * x - (i % 10) for i, x in enumerate(xs)]  # upper envelope 10 + 0.5x
    a, b = fit_quantile_line(xs, ys, 0.95)
    assert abs(b - 0.5) < 0.02 and 8.0 <= a <= 10.5
    a, b = fit_quantile_line(xs, ys, 0.5)
    assert abs(b - 0.5) < 0.02 and 4.0 <= a <= 6.5


def test_distance_line_is_monotone_and_never_negative() -> None:
    line = DistanceLine(0.5, -3.0, 0.02, 10.0, 0.015)
    vals = [line.at(k) for k in range(0, 20000, 500)]
    assert vals == sorted(vals) and vals[0] == 0.0
