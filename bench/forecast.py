"""Forecast benchmark on the shared real traces (Azure VM CPU, Bitbrains Rnd).

Holds out the last day (288 x 5 min) of every series, trains one global model on the
rest, and prints one comparable figure per line:

    <trace> <metric> <value>

Targets (issue 5): MAE <= 0.9 x seasonal-naive and below the best heuristic on each
trace; p95 coverage 90-98 %; training on ~500k rows < 60 s; inference >= 200k rows/s.

    python bench/forecast.py [--data ../shared/data] [--recursive]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from broker.forecast.evaluate import evaluate
from broker.forecast.features import fast_forecast_rows
from broker.forecast.history import Panel, parse_long_frame, regularize
from broker.forecast.model import TrainParams

REPO = Path(__file__).resolve().parents[1]
TRACES = {
    "azure": ("traces/azure_v1_vm_cpu_5min.csv.gz", "t_offset_s", "cpu_avg_pct"),
    "bitbrains": ("traces/bitbrains_rnd_2013-08_5min.csv.gz", "timestamp_unix_s", "cpu_usage_pct"),
}


def load(data: Path, trace: str) -> Panel:
    path, ts, value = TRACES[trace]
    raw = pd.read_csv(data / path, usecols=["series_id", ts, value])
    frame, numeric = parse_long_frame(raw.rename(columns={ts: "timestamp", value: "value"}))
    return regularize(frame, step_s=300, numeric_time=numeric)


def inference_rate(ev_model: object, panel: Panel, horizon: int) -> float:
    """Rows per second for batch inference (features + prediction) over every series, repeated."""
    from broker.forecast.model import ForecastModel

    assert isinstance(ev_model, ForecastModel)
    started = time.perf_counter()
    rows = 0
    while time.perf_counter() - started < 2.0:
        blocks = [fast_forecast_rows(y, panel.starts[i], panel.step_s, horizon)[0] for i, y in enumerate(panel.values)]
        x = np.vstack(blocks)
        ev_model.predict_matrix(x)
        rows += len(x)
    return rows / (time.perf_counter() - started)


def predict_only_rate(ev_model: object, n: int = 500_000) -> float:
    from broker.forecast.features import FEATURES
    from broker.forecast.model import ForecastModel

    assert isinstance(ev_model, ForecastModel)
    x = np.random.default_rng(0).normal(1.0, 0.5, size=(n, len(FEATURES))).astype(np.float32)
    started = time.perf_counter()
    ev_model.predict_matrix(x)
    return n / (time.perf_counter() - started)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--horizon", type=int, default=288)
    ap.add_argument("--traces", nargs="*", default=list(TRACES))
    ap.add_argument("--rounds", type=int, default=TrainParams.rounds)
    args = ap.parse_args()
    if not (args.data / "traces").is_dir():
        print(f"skip: no traces under {args.data}", file=sys.stderr)
        return 0
    params = TrainParams(rounds=args.rounds)
    for trace in args.traces:
        panel = load(args.data, trace)
        ev = evaluate(panel, horizon=args.horizon, params=params)
        sn = ev.scores["seasonal_naive"].mae
        for name, s in ev.scores.items():
            print(f"{trace} mae_{name} {s.mae:.4f}")
            print(f"{trace} mae_ratio_to_seasonal_naive_{name} {s.mae / sn:.4f}")
            print(f"{trace} smape_{name} {s.smape:.2f}")
            print(f"{trace} p95_coverage_pct_{name} {s.p95_coverage:.2f}")
        best = min((n for n in ev.scores if n != "xgboost"), key=lambda n: ev.scores[n].mae)
        print(f"{trace} best_heuristic {best}")
        print(f"{trace} mae_ratio_to_best_heuristic {ev.scores['xgboost'].mae / ev.scores[best].mae:.4f}")
        print(f"{trace} train_rows {ev.model.train_rows}")
        print(f"{trace} history_rows {panel.n_points()}")
        print(f"{trace} train_seconds {ev.model.train_seconds:.2f}")
        print(f"{trace} train_cpu_seconds_per_core {ev.model.train_cpu_seconds / 2:.2f}")
        print(f"{trace} inference_rows_per_s_with_features {inference_rate(ev.model, panel, args.horizon):.0f}")
        print(f"{trace} inference_rows_per_s_predict_only {predict_only_rate(ev.model):.0f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
