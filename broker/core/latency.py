"""Round-trip latency between sites, and from sites to end users at geo points.

Estimates are anchored on measurements (docs/latency.md has the method and its held-out
accuracy). Every figure is one statistic of the round-trip time, chosen per call:
``"p50"`` (the typical RTT, a median) or ``"p95"`` (conservative).

- A measured pair answers with its measured value of that statistic.
- Otherwise each end is replaced by measured sites near it ("anchors"): a measured site is
  its own anchor at 0 km, and up to ``anchors_per_end`` others within ``anchor_radius_km``
  are added. A chain from anchor B (near one end) to anchor A (near the other) costs

      m(B, A) + access_ms_per_km * (km(x, B) + km(A, y))    B != A, the pair measured
      local   + access_ms_per_km * (km(x, A) + km(A, y))    B == A: both ends near one site

  and the estimate is the lowest of the ``anchors_per_end`` chains with the least added
  distance (the nearest anchors, not the luckiest far one). The chain is kept only where it
  is tighter than a 95th-percentile distance envelope (a chain through a detour is not).
  For ``"p95"`` anchored estimates are scaled by an uplift calibrated on the measured
  pairs themselves (leave-one-pair-out), so that about ``coverage`` of them are covered.
- Where nothing measured is within reach of an end, a distance line: a quantile regression
  of RTT on great-circle distance (median for p50, ``coverage`` quantile for p95).
- A geo end is an end user: ``last_mile_ms`` is added for each (access network).

Pure: no I/O. Build it with ``LatencyModel(sites, measured_rows)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from broker.core.domain import Site

Quantile = Literal["p50", "p95"]
QUANTILES: tuple[Quantile, ...] = ("p50", "p95")
DEFAULT_QUANTILE: Quantile = "p50"

EARTH_RADIUS_KM = 6371.0088
#: Added per end-user (geo) end: access network (DSL/cable/fibre) RTT on top of the path
#: to the provider's network. A fixed allowance: no public user-to-region data to fit it on.
LAST_MILE_MS = 5.0
#: RTT per km of distance between an end and its anchor: light in fibre needs ~0.01 ms of
#: RTT per straight-line km and routes are about twice as long as the great circle.
ACCESS_MS_PER_KM = 0.02
ANCHOR_RADIUS_KM = 1000.0
ANCHORS_PER_END = 2
#: Share of measured pairs the conservative (p95) setting is calibrated to cover.
CONSERVATIVE_COVERAGE = 0.92
#: Quantile of the distance envelope an anchored chain must stay under.
ENVELOPE_TAU = 0.95
#: Near distance lines are fitted on same-provider pairs at most this far apart: cross-provider
#: pairs in one metro include peering detours that do not describe a path on one backbone.
REGIONAL_MAX_KM = 3000.0

Geo = tuple[float, float]
End = str | Geo  # a site id, "geo:<lat>,<lon>", or a (lat, lon) point
Method = Literal["measured", "anchored", "local", "distance"]

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


def check_quantile(value: str) -> Quantile:
    if value not in QUANTILES:
        raise ValueError(f"unknown latency quantile {value!r}; known: {', '.join(QUANTILES)}")
    return value  # narrowed to Quantile by the membership test


def haversine_km(a: Geo, b: Geo) -> float:
    """Great-circle distance in km between two (lat, lon) points in degrees."""
    lat1, lon1 = math.radians(a[0]), math.radians(a[1])
    lat2, lon2 = math.radians(b[0]), math.radians(b[1])
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def _haversine_to(point: Geo, lat: npt.NDArray[np.float64], lon: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Distances in km from ``point`` to arrays of coordinates in radians."""
    p_lat, p_lon = math.radians(point[0]), math.radians(point[1])
    h = np.sin((lat - p_lat) / 2) ** 2 + math.cos(p_lat) * np.cos(lat) * np.sin((lon - p_lon) / 2) ** 2
    return np.asarray(2 * EARTH_RADIUS_KM * np.arcsin(np.minimum(1.0, np.sqrt(h))), dtype=np.float64)


def fit_quantile_line(xs: Sequence[float], ys: Sequence[float], tau: float) -> tuple[float, float]:
    """Fit ``y = a + b*x`` minimising the tau pinball loss, with ``b >= 0``.

    For a fixed slope the best intercept is the tau-quantile of ``y - b*x`` and the loss is
    convex in the slope, so a ternary search over the slope finds the optimum.
    """
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("need at least two (x, y) points of equal length")
    if not 0.0 < tau < 1.0:
        raise ValueError("tau must be in (0, 1)")

    x_arr = np.asarray(xs, dtype=np.float64)
    y_arr = np.asarray(ys, dtype=np.float64)
    k = min(len(x_arr) - 1, max(0, math.ceil(tau * len(x_arr)) - 1))

    def best_for(b: float) -> tuple[float, float]:
        resid = y_arr - b * x_arr
        a = float(np.partition(resid, k)[k])
        r = resid - a
        return a, float(np.where(r >= 0, tau * r, (tau - 1.0) * r).sum())

    span = max(xs) - min(xs)
    hi = (max(ys) - min(ys)) / span if span > 0 else 0.0
    lo = 0.0
    for _ in range(60):
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if best_for(m1)[1] <= best_for(m2)[1]:
            hi = m2
        else:
            lo = m1
    b = (lo + hi) / 2
    return best_for(b)[0], b


@dataclass(frozen=True, slots=True)
class DistanceLine:
    """``min(near_a + near_b*km, far_a + far_b*km)``: steep within a continent, flatter long-haul."""

    tau: float
    near_a: float
    near_b: float
    far_a: float
    far_b: float

    def at(self, km: float) -> float:
        return max(0.0, min(self.near_a + self.near_b * km, self.far_a + self.far_b * km))

    @classmethod
    def fit(cls, km: Sequence[float], rtt: Sequence[float], regional: Sequence[bool], tau: float) -> DistanceLine:
        far_a, far_b = fit_quantile_line(km, rtt, tau)
        near = [(k, r) for k, r, g in zip(km, rtt, regional, strict=True) if g]
        if len(near) >= 2:
            near_a, near_b = fit_quantile_line([k for k, _ in near], [r for _, r in near], tau)
        else:  # too little regional data: the far line alone
            near_a, near_b = far_a, far_b
        return cls(tau, near_a, near_b, far_a, far_b)


@dataclass(frozen=True, slots=True)
class Estimate:
    rtt_ms: float
    source: Literal["measured", "estimated"]
    method: Method
    via: tuple[str, ...] = ()  # measured: the pair; anchored: the measured pair it starts from; local: the site


def _opt_float(v: Any) -> float | None:
    if v is None or v == "":
        return None
    f = float(v)
    return f if math.isfinite(f) and f >= 0 else None


def _row_fields(row: Mapping[str, Any] | Sequence[Any]) -> tuple[str, str, float | None, float | None]:
    """(src, dst, p50, p95) of a measured row: a mapping with ``src, dst, rtt_ms[, rtt_p95_ms]``
    or a sequence ``(src, dst, rtt_ms[, rtt_p95_ms])``."""
    if isinstance(row, Mapping):
        return str(row["src"]), str(row["dst"]), _opt_float(row["rtt_ms"]), _opt_float(row.get("rtt_p95_ms"))
    p95 = _opt_float(row[3]) if len(row) > 3 else None
    return str(row[0]), str(row[1]), _opt_float(row[2]), p95


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


@dataclass(frozen=True, slots=True)
class _End:
    site: str | None
    point: Geo | None
    anchors: tuple[tuple[float, str], ...]  # (km from this end, anchor site), nearest first


class LatencyModel:
    """Measured RTT where known, estimates anchored on measured pairs elsewhere."""

    def __init__(
        self,
        sites: Mapping[str, Site],
        measured: Iterable[Mapping[str, Any] | Sequence[Any]],
        *,
        last_mile_ms: float = LAST_MILE_MS,
        access_ms_per_km: float = ACCESS_MS_PER_KM,
        anchor_radius_km: float = ANCHOR_RADIUS_KM,
        anchors_per_end: int = ANCHORS_PER_END,
        coverage: float = CONSERVATIVE_COVERAGE,
    ) -> None:
        self._sites = dict(sites)
        self._last_mile = last_mile_ms
        self._access = access_ms_per_km
        self._radius = anchor_radius_km
        self._k = anchors_per_end
        self._coverage = coverage
        self._pairs = combine_measurements(measured)
        # quantile -> site -> other site -> measured value
        self._nb: dict[Quantile, dict[str, dict[str, float]]] = {q: {} for q in QUANTILES}
        for (a, b), values in self._pairs.items():
            for q, v in zip(QUANTILES, values, strict=True):
                self._nb[q].setdefault(a, {})[b] = v
                self._nb[q].setdefault(b, {})[a] = v

        self._anchor_ids = sorted(s for s in self._nb["p50"] if self._coords(s) is not None)
        self._anchor_set = frozenset(self._anchor_ids)
        coords = [self._coords(s) or (0.0, 0.0) for s in self._anchor_ids]
        self._anchor_lat = np.radians(np.array([c[0] for c in coords], dtype=np.float64))
        self._anchor_lon = np.radians(np.array([c[1] for c in coords], dtype=np.float64))
        self._site_ends: dict[str, tuple[tuple[float, str], ...]] = {}

        km, p50s, p95s, regional = [], [], [], []
        for (a, b), (p50, p95) in sorted(self._pairs.items()):
            pa, pb = self._coords(a), self._coords(b)
            if pa is None or pb is None:
                continue
            d = haversine_km(pa, pb)
            km.append(d)
            p50s.append(p50)
            p95s.append(p95)
            regional.append(self._sites[a].provider == self._sites[b].provider and d <= REGIONAL_MAX_KM)
        if len(km) < 2:
            raise ValueError("need at least two measured pairs between sites with coordinates")
        vals: dict[Quantile, list[float]] = {"p50": p50s, "p95": p95s}
        self._median_line = {q: DistanceLine.fit(km, vals[q], regional, 0.5) for q in QUANTILES}
        self._envelope = {q: DistanceLine.fit(km, vals[q], regional, ENVELOPE_TAU) for q in QUANTILES}
        # nothing measured near an end: the median line, or for p95 the envelope (a distance
        # line misses more on held-out pairs than in-sample, so coverage alone would be short)
        self._fallback = {"p50": self._median_line["p50"], "p95": self._envelope["p95"]}
        # zero-distance RTT of a path that stays near one anchor: the median of measured
        # pairs within anchor reach, less their distance term (co-located regions: 2-5 ms)
        near_pairs = [i for i, d in enumerate(km) if d <= anchor_radius_km]
        self._local = {
            q: max(0.0, float(np.median([vals[q][i] - access_ms_per_km * km[i] for i in near_pairs])))
            if near_pairs
            else max(0.0, self._median_line[q].near_a)
            for q in QUANTILES
        }
        self._uplift = self._calibrate_uplift()

    # -- parameters ------------------------------------------------------------------

    @property
    def last_mile_ms(self) -> float:
        return self._last_mile

    @property
    def conservative_uplift(self) -> float:
        """Factor - 1 applied to anchored p95 estimates (calibrated, see the module docstring)."""
        return self._uplift

    @property
    def measured_pairs(self) -> int:
        return len(self._pairs)

    def parameters(self) -> dict[str, Any]:
        def line(d: DistanceLine) -> dict[str, float]:
            return {"tau": d.tau, "near_a": d.near_a, "near_b": d.near_b, "far_a": d.far_a, "far_b": d.far_b}

        return {
            "measured_pairs": len(self._pairs),
            "anchors": len(self._anchor_ids),
            "last_mile_ms": self._last_mile,
            "access_ms_per_km": self._access,
            "anchor_radius_km": self._radius,
            "anchors_per_end": self._k,
            "coverage": self._coverage,
            "conservative_uplift": self._uplift,
            "local_ms": dict(self._local),
            "fallback_line": {q: line(v) for q, v in self._fallback.items()},
            "envelope_line": {q: line(v) for q, v in self._envelope.items()},
        }

    # -- lookups -----------------------------------------------------------------------

    def _coords(self, site_id: str) -> Geo | None:
        site = self._sites.get(site_id)
        if site is None or site.lat is None or site.lon is None:
            return None
        return (site.lat, site.lon)

    def measured(self, src: str, dst: str, quantile: str = DEFAULT_QUANTILE) -> float | None:
        hit = self._pairs.get(_key(src, dst))
        if hit is None:
            return None
        return hit[0] if check_quantile(quantile) == "p50" else hit[1]

    def rtt(self, src: End, dst: End, quantile: str = DEFAULT_QUANTILE) -> tuple[float, str]:
        """RTT in ms between two ends (site ids, ``"geo:lat,lon"`` strings or ``(lat, lon)``).

        Returns ``(rtt_ms, "measured" | "estimated")``. Symmetric. Raises KeyError for an
        unknown site and ValueError for a bad point or an end that cannot be placed.
        """
        e = self.estimate(src, dst, quantile)
        return (e.rtt_ms, e.source)

    def estimate(self, src: End, dst: End, quantile: str = DEFAULT_QUANTILE) -> Estimate:
        return self._estimate(self._end(src), self._end(dst), check_quantile(quantile))

    def rtt_from_sites(self, site_ids: Sequence[str], dst: End, quantile: str = DEFAULT_QUANTILE) -> list[float]:
        """RTT from each site to one end (the end is resolved once); ``inf`` where none can be given."""
        q = check_quantile(quantile)
        end = self._end(dst)
        out: list[float] = []
        for s in site_ids:
            try:
                out.append(self._estimate(self._end(s), end, q).rtt_ms)
            except (KeyError, ValueError):
                out.append(math.inf)  # a site without coordinates can promise no latency
        return out

    def _end(self, end: End) -> _End:
        if isinstance(end, str) and not end.startswith("geo:"):
            if end not in self._sites:
                raise KeyError(f"unknown site {end!r}")
            if end not in self._site_ends:
                own = ((0.0, end),) if end in self._nb["p50"] else ()
                p = self._coords(end)
                self._site_ends[end] = own + (self._nearby(p, exclude=end) if p is not None else ())
            return _End(end, self._coords(end), self._site_ends[end])
        point = parse_geo(end) if isinstance(end, str) else validate_geo((float(end[0]), float(end[1])))
        return _End(None, point, self._nearby(point, exclude=None))

    def _nearby(self, point: Geo, exclude: str | None) -> tuple[tuple[float, str], ...]:
        if not self._anchor_ids:
            return ()
        km = _haversine_to(point, self._anchor_lat, self._anchor_lon)
        order = np.argsort(km, kind="stable")  # ties: anchor ids are sorted
        out: list[tuple[float, str]] = []
        for i in order:
            if km[i] > self._radius or len(out) == self._k:
                break
            if self._anchor_ids[i] != exclude:
                out.append((float(km[i]), self._anchor_ids[i]))
        return tuple(out)

    def _chain(
        self, x: _End, y: _End, q: Quantile, exclude: tuple[str, str] | None = None
    ) -> tuple[float, Method, tuple[str, ...]] | None:
        """The anchored estimate (before uplift) between two ends, or None without anchors.
        ``exclude``: a measured pair used as if it were not measured."""
        nb = self._nb[q]
        cands: list[tuple[float, float, tuple[str, ...]]] = []
        for d_b, b in x.anchors:
            row = nb.get(b, {})
            for d_a, a in y.anchors:
                off = d_b + d_a
                if a == b:
                    cands.append((off, self._local[q] + self._access * off, (a,)))
                elif exclude is None or _key(a, b) != exclude:
                    m = row.get(a)
                    if m is not None:
                        cands.append((off, m + self._access * off, (b, a)))
        if not cands:
            return None
        cands.sort(key=lambda c: (c[0], c[1]))
        _, value, via = min(cands[: self._k], key=lambda c: c[1])
        return value, ("local" if len(via) == 1 else "anchored"), via

    def _capped_chain(
        self, x: _End, y: _End, q: Quantile, km: float | None, exclude: tuple[str, str] | None = None
    ) -> tuple[float, Method, tuple[str, ...]] | None:
        """The anchored estimate where it is tighter than the distance envelope (before uplift)."""
        chain = self._chain(x, y, q, exclude)
        if chain is None or km is None:
            return chain
        return (min(chain[0], self._envelope[q].at(km)), chain[1], chain[2])

    def _estimate(self, x: _End, y: _End, q: Quantile) -> Estimate:
        if x.site is not None and y.site is not None and x.site != y.site:
            hit = self._pairs.get(_key(x.site, y.site))
            if hit is not None:
                return Estimate(hit[0] if q == "p50" else hit[1], "measured", "measured", (x.site, y.site))
        last_mile = self._last_mile * ((x.site is None) + (y.site is None))
        km = haversine_km(x.point, y.point) if x.point is not None and y.point is not None else None
        chain = self._capped_chain(x, y, q, km)
        if chain is not None:
            value, method, via = chain
            if q == "p95":
                value *= 1.0 + self._uplift
            return Estimate(value + last_mile, "estimated", method, via)
        if km is None:
            missing = x.site if x.point is None else y.site
            raise ValueError(f"site {missing!r} has no coordinates; cannot estimate latency")
        return Estimate(self._fallback[q].at(km) + last_mile, "estimated", "distance")

    def _calibrate_uplift(self) -> float:
        """The ``coverage`` quantile of measured/estimated - 1 over the measured pairs, each
        estimated as if it were not measured (leave-one-pair-out)."""
        ratios = []
        for (a, b), (_, p95) in self._pairs.items():
            x, y = self._end(a), self._end(b)
            km = haversine_km(x.point, y.point) if x.point is not None and y.point is not None else None
            chain = self._capped_chain(x, y, "p95", km, exclude=(a, b))
            if chain is not None and chain[0] > 0:
                ratios.append(p95 / chain[0] - 1.0)
        if not ratios:
            return 0.0
        return max(0.0, float(np.quantile(ratios, self._coverage)))


def combine_measurements(
    rows: Iterable[Mapping[str, Any] | Sequence[Any]],
) -> dict[tuple[str, str], tuple[float, float]]:
    """Unordered pair -> (p50, p95). Several rows of a pair (both directions, several imports):
    the median of their p50s and the highest p95; a pair without a p95 uses its p50."""
    p50s: dict[tuple[str, str], list[float]] = {}
    p95s: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        src, dst, p50, p95 = _row_fields(row)
        if src == dst or p50 is None:
            continue
        key = _key(src, dst)
        p50s.setdefault(key, []).append(p50)
        if p95 is not None:
            p95s.setdefault(key, []).append(p95)
    out = {}
    for key, vals in sorted(p50s.items()):
        p50 = float(np.median(vals))
        out[key] = (p50, max([p50, *p95s.get(key, [])]))
    return out
