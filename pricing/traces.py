"""Reader for the bundled utilisation traces (``pricing/snapshot/usage_traces.csv.gz``, built by
``pricing.build_traces``): one row per 5-minute step, one column per series and metric."""

from __future__ import annotations

import io
from functools import lru_cache
from importlib import resources

import pandas as pd

FILE = "usage_traces.csv.gz"


@lru_cache(maxsize=1)
def read_usage_traces() -> pd.DataFrame:
    """Columns ``<series>:cpu`` / ``<series>:mem`` (percent), index ``step``. Do not mutate."""
    raw = resources.files("pricing").joinpath("snapshot").joinpath(FILE).read_bytes()
    df = pd.read_csv(io.BytesIO(raw), compression="gzip")
    return df.set_index("step").astype("float64")


def series_ids() -> list[str]:
    return sorted({c.rsplit(":", 1)[0] for c in read_usage_traces().columns})
