"""One global XGBoost model across series, quantiles p50 and p95, direct or recursive.

Direct (the default): the horizon is a feature and every training row is anchored at a
real origin, so a forecast is one batched prediction. Recursive (`strategy="recursive"`,
kept to measure the choice, docs/forecast.md): a one-step model rolled out step by step,
feeding its own p50 back, one prediction per step.

Rows are weighted by the series scale: the pinball loss is homogeneous, so the loss on
scaled values times the scale equals the loss in original units, which is what MAE
across a fleet measures.

Training holds out the last `horizon` steps of every series as a validation origin (the
task itself: forecast the next day from the end of the history), stops boosting when the
validation loss stops improving, and calibrates p95 there (split conformal: the shift of
the p95 in model space that makes the validation coverage 95 %). It then refits on all
rows with the rounds found, unless `refit=False`.
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
    LEVEL_FEATURES,
    LONG_DAYS,
    RATIO_FEATURES,
    forecast_matrix,
    gather,
    matrix_rows,
    right_aligned,
    series_features,
    series_scale,
    steps_per_day,
    training_rows,
)
from broker.forecast.history import FloatArray, HistoryError, Panel

QUANTILES = (0.5, 0.95)
BASES = ("last", "median_1h", "mean_6h", "median_24h", "median_3d", "median_7d", "median_14d", "slot_median_7d")
STRATEGIES = ("direct", "recursive")


@dataclass(frozen=True)
class TrainParams:
    # measured on the shared traces (docs/forecast.md): the defaults are the best measured
    # trade-off; validation (early stopping, auto base, conformal p95, refit) is opt-in
    rounds: int = 60  # the most boosting rounds (early stopping, when on, may end sooner)
    max_depth: int = 7
    learning_rate: float = 0.15
    min_child_weight: float = 20.0
    subsample: float = 0.8
    colsample_bytree: float = 0.8
    max_bin: int = 128
    per_point: int = 1  # random horizons per observed target (before sub-sampling to max_rows)
    max_rows: int = 200_000  # training rows are subsampled above this (time and generalisation)
    nthread: int = 2
    seed: int = 0
    weight_by_scale: bool = True
    log_target: bool = True  # learn quantiles of log1p(y / scale); quantiles survive monotone maps
    # learn the log ratio to a level known at the origin (value features become log ratios to it
    # too): "auto" trains without a base and with median_14d and keeps the one with the lower
    # MAE on the validation day; a name of BASES fixes it; "" (default) = none. Measured in
    # docs/forecast.md: not better than the default within the noise of one held-out day.
    base: str = ""
    strategy: str = "direct"  # or "recursive" (one-step model rolled out; measured, not the default)
    early_stopping_rounds: int = 0  # on the held-out last horizon of every series; 0 = off
    calibrate: bool = False  # conformal p95 shift from that hold-out (measured: overshoots, off)
    refit: bool = True  # then refit on all rows, the last day included, with the rounds found
    select_rows: int = 150_000  # fitting rows (sub-sampled) for the validation fits
    # validation days: the last `select_days` horizons are held out and each is forecast from
    # its own origin (a rolling-origin backtest); one day alone chose the base unreliably
    select_days: int = 1
    # level-shift features (LEVEL_FEATURES: 1 h/6 h/24 h levels vs the 14-day median and the
    # slot median, the previous day's mean, time into a busy spell); measured in
    # docs/forecast.md: better on Bitbrains' backtest days, a tie on Azure's, so opt-in
    level_features: bool = False
    # forecast combination: p50 = (1 - w) * model p50 + w * the 14-day median (a robust level
    # the trees hedge against on idle-by-default VMs). "auto" chooses w in 0, 0.1, .., 1 on the
    # validation days (rolling origins, `select_days`); a number fixes it; "" = off (w = 0)
    combine: str = ""


@dataclass(frozen=True)
class Forecast:
    series_id: str
    p50: FloatArray
    p95: FloatArray
    method: str  # "xgboost" or "fallback:<baseline>" (too little history, or a stale model)
    # set by the selected forecaster (broker.forecast.select): what produced the p50, its mean
    # absolute error on the backtests before the origin, and whether the series shifted regime
    forecaster: str = ""
    backtest_mae: float | None = None
    regime_shift: bool = False


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
    p95_shift: float = 0.0  # conformal shift of the p95 in model space (log1p of scaled values)
    features: list[str] = field(default_factory=lambda: list(FEATURES))
    base: str = ""  # the level the model learns relative to ("" = none)
    level_weight: float = 0.0  # weight of the 14-day median in the p50 (TrainParams.combine)

    @property
    def day(self) -> int:
        return steps_per_day(self.step_s)

    @property
    def current(self) -> bool:
        """Its features are all computed by this version, as many as the booster reads (a model
        of an older layout is not)."""
        return (
            bool(self.features)
            and set(self.features) <= set(FEATURES)
            and len(self.features) == self.booster.num_features()
        )

    def predict_matrix(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """(rows, 2) model-space p50/p95 (log1p of scaled values, uncalibrated) for a feature
        matrix of every FEATURES column (the model's own columns are picked here)."""
        xin, base = model_inputs(x, self.base)
        xin = select_columns(xin, self.features)
        out = np.asarray(self.booster.inplace_predict(xin), dtype=np.float32).reshape(len(x), len(QUANTILES))
        return out + base[:, None]

    def to_scaled(self, raw: npt.NDArray[np.floating[Any]], x: npt.NDArray[np.float32] | None = None) -> FloatArray:
        """Model outputs (rows, 2) -> scaled p50/p95 (calibrated, p95 >= p50 >= 0); with the
        feature rows `x`, the p50 is combined with their 14-day median (`level_weight`)."""
        out = np.asarray(raw, dtype=np.float64).copy()
        out[:, 1] += self.p95_shift
        if self.params.log_target:
            out = np.expm1(out)
        out[:, 0] = np.maximum(out[:, 0], 0.0)
        if self.level_weight and x is not None:
            out[:, 0] = combined_p50(out[:, 0], x, self.level_weight)
        out[:, 1] = np.maximum(out[:, 1], out[:, 0])
        return out

    def forecast(self, panel: Panel, horizon: int | None = None) -> list[Forecast]:
        """p50/p95 for the next `horizon` steps of every series: one batched prediction (direct)
        or one per step (recursive)."""
        h = horizon or self.horizon
        if panel.step_s != self.step_s:
            raise HistoryError(
                f"the model was trained on {self.step_s}-second steps, the history has {panel.step_s}",
                [{"loc": ["step_s"], "msg": "step mismatch"}],
            )
        out: list[Forecast | None] = [None] * len(panel)
        served = []
        for i, y in enumerate(panel.values):
            if not self.current or np.isfinite(y).sum() < self.day + 2:
                p50, p95 = baselines.with_p95(baselines.last_value, y, h, self.day)
                p95 = np.maximum(p95, float(np.nanmax(y)) if np.isfinite(y).any() else 0.0)
                why = "last_value" if self.current else "stale_model"
                out[i] = Forecast(panel.ids[i], p50, p95, f"fallback:{why}")
            else:
                served.append(i)
        if served:
            values = [panel.values[i] for i in served]
            starts = [panel.starts[i] for i in served]
            if self.params.strategy == "recursive":
                scaled, scales = self._roll_out(values, starts, h)
            else:
                x, scales = forecast_matrix(values, starts, self.step_s, h, self.horizon)
                scaled = self.to_scaled(self.predict_matrix(x), x).reshape(len(served), h, 2)
            for k, i in enumerate(served):
                p = scaled[k] * scales[k]
                out[i] = Forecast(panel.ids[i], p[:, 0], p[:, 1], "xgboost")
        return [f for f in out if f is not None]

    def _roll_out(self, values: list[FloatArray], starts: list[int], steps: int) -> tuple[FloatArray, FloatArray]:
        """Recursive forecast: predict one step for every series, append the p50, repeat."""
        scales = np.array([series_scale(v) for v in values])
        z = right_aligned(values, LONG_DAYS * self.day) / scales[:, None]
        end_s = np.array([s + (len(v) - 1) * self.step_s for s, v in zip(starts, values, strict=True)], np.int64)
        out = np.empty((len(values), steps, 2))
        for k in range(steps):
            x = matrix_rows(z, scales, end_s + k * self.step_s, self.step_s, 1, self.horizon)
            out[:, k] = self.to_scaled(self.predict_matrix(x))
            z = np.concatenate((z[:, 1:], out[:, k, :1]), axis=1)
        return out, scales

    # ---- persistence (bytes in the database) --------------------------------------------

    def to_bytes(self) -> bytes:
        return bytes(self.booster.save_raw("ubj"))

    def describe(self) -> dict[str, Any]:
        return {
            "horizon": self.horizon,
            "step_s": self.step_s,
            "features": self.features,
            "quantiles": list(QUANTILES),
            "params": asdict(self.params),
            "train_rows": self.train_rows,
            "train_seconds": round(self.train_seconds, 2),
            "p95_shift": self.p95_shift,
            "base": self.base,
            "level_weight": self.level_weight,
            **self.meta,
        }

    @classmethod
    def from_bytes(cls, raw: bytes, description: dict[str, Any]) -> ForecastModel:
        booster = xgb.Booster()
        booster.load_model(bytearray(raw))
        known = set(TrainParams.__dataclass_fields__)
        params = TrainParams(**{k: v for k, v in description.get("params", {}).items() if k in known})
        return cls(
            booster,
            int(description["horizon"]),
            int(description["step_s"]),
            params,
            int(description.get("train_rows", 0)),
            float(description.get("train_seconds", 0.0)),
            p95_shift=float(description.get("p95_shift", 0.0)),
            base=str(description.get("base", "")),
            level_weight=float(description.get("level_weight", 0.0)),
            features=list(description.get("features", [])),
        )


# value features that become log ratios to the base level (the rest keep their units)
_LEVELS = [
    i
    for i, f in enumerate(FEATURES)
    if f
    not in {
        "horizon_frac",
        "log_scale",
        "hour_of_day",
        "day_of_week",
        "shift_1h_vs_yday",
        "std_24h",
        "slot_std_7d",
        "regime_days",
        *RATIO_FEATURES,
    }
]


def model_inputs(x: npt.NDArray[np.float32], base_name: str) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(model inputs, base in model space): with a base level, value features become
    log1p(feature) - log1p(base) and the model learns the target relative to the base; the base
    column keeps log1p(base) (the level relative to the series mean)."""
    if not base_name:
        return x, np.zeros(len(x), np.float32)
    col = FEATURES.index(base_name)
    base = np.nan_to_num(np.log1p(np.maximum(x[:, col], 0.0)), nan=0.0).astype(np.float32)
    out = x.copy()
    out[:, _LEVELS] = np.log1p(np.maximum(x[:, _LEVELS], 0.0)) - base[:, None]
    out[:, col] = base
    return out, base


_LEVEL = FEATURES.index("median_14d")
WEIGHTS = np.round(np.linspace(0.0, 1.0, 11), 1)


def combined_p50(p50: FloatArray, x: npt.NDArray[np.float32], weight: float) -> FloatArray:
    """(1 - w) * p50 + w * the 14-day median of each row (scaled units; p50 where it is missing)."""
    level = np.asarray(x[:, _LEVEL], dtype=np.float64)
    return np.where(np.isfinite(level), (1.0 - weight) * p50 + weight * level, p50)


def _level_weight(p50: FloatArray, x: npt.NDArray[np.float32], actual: FloatArray, w: FloatArray) -> float:
    """The weight of WEIGHTS with the lowest weighted MAE on the validation rows (scaled units)."""
    loss = [float(np.sum(w * np.abs(combined_p50(p50, x, c) - actual))) for c in WEIGHTS]
    return float(WEIGHTS[int(np.argmin(loss))])


def model_features(params: TrainParams) -> list[str]:
    return list(FEATURES) if params.level_features else [f for f in FEATURES if f not in LEVEL_FEATURES]


def select_columns(x: npt.NDArray[np.float32], names: list[str]) -> npt.NDArray[np.float32]:
    if names == FEATURES:
        return x
    return x[:, [FEATURES.index(f) for f in names]]


@dataclass
class TrainingData:
    x: npt.NDArray[np.float32]
    y: FloatArray  # model-space targets
    w: FloatArray
    x_val: npt.NDArray[np.float32]  # the held-out last horizon of each series, seen from its origin
    y_val: FloatArray
    w_val: FloatArray


def training_matrix(panel: Panel, horizon: int, params: TrainParams, *, hold_out: bool = False) -> TrainingData:
    """Rows over every series with enough history (sub-sampled to max_rows). With `hold_out`,
    the last `select_days` horizons of each series (when two days precede them) are kept out
    of the fitting rows and become validation rows, each horizon forecast from the origin just
    before it."""
    day = steps_per_day(panel.step_s)
    rng = np.random.default_rng(params.seed)
    one_step = params.strategy == "recursive"
    xs, ys, ws, xv, yv, wv = [], [], [], [], [], []
    for i, y in enumerate(panel.values):
        n = len(y)
        back = horizon * max(1, params.select_days)
        cut = n - back if hold_out and n - back > 2 * day else n
        if np.isfinite(y[:cut]).sum() < day + 2:
            continue
        # features of the part before the cut only: nothing reads the held-out steps
        sf = series_features(y[:cut], panel.starts[i], panel.step_s)
        x, t = training_rows(sf, horizon, day=day, per_point=params.per_point, rng=rng, one_step=one_step)
        weight = sf.scale if params.weight_by_scale else 1.0
        xs.append(x)
        ys.append(t)
        ws.append(np.full(len(t), weight))
        # validation origins: the cut, then one horizon later each (rolling origin), each seen
        # as a forecast from there sees it (features and scale of the history up to it)
        for o in range(cut - 1, n - 1, horizon):
            seen = sf if o == cut - 1 else series_features(y[: o + 1], panel.starts[i], panel.step_s)
            h = np.arange(1, min(horizon, n - 1 - o) + 1, dtype=np.int64)
            ok = np.isfinite(y[o + h])
            xv.append(gather(seen, np.full(int(ok.sum()), o, dtype=np.int64), h[ok], horizon))
            yv.append(y[o + h[ok]] / seen.scale)
            wv.append(np.full(int(ok.sum()), seen.scale if params.weight_by_scale else 1.0))
    if not xs or sum(len(t) for t in ys) == 0:
        raise HistoryError(
            f"too little history to train: every series needs more than a day ({day + 2} steps)",
            [{"loc": ["history"], "msg": "too little history"}],
        )
    x_all, y_all, w_all = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
    if len(y_all) > params.max_rows:
        keep = np.sort(rng.choice(len(y_all), params.max_rows, replace=False))
        x_all, y_all, w_all = x_all[keep], y_all[keep], w_all[keep]

    def target(t: FloatArray) -> FloatArray:
        return np.log1p(np.maximum(t, 0.0)) if params.log_target else t

    empty = np.empty(0)
    return TrainingData(
        x_all,
        target(y_all),
        w_all,
        np.vstack(xv) if xv else np.empty((0, len(FEATURES)), np.float32),
        target(np.concatenate(yv)) if yv else empty,
        np.concatenate(wv) if wv else empty,
    )


def _booster_params(params: TrainParams, rows: int) -> dict[str, Any]:
    return {
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
        "nthread": params.nthread if rows >= 50_000 else 1,
        "seed": params.seed,
    }


def train(panel: Panel, *, horizon: int = 288, params: TrainParams | None = None) -> ForecastModel:
    params = params or TrainParams()
    if params.strategy not in STRATEGIES:
        raise HistoryError(
            f"strategy must be one of {list(STRATEGIES)}", [{"loc": ["strategy"], "msg": "unknown strategy"}]
        )
    if params.base not in ("", "auto", *BASES) or (params.base not in ("", "auto") and not params.log_target):
        raise HistoryError(
            f"base must be auto, empty or one of {list(BASES)} (with log_target), got {params.base!r}",
            [{"loc": ["base"], "msg": "unknown base"}],
        )
    if not _valid_combine(params.combine):
        raise HistoryError(
            f"combine must be empty, auto or a weight in [0, 1], got {params.combine!r}",
            [{"loc": ["combine"], "msg": "unknown combine"}],
        )
    started, cpu_started = time.perf_counter(), time.process_time()
    validate = params.early_stopping_rounds > 0 or params.calibrate or params.base == "auto" or params.combine == "auto"
    level_weight = float(params.combine) if params.combine not in ("", "auto") else 0.0
    data = training_matrix(panel, horizon, params, hold_out=validate)
    rounds, shift = params.rounds, 0.0
    candidates = [params.base]
    if params.base == "auto":
        # free, or anchored to the long robust level: the validation day decides
        candidates = ["", "median_14d"] if params.log_target and len(data.y_val) else [""]
    base_name = candidates[0]
    booster: xgb.Booster | None = None
    if len(data.y_val):
        best = np.inf
        sub = np.arange(len(data.y))
        if params.refit and len(sub) > params.select_rows:
            sub = np.sort(np.random.default_rng(params.seed + 1).choice(len(sub), params.select_rows, replace=False))
        for name in candidates:
            fitted = xgb.train(
                _booster_params(params, len(sub)),
                _dmatrix(data.x[sub], data.y[sub], data.w[sub], params, name),
                num_boost_round=params.rounds,
                evals=[(_dmatrix(data.x_val, data.y_val, data.w_val, params, name, quantised=False), "val")],
                early_stopping_rounds=params.early_stopping_rounds or None,
                verbose_eval=False,
            )
            n = fitted.best_iteration + 1 if params.early_stopping_rounds else params.rounds
            fitted = fitted[:n]
            xin, base = model_inputs(data.x_val, name)
            xin = select_columns(xin, model_features(params))
            raw = np.asarray(fitted.inplace_predict(xin), np.float64).reshape(-1, len(QUANTILES)) + base[:, None]
            loss = _p50_mae(raw[:, 0], data.y_val, data.w_val, log_target=params.log_target)
            if loss < best:
                best, booster, base_name, rounds = loss, fitted, name, n
                if params.combine == "auto":
                    p50 = np.maximum(np.expm1(raw[:, 0]) if params.log_target else raw[:, 0], 0.0)
                    actual = np.expm1(data.y_val) if params.log_target else data.y_val
                    level_weight = _level_weight(p50, data.x_val, actual, data.w_val)
                if params.calibrate and params.strategy == "direct":
                    shift = _conformal_shift(raw[:, 1], data.y_val, QUANTILES[1])
    n_rows = len(data.y)
    if booster is None or params.refit:
        data = training_matrix(panel, horizon, params)
        booster = xgb.train(
            _booster_params(params, len(data.y)), _dmatrix(data.x, data.y, data.w, params, base_name), rounds
        )
        n_rows = len(data.y)
    booster.set_attr(meta=json.dumps({"horizon": horizon, "step_s": panel.step_s}))
    return ForecastModel(
        booster,
        horizon,
        panel.step_s,
        params,
        n_rows,
        time.perf_counter() - started,
        meta={"rounds": rounds, "base_candidates": candidates},
        train_cpu_seconds=time.process_time() - cpu_started,
        p95_shift=shift,
        features=model_features(params),
        base=base_name,
        level_weight=level_weight,
    )


def _valid_combine(combine: str) -> bool:
    if combine in ("", "auto"):
        return True
    try:
        return 0.0 <= float(combine) <= 1.0
    except ValueError:
        return False


def _dmatrix(
    x: npt.NDArray[np.float32],
    y: FloatArray,
    w: FloatArray,
    params: TrainParams,
    base_name: str,
    *,
    quantised: bool = True,
) -> xgb.DMatrix:
    xin, base = model_inputs(x, base_name)
    names = model_features(params)
    xin = select_columns(xin, names)
    if quantised:
        return xgb.QuantileDMatrix(xin, y - base, weight=w, feature_names=names, max_bin=params.max_bin)
    return xgb.DMatrix(xin, y - base, weight=w, feature_names=names)


def _p50_mae(pred: FloatArray, actual: FloatArray, w: FloatArray, *, log_target: bool) -> float:
    """Weighted MAE in scaled units (with scale weights: in original units) of model-space values."""
    if log_target:
        pred, actual = np.expm1(pred), np.expm1(actual)
    return float(np.sum(w * np.abs(np.maximum(pred, 0.0) - actual)))


def _conformal_shift(pred: FloatArray, actual: FloatArray, alpha: float) -> float:
    """Additive shift s with mean(actual <= pred + s) >= alpha on the calibration rows."""
    resid = np.asarray(actual, dtype=np.float64) - np.asarray(pred, dtype=np.float64)
    resid = resid[np.isfinite(resid)]
    if not len(resid):
        return 0.0
    return float(np.quantile(resid, alpha, method="higher"))
