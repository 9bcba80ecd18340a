"""Round-trip times between ends: one pair (`GET /v1/latency`) or many at once (`GET
/v1/latency/matrix`, `broker latency matrix`), answered the same way pair by pair: the tenant's own
measurement of the path where it imported one, else the catalog's measurement or estimate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.core.domain import UserRegion
from broker.core.latency import parse_geo
from broker.core.latency_measured import Measurement, combine, geo_key, region_key
from broker.errors import InvalidRequest

# what one matrix call may ask: 201 sites x 8 user regions is 1,608 pairs; every site to every
# site (about 40,000) is a bulk export, not a call (the catalog's latency.csv has the measured ones)
MAX_PAIRS = 10_000

End = str | tuple[float, float]


@dataclass(frozen=True, slots=True)
class Column:
    """One end as the caller named it: `label` (a site id, `geo:lat,lon` or a user region's name),
    where it is, and the ends a measurement may name for it, the one that wins first."""

    label: str
    end: End
    keys: tuple[str, ...]
    user_region: bool = False


def parse_end(value: str, loc: Sequence[str | int], sites: Mapping[str, Any]) -> Column:
    """A site id or `geo:lat,lon`, or a problem naming `loc`."""
    if value.startswith("geo:"):
        try:
            point = parse_geo(value)
        except ValueError as exc:
            raise InvalidRequest(str(exc), errors=[{"loc": list(loc), "msg": str(exc)}]) from exc
        return Column(value, point, (geo_key(*point),))
    if value not in sites:
        raise InvalidRequest(f"unknown site {value!r}", errors=[{"loc": list(loc), "msg": "unknown site"}])
    return Column(value, value, (value,))


def parse_user_regions(request: Mapping[str, Any]) -> list[UserRegion]:
    """The user regions of a stored request document (validated when it was placed)."""
    return [
        UserRegion(str(u["name"]), u.get("lat"), u.get("lon"), u.get("site")) for u in request.get("user_regions") or []
    ]


def user_region_columns(regions: Iterable[UserRegion], sites: Mapping[str, Any]) -> list[Column]:
    """A request's user regions as columns: a measurement naming the region wins, then one at its
    site or point, as in the request's placement (core.latency_measured.apply_measurements)."""
    out = []
    for u in regions:
        end: End = u.site if u.site is not None else (float(u.lat or 0.0), float(u.lon or 0.0))
        if isinstance(end, str) and end not in sites:
            raise InvalidRequest(f"user region {u.name!r}: unknown site {end!r}")
        out.append(Column(u.name, end, tuple(region_key(u)), user_region=True))
    return out


class Pairs:
    """Answers pairs for one tenant and statistic: the measurements are combined once."""

    def __init__(self, model: Any, measurements: Iterable[Measurement], quantile: str) -> None:
        self.model = model  # the catalog's LatencyModel
        self.quantile = quantile
        self.table = combine(measurements, "p95" if quantile == "p95" else "p50")

    def _own(self, src: Column, dst: Column) -> float | None:
        for a in src.keys:
            for b in dst.keys:
                hit = self.table.get((a, b))
                if hit is None:
                    hit = self.table.get((b, a))
                if hit is not None:
                    return hit
        return None

    def answer(self, src: Column, dst: Column) -> dict[str, Any]:
        """The pair's figure, as GET /v1/latency gives it; InvalidRequest when none can be given."""
        out: dict[str, Any] = {"from": src.label, "to": dst.label, "quantile": self.quantile}
        own = self._own(src, dst)
        if own is not None:
            return {**out, "rtt_ms": round(own, 2), "source": "measured", "method": "imported", "via": []}
        try:
            est = self.model.estimate(src.end, dst.end, self.quantile)
        except (KeyError, ValueError) as exc:
            raise InvalidRequest(f"no latency estimate possible: {exc}") from exc
        # method: measured | anchored | local | distance (docs/latency.md)
        return {**out, "rtt_ms": round(est.rtt_ms, 2), "source": est.source, "method": est.method, "via": list(est.via)}

    def matrix(self, sources: Sequence[Column], targets: Sequence[Column]) -> list[dict[str, Any]]:
        """Every source to every target, row by row; a pair without a figure has `rtt_ms` null and
        says why in `detail` (one site without coordinates does not sink the matrix)."""
        rows = []
        for src in sources:
            for dst in targets:
                try:
                    rows.append(self.answer(src, dst))
                except InvalidRequest as exc:
                    rows.append(
                        {
                            "from": src.label,
                            "to": dst.label,
                            "quantile": self.quantile,
                            "rtt_ms": None,
                            "source": None,
                            "method": None,
                            "via": [],
                            "detail": exc.detail,
                        }
                    )
        return rows


def check_size(n_from: int, n_to: int, loc: tuple[str, ...] = ("query",)) -> None:
    """A 422 naming both fields when the matrix would have more than MAX_PAIRS pairs."""
    if n_from * n_to > MAX_PAIRS:
        msg = f"{n_from} from x {n_to} to = {n_from * n_to} pairs; at most {MAX_PAIRS} in one call"
        raise InvalidRequest(
            f"the matrix is too large: {msg}",
            errors=[{"loc": [*loc, "from"], "msg": msg}, {"loc": [*loc, "to"], "msg": msg}],
        )


def matrix_document(
    broker: Any,
    from_: Sequence[str] | None,
    to: Sequence[str] | None,
    placement: str | None,
    quantile: str,
    *,
    tenant: str,
) -> dict[str, Any]:
    """The matrix answer of GET /v1/latency/matrix (and `broker latency matrix`): every `from`
    (default: every site) to every `to` and every user region of the placement's request."""
    from broker.catalog.latency_measurements import MeasurementStore

    cat = broker.catalog()
    if from_:
        sources = [parse_end(v, ("query", "from", i), cat.sites) for i, v in enumerate(from_)]
    else:
        sources = [parse_end(site, ("query", "from"), cat.sites) for site in sorted(cat.sites)]
    targets = [parse_end(v, ("query", "to", i), cat.sites) for i, v in enumerate(to or [])]
    if placement is not None:
        request = broker.get_placement(placement, tenant=tenant).request
        targets += user_region_columns(parse_user_regions(request), cat.sites)
    if not targets:
        raise InvalidRequest(
            "no targets: give `to` (repeatable) or a `placement` whose request has user regions",
            errors=[{"loc": ["query", "to"], "msg": "at least one target"}],
        )
    check_size(len(sources), len(targets))
    pairs = Pairs(cat.latency, MeasurementStore(broker.sessions).for_tenant(tenant), quantile)
    rows = pairs.matrix(sources, targets)
    return {
        "quantile": quantile,
        "from": [c.label for c in sources],
        "to": [c.label for c in targets],
        "user_regions": [c.label for c in targets if c.user_region],
        "max_pairs": MAX_PAIRS,
        "items": rows,
        "total": len(rows),
    }
