"""One global XGBoost model across series: direct multi-horizon, quantiles p50 and p95.

Direct (the horizon is a feature and every row is anchored at a real origin) rather
than recursive: a recursive 288-step roll-out would feed its own p50 back 288 times and
needs 288 sequential predictions; direct needs one batch. (Not measured against a
recursive variant here; see docs/forecast.md.)

Rows are weighted by the series scale: the pinball loss is homogeneous, so the loss on
scaled values times the scale equals the loss in original units, which is what MAE
across a fleet measures.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import xgboost as xgb

from broker.forecast import baselines
from broker.forecast.features import (
    FEATURES,
    fast_forecast_rows,
    series_features,
    steps_per_day,
    training_rows,
)
from broker.forecast.history import FloatArray, HistoryError, Panel

QUANTILES = (0.5, 0.95)


@dataclass(frozen=True)
class TrainParams:
    # measured on the shared traces (docs/forecast.md): a lighter model generalises better to a
    # held-out day than 120 rounds on 400k rows (Bitbrains 0.48 vs 0.52 x seasonal-naive)
    rounds: int = 60
    max_depth: int = 7
    learning_rate: float = 0.15
    min_child_weight: float = 20.0
    subsample: float = 0.8
    colsample_bytree: float = 0.8
    max_bin: int = 128
    per_point: int = 1  # random horizons per observed target
    max_rows: int = 200_000  # training rows are subsampled above this (time and generalisation)
    nthread: int = 2
    seed: int = 0
    weight_by_scale: bool = True
    log_target: bool = True  # learn quantiles of log1p(y / scale); quantiles survive monotone maps


@dataclass(frozen=True)
class Forecast:
    series_id: str
    p50: FloatArray
    p95: FloatArray
    method: str  # "xgboost" or "fallback:<baseline>" (too little history)


@dataclass
class ForecastModel:
    booster: xgb.Booster
    horizon: int
    step_s: int
    params: TrainParams
    train_rows: int = 0
    train_seconds: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    train_cpu_seconds: float = 0.0  # process CPU time: comparable on a shared, loaded machine

    @property
    def day(self) -> int:
        return steps_per_day(self.step_s)

    def predict_matrix(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """(rows, 2) scaled p50/p95 for a feature matrix (batch inference)."""
        out = self.booster.inplace_predict(x)
        return np.asarray(out, dtype=np.float32).reshape(len(x), len(QUANTILES))

    def forecast(self, panel: Panel, horizon: int | None = None) -> list[Forecast]:
        """p50/p95 for the next `horizon` steps of every series (one batched prediction)."""
        h = horizon or self.horizon
        if panel.step_s != self.step_s:
            raise HistoryError(
                f"the model was trained on {self.step_s}-second steps, the history has {panel.step_s}",
                [{"loc": ["step_s"], "msg": "step mismatch"}],
            )
        blocks, scales, served = [], [], []
        out: list[Forecast | None] = [None] * len(panel)
        for i, y in enumerate(panel.values):
            if np.isfinite(y).sum() < self.day + 2:
                p50, p95 = baselines.with_p95(baselines.last_value, y, h, self.day)
                p95 = np.maximum(p95, float(np.nanmax(y)) if np.isfinite(y).any() else 0.0)
                out[i] = Forecast(panel.ids[i], p50, p95, "fallback:last_value")
                continue
            rows, scale = fast_forecast_rows(y, panel.starts[i], panel.step_s, h)
            blocks.append(rows)
            scales.append(scale)
            served.append(i)
        if blocks:
            pred = self.predict_matrix(np.vstack(blocks)).astype(np.float64)
            for k, i in enumerate(served):
                raw = pred[k * h : (k + 1) * h]
                p = (np.expm1(raw) if self.params.log_target else raw) * scales[k]
                p50 = np.maximum(p[:, 0], 0.0)
                out[i] = Forecast(panel.ids[i], p50, np.maximum(p[:, 1], p50), "xgboost")
        return [f for f in out if f is not None]

    # ---- persistence (bytes in the database) --------------------------------------------

    def to_bytes(self) -> bytes:
        return bytes(self.booster.save_raw("ubj"))

    def describe(self) -> dict[str, Any]:
        return {
            "horizon": self.horizon,
            "step_s": self.step_s,
            "features": FEATURES,
            "quantiles": list(QUANTILES),
            "params": asdict(self.params),
            "train_rows": self.train_rows,
            "train_seconds": round(self.train_seconds, 2),
            **self.meta,
        }

    @classmethod
    def from_bytes(cls, raw: bytes, description: dict[str, Any]) -> ForecastModel:
        booster = xgb.Booster()
        booster.load_model(bytearray(raw))
        params = TrainParams(**description.get("params", {}))
        return cls(
            booster,
            int(description["horizon"]),
            int(description["step_s"]),
            params,
            int(description.get("train_rows", 0)),
            float(description.get("train_seconds", 0.0)),
        )


def training_matrix(
    panel: Panel, horizon: int, params: TrainParams
) -> tuple[npt.NDArray[np.float32], FloatArray, FloatArray]:
    """(features, scaled targets, weights) over every series with enough history."""
    day = steps_per_day(panel.step_s)
    rng = np.random.default_rng(params.seed)
    xs, ys, ws = [], [], []
    for i, y in enumerate(panel.values):
        if np.isfinite(y).sum() < day + 2:
            continue
        sf = series_features(y, panel.starts[i], panel.step_s, horizon)
        x, t = training_rows(sf, horizon, day=day, per_point=params.per_point, rng=rng)
        xs.append(x)
        ys.append(np.log1p(np.maximum(t, 0.0)) if params.log_target else t)
        ws.append(np.full(len(t), sf.scale if params.weight_by_scale else 1.0))
    if not xs or sum(len(t) for t in ys) == 0:
        raise HistoryError(
            f"too little history to train: every series needs more than a day ({day + 2} steps)",
            [{"loc": ["history"], "msg": "too little history"}],
        )
    x_all, y_all, w_all = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
    if len(y_all) > params.max_rows:
        keep = np.sort(rng.choice(len(y_all), params.max_rows, replace=False))
        x_all, y_all, w_all = x_all[keep], y_all[keep], w_all[keep]
    return x_all, y_all, w_all


def train(panel: Panel, *, horizon: int = 288, params: TrainParams | None = None) -> ForecastModel:
    params = params or TrainParams()
    started, cpu_started = time.perf_counter(), time.process_time()
    x, y, w = training_matrix(panel, horizon, params)
    dtrain = xgb.QuantileDMatrix(x, y, weight=w, feature_names=FEATURES, max_bin=params.max_bin)
    booster = xgb.train(
        {
            "objective": "reg:quantileerror",
            "quantile_alpha": np.array(QUANTILES),
            "tree_method": "hist",
            "max_depth": params.max_depth,
            "learning_rate": params.learning_rate,
            "min_child_weight": params.min_child_weight,
            "subsample": params.subsample,
            "colsample_bytree": params.colsample_bytree,
            "max_bin": params.max_bin,
            # small jobs: one thread; OpenMP barriers cost more than they save on a busy host
            "nthread": params.nthread if len(y) >= 50_000 else 1,
            "seed": params.seed,
        },
        dtrain,
        num_boost_round=params.rounds,
    )
    booster.set_attr(meta=json.dumps({"horizon": horizon, "step_s": panel.step_s}))
    return ForecastModel(
        booster,
        horizon,
        panel.step_s,
        params,
        len(y),
        time.perf_counter() - started,
        train_cpu_seconds=time.process_time() - cpu_started,
    )
