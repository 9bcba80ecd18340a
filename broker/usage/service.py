"""Usage history and forecast models in the store: ingestion (CSV, JSON, Prometheus), training,
versioned models, and the forecasts that size placements."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pandas as pd
from sqlalchemy import CursorResult, delete, func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from broker.db.forecast_models import ForecastModelRow, UsageSampleRow
from broker.db.session import transaction
from broker.errors import InvalidRequest, NotFound
from broker.forecast.history import HistoryError, Panel, parse_long_frame, regularize

if TYPE_CHECKING:  # XGBoost loads only when a model is trained or used, not on every start
    from broker.forecast.model import Forecast, ForecastModel, TrainParams
    from broker.forecast.select import SelectedForecaster

STEP_S = 300


def invalid(exc: HistoryError) -> InvalidRequest:
    return InvalidRequest(exc.detail, errors=exc.errors)


def read_csv(source: str | Path | bytes) -> pd.DataFrame:
    """A long usage CSV as strings (validation happens in parse_long_frame, with line numbers)."""
    try:
        if isinstance(source, bytes):
            return pd.read_csv(io.BytesIO(source), dtype=str, keep_default_na=False, na_values=[""])
        return pd.read_csv(source, dtype=str, keep_default_na=False, na_values=[""])
    except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"cannot read the usage CSV: {exc}", errors=[{"loc": ["file"], "msg": str(exc)}]) from exc


@dataclass(frozen=True)
class ImportSummary:
    rows: int
    series: list[str]
    metrics: list[str]
    replaced: int  # stored samples that the import overwrote (same series, metric, time window)

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "series": self.series, "metrics": self.metrics, "replaced": self.replaced}


def parse_query_range(doc: Mapping[str, Any], *, series_label: str | None, series: str | None) -> pd.DataFrame:
    """A Prometheus HTTP API `query_range` answer (resultType matrix) -> long usage frame."""
    if doc.get("status") != "success" or not isinstance(doc.get("data"), Mapping):
        raise InvalidRequest(
            f"Prometheus answered {doc.get('status')!r}: {doc.get('error', 'no data')}",
            errors=[{"loc": ["prometheus"], "msg": str(doc.get("error", "not a success"))}],
        )
    data = doc["data"]
    if data.get("resultType") != "matrix":
        raise InvalidRequest(
            "query_range must return a matrix", errors=[{"loc": ["prometheus"], "msg": "not a matrix"}]
        )
    result = list(data.get("result", []))
    if series is not None and len(result) > 1:
        raise InvalidRequest(
            f"--series names one series but the query returned {len(result)}; use --series-label",
            errors=[{"loc": ["series"], "msg": "query returned several series"}],
        )
    frames = []
    for item in result:
        labels = dict(item.get("metric", {}))
        if series is not None:
            name = series
        elif series_label is not None:
            name = str(labels.get(series_label, ""))
        else:
            name = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or "series"
        values = item.get("values", [])
        frames.append(
            pd.DataFrame(
                {
                    "series_id": name,
                    "timestamp": [v[0] for v in values],
                    "value": [v[1] for v in values],  # Prometheus sends sample values as strings
                }
            )
        )
    if not frames:
        raise InvalidRequest("the query returned no series", errors=[{"loc": ["query"], "msg": "empty"}])
    return pd.concat(frames, ignore_index=True)


def fetch_prometheus(
    url: str, query: str, *, start: float, end: float, step_s: int = STEP_S, timeout: float = 30.0
) -> dict[str, Any]:
    try:
        r = httpx.get(
            f"{url.rstrip('/')}/api/v1/query_range",
            params={"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s}s"},
            timeout=timeout,
        )
        body: dict[str, Any] = r.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise InvalidRequest(
            f"cannot query Prometheus at {url}: {exc}", errors=[{"loc": ["prometheus"], "msg": str(exc)}]
        ) from exc
    return body


@lru_cache(maxsize=4)
def _load_model(version: int, raw: bytes, description_key: str) -> ForecastModel:
    import json

    from broker.forecast.model import ForecastModel

    return ForecastModel.from_bytes(raw, json.loads(description_key))


class UsageStore:
    """Usage samples and trained models of one database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    # ---- ingestion --------------------------------------------------------------------

    def import_frame(self, raw: pd.DataFrame, *, tenant: str = "default", series: str | None = None) -> ImportSummary:
        """Validate and store samples; a re-import of a window replaces it. All or nothing."""
        if series is not None:
            raw = raw.assign(series_id=series)
        try:
            frames = [parse_long_frame(g, metric=str(m))[0] for m, g in _by_metric(raw)]
        except HistoryError as exc:
            raise invalid(exc) from exc
        frame = pd.concat(frames, ignore_index=True).drop_duplicates(["series_id", "metric", "ts"], keep="last")
        replaced = 0
        with transaction(self.sessions) as s:
            for (sid, metric), g in frame.groupby(["series_id", "metric"]):
                gone: CursorResult[Any] = s.execute(  # type: ignore[assignment]
                    delete(UsageSampleRow).where(
                        UsageSampleRow.tenant == tenant,
                        UsageSampleRow.series == sid,
                        UsageSampleRow.metric == metric,
                        UsageSampleRow.ts.between(int(g["ts"].min()), int(g["ts"].max())),
                    )
                )
                replaced += gone.rowcount or 0
            s.execute(
                insert(UsageSampleRow),
                [
                    {"tenant": tenant, "series": r[0], "metric": r[1], "ts": int(r[2]), "value": float(r[3])}
                    for r in frame[["series_id", "metric", "ts", "value"]].itertuples(index=False)
                ],
            )
        return ImportSummary(
            len(frame), sorted(frame["series_id"].unique()), sorted(frame["metric"].unique()), replaced
        )

    def series_summary(self, name: str, *, tenant: str = "default") -> dict[str, Any]:
        with self.sessions() as s:
            rows = s.execute(
                select(UsageSampleRow.metric, func.count(), func.min(UsageSampleRow.ts), func.max(UsageSampleRow.ts))
                .where(UsageSampleRow.tenant == tenant, UsageSampleRow.series == name)
                .group_by(UsageSampleRow.metric)
            ).all()
        if not rows:
            raise NotFound(f"no usage stored for {name!r}")
        return {
            "series": name,
            "metrics": {m: {"samples": int(c), "first_ts": int(a), "last_ts": int(b)} for m, c, a, b in rows},
        }

    def history(self, names: Iterable[str], metric: str, *, tenant: str = "default") -> Panel | None:
        with self.sessions() as s:
            rows = s.execute(
                select(UsageSampleRow.series, UsageSampleRow.ts, UsageSampleRow.value).where(
                    UsageSampleRow.tenant == tenant,
                    UsageSampleRow.series.in_(list(names)),
                    UsageSampleRow.metric == metric,
                )
            ).all()
        if not rows:
            return None
        frame = pd.DataFrame(rows, columns=["series_id", "ts", "value"]).assign(metric=metric)
        return regularize(frame, step_s=STEP_S)

    def all_series(self, metric: str, *, tenant: str = "default") -> list[str]:
        with self.sessions() as s:
            return list(
                s.scalars(
                    select(UsageSampleRow.series)
                    .where(UsageSampleRow.tenant == tenant, UsageSampleRow.metric == metric)
                    .distinct()
                )
            )

    # ---- models -----------------------------------------------------------------------

    def train(
        self,
        *,
        metric: str = "cpu",
        horizon: int = 288,
        params: TrainParams | None = None,
        tenant: str = "default",
        progress: Callable[[str], None] = lambda _m: None,
    ) -> dict[str, Any]:
        """Evaluate on a hold-out of the last `horizon` points, then select, calibrate and train on
        everything (broker.forecast.select) and store the model with its selection."""
        panel = self.history(self.all_series(metric, tenant=tenant), metric, tenant=tenant)
        if panel is None:
            raise NotFound(f"no usage stored for metric {metric!r}")
        from broker.forecast.evaluate import evaluate
        from broker.forecast.select import SelectParams, fit_selected

        try:
            ev = evaluate(panel, horizon=horizon, params=params, select=SelectParams(), progress=progress)
            progress("backtesting, selecting and training the final model on all history")
            fitted = fit_selected(panel, horizon=horizon, params=params)
        except HistoryError as exc:
            raise invalid(exc) from exc
        metrics = {name: vars(sc) for name, sc in ev.scores.items()}
        return self.save_model(
            fitted.model,
            metric=metric,
            n_series=len(panel),
            metrics=metrics,
            selection=fitted.describe(),
            tenant=tenant,
        )

    def save_model(
        self,
        model: ForecastModel,
        *,
        metric: str,
        n_series: int,
        metrics: dict[str, Any],
        selection: dict[str, Any] | None = None,
        tenant: str = "default",
    ) -> dict[str, Any]:
        """Store a model trained on `tenant`'s usage: it forecasts for that tenant only."""
        with transaction(self.sessions) as s:
            row = ForecastModelRow(
                tenant=tenant,
                metric=metric,
                horizon=model.horizon,
                step_s=model.step_s,
                n_series=n_series,
                train_rows=model.train_rows,
                description={**model.describe(), **({"selection": selection} if selection else {})},
                metrics=metrics,
                booster=model.to_bytes(),
            )
            s.add(row)
            s.flush()
            return _model_summary(row)

    def list_models(self, *, tenant: str = "default") -> list[dict[str, Any]]:
        """The tenant's model versions, newest first."""
        with self.sessions() as s:
            rows = s.scalars(
                select(ForecastModelRow)
                .where(ForecastModelRow.tenant == tenant)
                .order_by(ForecastModelRow.version.desc())
            )
            return [_model_summary(r) for r in rows]

    def latest_selected(self, metric: str, *, tenant: str = "default") -> tuple[int, SelectedForecaster] | None:
        """The tenant's newest model of the metric with the selection stored beside it (none for
        models stored before selection existed: they serve as the model alone, docs/forecast.md).
        Another tenant's model is never used: it learned from that tenant's usage."""
        import json

        from broker.forecast.select import SelectedForecaster

        with self.sessions() as s:
            row = s.scalars(
                select(ForecastModelRow)
                .where(ForecastModelRow.tenant == tenant, ForecastModelRow.metric == metric)
                .order_by(ForecastModelRow.version.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            model = _load_model(row.version, bytes(row.booster), json.dumps(row.description))
            return row.version, SelectedForecaster.from_description(model, row.description.get("selection"))

    def forecast(
        self, panel: Panel, *, metric: str, horizon: int, tenant: str = "default"
    ) -> tuple[int | None, list[Forecast]]:
        """Forecasts of the selected forecaster of the tenant's newest model of the metric; without
        one, the documented baseline."""
        found = self.latest_selected(metric, tenant=tenant)
        if found is None or found[1].model.step_s != panel.step_s:
            return None, [_fallback(panel, i, horizon) for i in range(len(panel))]
        version, selected = found
        return version, selected.forecast(panel, horizon)


def _fallback(panel: Panel, i: int, horizon: int) -> Forecast:
    """No trained model: p50 = weekly median of the slot, p95 = its backtested band, never below
    the highest value seen in the last day (sizing must not undercut observed peaks)."""
    from broker.forecast import baselines
    from broker.forecast.features import steps_per_day
    from broker.forecast.model import Forecast

    y = panel.values[i]
    day = steps_per_day(panel.step_s)
    p50, p95 = baselines.with_p95(baselines.weekly_median, y, horizon, day)
    recent = y[-day:]
    if np.isfinite(recent).any():
        p95 = np.maximum(p95, float(np.nanmax(recent)))
    mae = baselines.backtest_mae(baselines.weekly_median, y, day)
    return Forecast(panel.ids[i], p50, p95, "fallback:weekly_median", "weekly_median", mae)


def _by_metric(raw: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    if "metric" not in raw.columns:
        return [("cpu", raw)]
    metric = raw["metric"].fillna("cpu").astype(str).str.strip().replace("", "cpu")
    return [(str(m), g) for m, g in raw.assign(metric=metric).groupby("metric", sort=True)]


def _model_summary(row: ForecastModelRow) -> dict[str, Any]:
    return {
        "version": row.version,
        "tenant": row.tenant,
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "metric": row.metric,
        "horizon": row.horizon,
        "step_s": row.step_s,
        "n_series": row.n_series,
        "train_rows": row.train_rows,
        "train_seconds": row.description.get("train_seconds"),
        "metrics": row.metrics,
    }
