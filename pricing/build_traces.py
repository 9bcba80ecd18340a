"""Build the bundled utilisation traces (``pricing/snapshot/usage_traces.csv.gz``) from the shared data.

Usage::

    python -m pricing.build_traces --data /work/shared/data --out pricing/snapshot

The fleet simulator (``broker simulate``, docs/simulate.md) replays these series. One row
per 5-minute step (``step`` 0..4031, 14 days), one column per series and metric:
``<series>:cpu`` is CPU use in percent of the VM's capacity, ``<series>:mem`` memory use in
percent of its capacity (Bitbrains only: the Azure V1 sample has CPU alone). Values are
rounded to 0.1 percentage points; the Bitbrains samples (jittered +-1 s, gaps up to ~66 min)
are binned to the step grid (several samples in a bin averaged) and gaps of up to an hour
interpolated, as broker/forecast/history.py does for usage history; a series with a longer gap
is left out (one: ``bb126:mem``, whose capacity column is zero for a week). Deterministic: sorted columns, gzip
header without a timestamp.

This module must not import ``broker`` (layering: pricing is the bottom layer).
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
import pandas as pd

STEP_S = 300
STEPS = 4032  # 14 days, the window both shared trace files cover
FILE = "usage_traces.csv.gz"


def azure(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, usecols=["series_id", "step", "cpu_avg_pct"])
    wide = df.pivot(index="step", columns="series_id", values="cpu_avg_pct")
    wide = wide.reindex(range(STEPS))
    wide.columns = [f"{c}:cpu" for c in wide.columns]
    return wide


def bitbrains(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path)
    first = int(df["timestamp_unix_s"].min())
    df["step"] = np.rint((df["timestamp_unix_s"] - first) / STEP_S).astype(np.int64)
    df = df[df["step"] < STEPS]
    df["mem_pct"] = df["mem_usage_kb"] / df["mem_capacity_kb"].where(df["mem_capacity_kb"] > 0) * 100.0
    means = df.groupby(["series_id", "step"])[["cpu_usage_pct", "mem_pct"]].mean()
    cpu = means["cpu_usage_pct"].unstack("series_id").reindex(range(STEPS))
    mem = means["mem_pct"].unstack("series_id").reindex(range(STEPS)).clip(upper=100.0)
    cpu.columns = [f"{c}:cpu" for c in cpu.columns]
    mem.columns = [f"{c}:mem" for c in mem.columns]
    return pd.concat([cpu, mem], axis=1)


def build(data: Path) -> pd.DataFrame:
    traces = data / "traces"
    wide = pd.concat(
        [azure(traces / "azure_v1_vm_cpu_5min.csv.gz"), bitbrains(traces / "bitbrains_rnd_2013-08_5min.csv.gz")],
        axis=1,
    )
    wide = wide.interpolate(limit=12, limit_direction="both").clip(lower=0.0).round(1)
    # a replay needs a value at every step: a series with a longer gap is left out, not invented
    wide = wide.loc[:, wide.notna().all()]
    wide = wide.reindex(sorted(wide.columns), axis=1)
    wide.index.name = "step"
    return wide


def write(wide: pd.DataFrame, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / FILE
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        fh.write(wide.to_csv(float_format="%.1f").encode())
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder")
    parser.add_argument("--out", type=Path, default=Path("pricing/snapshot"))
    args = parser.parse_args()
    path = write(build(args.data), args.out)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
