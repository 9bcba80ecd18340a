"""A tenant's own RTT measurements: validated rows, and how they win over the catalog's figures.

A measurement is ``from`` (a site) -> ``to`` (a site, a ``geo:lat,lon`` point or the name of a
user region of the tenant's requests), with an RTT in ms of one statistic (``p50`` or ``p95``)
and a source. Where a tenant measured the very path a request asks about, in the statistic the
request checks, the measurement is used instead of the catalog's measurement or estimate.
Several measurements of one path and statistic: the median of the p50s, the highest p95.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from broker.core.domain import UserRegion
from broker.core.latency import QUANTILES, Quantile, check_quantile, parse_geo
from broker.errors import InvalidRequest

REGION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\- ]{0,199}$")  # as a request's user region name
MAX_RTT_MS = 10_000.0
MAX_ROWS = 100_000


@dataclass(frozen=True, slots=True)
class Measurement:
    src: str  # site id
    dst: str  # site id, "geo:<lat>,<lon>" (4 decimals) or a user region name
    statistic: Quantile
    rtt_ms: float
    source: str


def geo_key(lat: float, lon: float) -> str:
    """The one spelling of a point measurements and requests are matched on (~10 m)."""
    return f"geo:{round(lat, 4):.4f},{round(lon, 4):.4f}"


def _end(value: str, sites: Container[str], *, may_be_region: bool) -> str:
    """A site id, a normalised geo point or a region name; ValueError with the reason."""
    v = value.strip()
    if v.startswith("geo:"):
        if not may_be_region:
            raise ValueError("must be a site id")
        return geo_key(*parse_geo(v))
    if ":" in v:
        if v not in sites:
            raise ValueError(f"unknown site {v!r}")
        return v
    if may_be_region and REGION_NAME.match(v):
        return v
    raise ValueError(f"{v!r} is neither a site id{', geo:lat,lon nor a user region name' if may_be_region else ''}")


def parse_measurements(
    rows: Sequence[Mapping[str, Any]], sites: Container[str], *, loc: Sequence[str] = ("file",)
) -> list[Measurement]:
    """Validate rows with ``from, to, rtt_ms[, statistic][, source]`` (statistic defaults to
    p50, source to "import"). All or nothing: every bad cell is named in the error."""
    if not rows:
        raise InvalidRequest("no measurements given", errors=[{"loc": [*loc], "msg": "empty"}])
    if len(rows) > MAX_ROWS:
        raise InvalidRequest(f"at most {MAX_ROWS} measurements at once", errors=[{"loc": [*loc], "msg": "too many"}])
    out: list[Measurement] = []
    errors: list[dict[str, Any]] = []
    for i, row in enumerate(rows):

        def bad(col: str, msg: str, i: int = i) -> None:
            errors.append({"loc": [*loc, i, col], "msg": msg})

        src = dst = ""
        try:
            src = _end(str(row.get("from") or ""), sites, may_be_region=False)
        except ValueError as exc:
            bad("from", str(exc))
        try:
            dst = _end(str(row.get("to") or ""), sites, may_be_region=True)
        except ValueError as exc:
            bad("to", str(exc))
        try:
            rtt = float(str(row.get("rtt_ms")).strip())
        except ValueError:
            rtt = math.nan
        if not (math.isfinite(rtt) and 0 < rtt <= MAX_RTT_MS):
            bad("rtt_ms", f"must be a number in (0, {MAX_RTT_MS:g}]")
        stat: Quantile = "p50"
        try:
            stat = check_quantile(str(row.get("statistic") or "p50").strip())
        except ValueError:
            bad("statistic", f"must be one of {', '.join(QUANTILES)}")
        source = str(row.get("source") or "import").strip()
        if len(source) > 200:
            bad("source", "at most 200 characters")
        if src and dst and src == dst:
            bad("to", "a site to itself")
        if len(errors) == 0:
            out.append(Measurement(src, dst, stat, rtt, source))
    if errors:
        raise InvalidRequest(f"{len(errors)} invalid value(s) in the measurements; nothing stored", errors=errors)
    return out


def combine(measurements: Iterable[Measurement], quantile: Quantile) -> dict[tuple[str, str], float]:
    """(site, end) -> value in one statistic; a site-to-site pair under both orders."""
    values: dict[tuple[str, str], list[float]] = {}
    for m in measurements:
        if m.statistic != quantile:
            continue
        keys = [(m.src, m.dst)] + ([(m.dst, m.src)] if ":" in m.dst and not m.dst.startswith("geo:") else [])
        for k in keys:
            values.setdefault(k, []).append(m.rtt_ms)
    pick = np.median if quantile == "p50" else np.max
    return {k: float(pick(v)) for k, v in values.items()}


def region_key(u: UserRegion) -> list[str]:
    """The ends a measurement may name to mean this user region: its name, its site or its point."""
    keys = [u.name]
    if u.site is not None:
        keys.append(u.site)
    elif u.lat is not None and u.lon is not None:
        keys.append(geo_key(u.lat, u.lon))
    return keys


def apply_measurements(
    user_rtt: Mapping[str, npt.NDArray[np.float64]],
    regions: Iterable[UserRegion],
    measurements: Iterable[Measurement],
    site_index: Mapping[str, int],
    quantile: Quantile,
) -> dict[str, npt.NDArray[np.float64]]:
    """``user_rtt`` (region -> RTT from every site) with the tenant's measurements in place of the
    catalog's figures. Arrays without a measurement are returned as they are (not copied)."""
    table = combine(measurements, quantile)
    out = dict(user_rtt)
    if not table:
        return out
    by_end: dict[str, list[tuple[int, float]]] = {}
    for (src, dst), v in table.items():
        if src in site_index:
            by_end.setdefault(dst, []).append((site_index[src], v))
    for u in regions:
        if u.name not in out:
            continue
        # the point or site first, then the region's name: a measurement naming the region wins
        hits = [h for k in reversed(region_key(u)) for h in by_end.get(k, [])]
        if not hits:
            continue
        arr = np.array(out[u.name], dtype=np.float64)  # a copy: the catalog's arrays are shared
        for idx, v in hits:
            arr[idx] = v
        arr.flags.writeable = False
        out[u.name] = arr
    return out


def lookup(measurements: Iterable[Measurement], a: str, b: str, quantile: Quantile) -> float | None:
    """The tenant's measured value between two ends (site ids or ``geo_key`` points), if any."""
    table = combine(measurements, quantile)
    hit = table.get((a, b))
    return hit if hit is not None else table.get((b, a))
