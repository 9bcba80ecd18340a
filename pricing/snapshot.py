"""Readers for the bundled catalog snapshot (``pricing/snapshot/``, built by ``build_snapshot``).

Pure: each reader opens a package resource, parses it and caches the result. Strings
that repeat become pandas ``category`` columns; spec numbers are float32; prices stay
float64 (they are decimal strings in the file and round-trip through float64 exactly as
far as ``repr`` goes). Callers must not mutate the cached objects.
"""

from __future__ import annotations

import io
from functools import lru_cache
from importlib import resources
from typing import Any

import pandas as pd

_PACKAGE = "pricing"
_DIR = "snapshot"


def _read_bytes(name: str) -> bytes:
    return resources.files(_PACKAGE).joinpath(_DIR).joinpath(name).read_bytes()


def _read_csv(name: str, dtype: dict[str, Any], compression: str | None = None) -> pd.DataFrame:
    return pd.read_csv(
        io.BytesIO(_read_bytes(name)),
        dtype=dtype,
        keep_default_na=False,
        na_values={k: [""] for k, v in dtype.items() if v not in ("category", "string", str)},
        compression=compression,
    )


def _opt_float(s: str) -> float | None:
    return float(s) if s != "" else None


@lru_cache(maxsize=1)
def read_sites() -> list[dict[str, Any]]:
    """Sites as dicts: id, provider, kind, region, name, country, jurisdictions (tuple),
    lat, lon, carbon_g_per_kwh (float or None), carbon_source."""
    df = pd.read_csv(io.BytesIO(_read_bytes("sites.csv")), dtype=str, keep_default_na=False)
    out: list[dict[str, Any]] = []
    for r in df.to_dict("records"):
        out.append(
            {
                "id": r["id"],
                "provider": r["provider"],
                "kind": r["kind"],
                "region": r["region"],
                "name": r["name"],
                "country": r["country"],
                "jurisdictions": tuple(j for j in str(r["jurisdictions"]).split(";") if j),
                "lat": _opt_float(str(r["lat"])),
                "lon": _opt_float(str(r["lon"])),
                "carbon_g_per_kwh": _opt_float(str(r["carbon_g_per_kwh"])),
                "carbon_source": r["carbon_source"],
            }
        )
    return out


@lru_cache(maxsize=1)
def read_pools() -> pd.DataFrame:
    """One row per site x instance type x capacity type (see SOURCES.md for columns)."""
    return _read_csv(
        "pools.csv.gz",
        {
            "site": "category",
            "instance_type": "category",
            "capacity_type": "category",
            "arch": "category",
            "vcpus": "float32",
            "memory_gib": "float32",
            "gpus": "float32",
            "gpu_model": "category",
            "price_per_hour": "float64",
            "price_source": "category",
            "price_as_of": "category",
            "reserved_3yr_per_hour": "float64",
        },
        compression="gzip",
    )


@lru_cache(maxsize=1)
def read_latency() -> pd.DataFrame:
    """Measured site-to-site RTT, symmetric: src, dst, rtt_ms (the pair's median, float64),
    statistic (of rtt_ms), source, rtt_p95_ms (conservative, float64), samples (figures behind
    the pair). See SOURCES.md."""
    return _read_csv(
        "latency.csv",
        {
            "src": "category",
            "dst": "category",
            "rtt_ms": "float64",
            "statistic": "category",
            "source": "category",
            "rtt_p95_ms": "float64",
            "samples": "int64",
        },
    )


@lru_cache(maxsize=1)
def read_egress() -> pd.DataFrame:
    """Inter-region transfer price: src, dst, usd_per_gb."""
    return _read_csv("egress.csv", {"src": "category", "dst": "category", "usd_per_gb": "float64"})


@lru_cache(maxsize=1)
def read_internet_egress() -> dict[str, float]:
    """site id (or ``<provider>:*`` default) -> USD per GB of internet egress (first paid tier)."""
    df = _read_csv("internet_egress.csv", {"site": "string", "usd_per_gb": "float64"})
    return {str(s): float(v) for s, v in zip(df["site"], df["usd_per_gb"], strict=True)}


@lru_cache(maxsize=1)
def read_storage() -> pd.DataFrame:
    """Block storage list prices: provider, tier, usd_per_gb_month, product, source."""
    return _read_csv(
        "storage.csv",
        {
            "provider": "category",
            "tier": "category",
            "usd_per_gb_month": "float64",
            "product": "string",
            "source": "string",
        },
    )


@lru_cache(maxsize=1)
def read_instance_types() -> dict[tuple[str, str], tuple[str | None, float | None, bool | None]]:
    """(provider, instance type) -> (processor, GPU memory per GPU in GiB, bare metal), None where
    the source does not state it (see SOURCES.md, ``instance_types.csv``)."""
    df = pd.read_csv(io.BytesIO(_read_bytes("instance_types.csv")), dtype=str, keep_default_na=False)
    out: dict[tuple[str, str], tuple[str | None, float | None, bool | None]] = {}
    for prov, it, proc, mem, bare in zip(
        df["provider"], df["instance_type"], df["processor"], df["gpu_memory_gib"], df["bare_metal"], strict=True
    ):
        out[(str(prov), str(it))] = (proc or None, _opt_float(str(mem)), None if bare == "" else bare == "true")
    return out
