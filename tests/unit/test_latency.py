from __future__ import annotations

import pytest

from broker.core.domain import Site, SiteKind
from broker.core.latency import (
    LAST_MILE_MS,
    LatencyModel,
    fit_quantile_line,
    fit_report,
    haversine_km,
    parse_geo,
)
from pricing import snapshot


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


def test_quantile_line_recovers_upper_line() -> None:
    xs = [float(i) for i in range(100)]
    ys = [10.0 + 0.5 * x - (i % 10) for i, x in enumerate(xs)]  # upper envelope 10 + 0.5x
    a, b = fit_quantile_line(xs, ys, 0.95)
    assert abs(b - 0.5) < 0.02 and 8.0 <= a <= 10.5


def test_underestimates_at_most_about_ten_percent(model: LatencyModel) -> None:
    rep = fit_report(model)
    assert rep.pairs > 1000
    assert rep.underestimate_fraction <= 0.10
    assert rep.slope_ms_per_km > 0 and rep.intercept_ms >= 0


def test_regional_estimates_are_usable(model: LatencyModel) -> None:
    # Frankfurt users to the Frankfurt region: a few ms plus last mile, not a long-haul figure.
    rtt, kind = model.rtt("aws:eu-central-1", (50.11, 8.68))
    assert kind == "estimated"
    assert LAST_MILE_MS < rtt < 30


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("aws:eu-central-1", "aws:us-east-1"),
        ("azure:westeurope", "azure:northeurope"),
        ("aws:us-east-1", "gcp:us-central1"),
    ],
)
def test_measured_and_symmetric(model: LatencyModel, a: str, b: str) -> None:
    fwd, bwd = model.rtt(a, b), model.rtt(b, a)
    assert fwd == bwd
    assert fwd[1] == "measured"
    lat = snapshot.read_latency()
    row = lat[(lat["src"] == a) & (lat["dst"] == b)]
    assert fwd[0] == float(row["rtt_ms"].iloc[0])


def test_estimated_for_unmeasured_pair_and_geo_string(model: LatencyModel) -> None:
    rtt, kind = model.rtt("aws:eu-central-1-wl1-ber1", "aws:eu-central-1-wl1-muc1")
    assert kind == "estimated" and rtt > 0
    assert model.rtt("aws:eu-central-1", "geo:50.11,8.68") == model.rtt("aws:eu-central-1", (50.11, 8.68))


def test_estimate_monotone_in_distance(model: LatencyModel) -> None:
    vals = [model.estimate_km(k) for k in range(0, 20000, 500)]
    assert vals == sorted(vals)


def test_unknown_site_raises(model: LatencyModel) -> None:
    with pytest.raises(KeyError):
        model.rtt("aws:nowhere", (0.0, 0.0))
