"""Round-trip latency between sites, and from sites to end-user locations.

Measured site-to-site RTTs (the catalog's ``latency.csv``) are used as they are. Every
other pair is estimated from the great-circle distance ``km`` with lines ``a + b*km``
fitted as an **upper quantile** (default: the 95th percentile) of the measured RTTs, so
that the estimate is rarely optimistic. One line does not fit both ranges (RTT grows
steeply with distance within a continent and flattens on long-haul routes; a single 95th
percentile line ends up with a ~79 ms intercept), so there are two, and the estimate is
the lower of the two (a concave, piecewise-linear upper envelope):

    near: a1 + b1*km   fitted on same-provider pairs up to REGIONAL_MAX_KM
    far:  a2 + b2*km   fitted on all measured pairs
    rtt_ms = min(near, far)                  (site <-> site, unmeasured)
    rtt_ms = min(near, far) + LAST_MILE_MS   (site <-> geo point, i.e. an end user)

The fit minimises the pinball (quantile) loss. With two parameters that is done exactly
enough without scipy: for a fixed slope ``b`` the best intercept is the tau-quantile of
``rtt - b*km``, and the loss is convex in ``b``, so a ternary search over ``b`` finds the
optimum. See docs/latency.md for the fitted parameters and error figures.

Pure: no I/O. Build it with ``LatencyModel(sites, measured_rows)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from broker.core.domain import Site

EARTH_RADIUS_KM = 6371.0088
#: Added to site -> end-user estimates: access network (DSL/cable/mobile) RTT on top of
#: the backbone path the inter-region fit describes. Deliberately modest; see docs/latency.md.
LAST_MILE_MS = 5.0
DEFAULT_QUANTILE = 0.95
#: The near line is fitted on same-provider pairs at most this far apart. Cross-provider
#: pairs in one metro include peering detours (up to ~130 ms over < 300 km) that do not
#: describe the path from a nearby user or from a region of the same backbone.
REGIONAL_MAX_KM = 3000.0

Geo = tuple[float, float]

_GEO_RE = re.compile(r"^geo:\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*,\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*$")


def parse_geo(value: str) -> Geo:
    """Parse ``"geo:<lat>,<lon>"`` (decimal degrees) into ``(lat, lon)``.

    Raises ValueError on anything else, including out-of-range coordinates.
    """
    if not isinstance(value, str):
        raise ValueError(f"geo point must be a string like 'geo:50.11,8.68', got {type(value).__name__}")
    m = _GEO_RE.match(value.strip())
    if m is None:
        raise ValueError(f"invalid geo point {value!r}: expected 'geo:<lat>,<lon>' in decimal degrees")
    lat, lon = float(m.group(1)), float(m.group(2))
    validate_geo((lat, lon))
    return (lat, lon)


def validate_geo(point: Geo) -> Geo:
    lat, lon = point
    if not (math.isfinite(lat) and math.isfinite(lon)):
        raise ValueError(f"invalid geo point {point!r}: coordinates must be finite")
    if not -90.0 <= lat <= 90.0:
        raise ValueError(f"invalid geo point {point!r}: latitude must be within [-90, 90]")
    if not -180.0 <= lon <= 180.0:
        raise ValueError(f"invalid geo point {point!r}: longitude must be within [-180, 180]")
    return (float(lat), float(lon))


def haversine_km(a: Geo, b: Geo) -> float:
    """Great-circle distance in km between two (lat, lon) points in degrees."""
    lat1, lon1 = math.radians(a[0]), math.radians(a[1])
    lat2, lon2 = math.radians(b[0]), math.radians(b[1])
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def fit_quantile_line(xs: Sequence[float], ys: Sequence[float], tau: float) -> tuple[float, float]:
    """Fit ``y = a + b*x`` minimising the tau pinball loss, with ``b >= 0``."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("need at least two (x, y) points of equal length")
    if not 0.0 < tau < 1.0:
        raise ValueError("tau must be in (0, 1)")

    x_arr = np.asarray(xs, dtype=np.float64)
    y_arr = np.asarray(ys, dtype=np.float64)
    k = min(len(x_arr) - 1, max(0, math.ceil(tau * len(x_arr)) - 1))

    def best_for(b: float) -> tuple[float, float]:
        # intercept: the lower tau-quantile of the residuals; loss: the tau pinball loss
        resid = y_arr - b * x_arr
        a = float(np.partition(resid, k)[k])
        r = resid - a
        return a, float(np.where(r >= 0, tau * r, (tau - 1.0) * r).sum())

    span = max(xs) - min(xs)
    hi = (max(ys) - min(ys)) / span if span > 0 else 0.0
    lo = 0.0
    for _ in range(100):
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if best_for(m1)[1] <= best_for(m2)[1]:
            hi = m2
        else:
            lo = m1
    b = (lo + hi) / 2
    return best_for(b)[0], b


@dataclass(frozen=True, slots=True)
class FitReport:
    quantile: float
    intercept_ms: float  # near line a1
    slope_ms_per_km: float  # near line b1
    far_intercept_ms: float  # far line a2
    far_slope_ms_per_km: float  # far line b2
    crossover_km: float | None  # distance beyond which the far line is used
    near_fit_pairs: int
    last_mile_ms: float
    pairs: int  # unordered measured pairs with coordinates at both ends
    mae_ms: float
    median_abs_error_ms: float
    mean_error_ms: float  # estimate - measured; positive = pessimistic on average
    underestimate_fraction: float  # share of measured pairs where estimate < measured
    underestimate_fraction_by_source: Mapping[str, float]
    pairs_by_source: Mapping[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "quantile": self.quantile,
            "intercept_ms": self.intercept_ms,
            "slope_ms_per_km": self.slope_ms_per_km,
            "far_intercept_ms": self.far_intercept_ms,
            "far_slope_ms_per_km": self.far_slope_ms_per_km,
            "crossover_km": self.crossover_km,
            "near_fit_pairs": self.near_fit_pairs,
            "last_mile_ms": self.last_mile_ms,
            "pairs": self.pairs,
            "mae_ms": self.mae_ms,
            "median_abs_error_ms": self.median_abs_error_ms,
            "mean_error_ms": self.mean_error_ms,
            "underestimate_fraction": self.underestimate_fraction,
            "underestimate_fraction_by_source": dict(self.underestimate_fraction_by_source),
            "pairs_by_source": dict(self.pairs_by_source),
        }


def _row_fields(row: Mapping[str, Any] | Sequence[Any]) -> tuple[str, str, float, str]:
    if isinstance(row, Mapping):
        return str(row["src"]), str(row["dst"]), float(row["rtt_ms"]), str(row.get("source", ""))
    src, dst, rtt = row[0], row[1], row[2]
    source = str(row[3]) if len(row) > 3 else ""
    return str(src), str(dst), float(rtt), source


class LatencyModel:
    """Measured RTT where known, upper-quantile distance model elsewhere."""

    def __init__(
        self,
        sites: Mapping[str, Site],
        measured: Iterable[Mapping[str, Any] | Sequence[Any]],
        *,
        quantile: float = DEFAULT_QUANTILE,
        last_mile_ms: float = LAST_MILE_MS,
        regional_max_km: float = REGIONAL_MAX_KM,
    ) -> None:
        self._sites = dict(sites)
        self._quantile = quantile
        self._last_mile = last_mile_ms
        # Unordered pair -> (rtt, source). If both directions differ, keep the higher.
        self._measured: dict[tuple[str, str], tuple[float, str]] = {}
        for row in measured:
            src, dst, rtt, source = _row_fields(row)
            if src == dst or not math.isfinite(rtt) or rtt < 0:
                continue
            key = (src, dst) if src < dst else (dst, src)
            cur = self._measured.get(key)
            if cur is None or rtt > cur[0]:
                self._measured[key] = (rtt, source)

        self._fit_rows: list[tuple[float, float, str]] = []  # (km, rtt, source)
        near_x: list[float] = []
        near_y: list[float] = []
        for (a, b), (rtt, source) in sorted(self._measured.items()):
            pa, pb = self._coords(a), self._coords(b)
            if pa is None or pb is None:
                continue
            km = haversine_km(pa, pb)
            self._fit_rows.append((km, rtt, source))
            if self._sites[a].provider == self._sites[b].provider and km <= regional_max_km:
                near_x.append(km)
                near_y.append(rtt)
        if len(self._fit_rows) < 2:
            raise ValueError("need at least two measured pairs between sites with coordinates to fit")
        self._a2, self._b2 = fit_quantile_line([r[0] for r in self._fit_rows], [r[1] for r in self._fit_rows], quantile)
        self._near_pairs = len(near_x)
        if len(near_x) >= 2:
            self._a, self._b = fit_quantile_line(near_x, near_y, quantile)
        else:  # too little regional data: the far line alone
            self._a, self._b = self._a2, self._b2

    # -- parameters ------------------------------------------------------------------

    @property
    def intercept_ms(self) -> float:
        return self._a

    @property
    def slope_ms_per_km(self) -> float:
        return self._b

    @property
    def last_mile_ms(self) -> float:
        return self._last_mile

    @property
    def far_intercept_ms(self) -> float:
        return self._a2

    @property
    def far_slope_ms_per_km(self) -> float:
        return self._b2

    def estimate_km(self, km: float) -> float:
        """Model RTT for a backbone distance (no last-mile allowance)."""
        return min(self._a + self._b * km, self._a2 + self._b2 * km)

    def _crossover_km(self) -> float | None:
        if self._b == self._b2:
            return None
        k = (self._a2 - self._a) / (self._b - self._b2)
        return k if k > 0 else None

    # -- lookups -----------------------------------------------------------------------

    def _coords(self, site_id: str) -> Geo | None:
        site = self._sites.get(site_id)
        if site is None or site.lat is None or site.lon is None:
            return None
        return (site.lat, site.lon)

    def _require_coords(self, site_id: str) -> Geo:
        if site_id not in self._sites:
            raise KeyError(f"unknown site {site_id!r}")
        p = self._coords(site_id)
        if p is None:
            raise ValueError(f"site {site_id!r} has no coordinates; cannot estimate latency")
        return p

    def measured(self, src: str, dst: str) -> float | None:
        key = (src, dst) if src < dst else (dst, src)
        hit = self._measured.get(key)
        return hit[0] if hit else None

    def rtt(self, src_site_id: str, dst: str | Geo) -> tuple[float, str]:
        """RTT in ms from a site to another site id or to a ``(lat, lon)`` point.

        Returns ``(rtt_ms, "measured" | "estimated")``. Lookups are symmetric. A site to
        itself is estimated as the model's zero-distance value (the intercept).
        """
        if isinstance(dst, str):
            if dst.startswith("geo:"):
                return self.rtt(src_site_id, parse_geo(dst))
            hit = self.measured(src_site_id, dst)
            if hit is not None:
                return (hit, "measured")
            pa, pb = self._require_coords(src_site_id), self._require_coords(dst)
            return (self.estimate_km(haversine_km(pa, pb)), "estimated")
        point = validate_geo((float(dst[0]), float(dst[1])))
        pa = self._require_coords(src_site_id)
        return (self.estimate_km(haversine_km(pa, point)) + self._last_mile, "estimated")

    # -- quality -----------------------------------------------------------------------

    def fit_report(self) -> FitReport:
        errs = [self.estimate_km(km) - rtt for km, rtt, _ in self._fit_rows]
        abs_errs = sorted(abs(e) for e in errs)
        n = len(errs)
        by_src: dict[str, list[float]] = {}
        for (_, _, source), e in zip(self._fit_rows, errs, strict=True):
            by_src.setdefault(source, []).append(e)
        mid = n // 2
        median = abs_errs[mid] if n % 2 else (abs_errs[mid - 1] + abs_errs[mid]) / 2
        return FitReport(
            quantile=self._quantile,
            intercept_ms=self._a,
            slope_ms_per_km=self._b,
            far_intercept_ms=self._a2,
            far_slope_ms_per_km=self._b2,
            crossover_km=self._crossover_km(),
            near_fit_pairs=self._near_pairs,
            last_mile_ms=self._last_mile,
            pairs=n,
            mae_ms=sum(abs_errs) / n,
            median_abs_error_ms=median,
            mean_error_ms=sum(errs) / n,
            underestimate_fraction=sum(1 for e in errs if e < 0) / n,
            underestimate_fraction_by_source={
                k: sum(1 for e in v if e < 0) / len(v) for k, v in sorted(by_src.items())
            },
            pairs_by_source={k: len(v) for k, v in sorted(by_src.items())},
        )


def fit_report(model: LatencyModel) -> FitReport:
    """Fit parameters and in-sample error figures of ``model``."""
    return model.fit_report()
