"""What every part of the snapshot builder shares: the output columns, the builder log, exact decimals."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pandas as pd

SITE_COLUMNS = [
    "id",
    "provider",
    "kind",
    "region",
    "name",
    "country",
    "jurisdictions",
    "lat",
    "lon",
    "carbon_g_per_kwh",
    "carbon_source",
]
POOL_COLUMNS = [
    "site",
    "instance_type",
    "capacity_type",
    "arch",
    "vcpus",
    "memory_gib",
    "gpus",
    "gpu_model",
    "price_per_hour",
    "price_source",
    "price_as_of",
    "reserved_3yr_per_hour",
]
LATENCY_COLUMNS = ["src", "dst", "rtt_ms", "statistic", "source", "rtt_p95_ms", "samples"]
EGRESS_COLUMNS = ["src", "dst", "usd_per_gb"]
INTERNET_EGRESS_COLUMNS = ["site", "usd_per_gb"]
STORAGE_COLUMNS = ["provider", "tier", "usd_per_gb_month", "product", "source"]


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def note(self, msg: str) -> None:
        self.lines.append(msg)
        print(msg)


# --------------------------------------------------------------------------- readers


def read_csv_str(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def dec(s: str) -> Decimal | None:
    s = s.strip()
    if not s:
        return None
    try:
        return Decimal(s)
    except InvalidOperation:
        return None


def positive_price(s: str) -> bool:
    d = dec(s)
    return d is not None and d > 0


def num(s: str) -> str:
    """Normalise a numeric spec string without changing its value ("16.0" -> "16")."""
    d = dec(s)
    if d is None:
        return "0"
    out = format(d.normalize(), "f")
    return "0" if out in ("-0", "") else out


def dec_str(d: Decimal) -> str:
    return format(d.normalize(), "f")
