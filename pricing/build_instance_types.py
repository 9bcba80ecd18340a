"""Instance-type facts for the bundled snapshot (``instance_types.csv``), from the shared price catalogs.

Only what a source states: the processor, GPU memory per GPU, bare metal. Family,
generation and size come from the provider's naming scheme at run time
(``broker.core.instance_attributes``), so live-fed types get them too.

Pure standard library + pandas; called by ``pricing.build_snapshot``. Must not import ``broker``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pandas as pd

INSTANCE_TYPE_COLUMNS = ["provider", "instance_type", "processor", "gpu_memory_gib", "bare_metal"]

_MEMORY_SUFFIX = re.compile(r"-(\d+)GB$", re.IGNORECASE)


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _dec(s: str) -> Decimal | None:
    try:
        return Decimal(s.strip()) if s.strip() else None
    except InvalidOperation:
        return None


def _fmt(d: Decimal) -> str:
    return format(d.quantize(Decimal("0.001")).normalize(), "f")


def _per_gpu(total_gib: Decimal | None, count: Decimal | None) -> str:
    """Memory per GPU: the total over the GPU count (a fractional GPU has the fraction's memory)."""
    if total_gib is None or total_gib <= 0 or count is None or count <= 0:
        return ""
    return _fmt(total_gib / max(count, Decimal(1)))


def gcp_accelerator_memory(gcp: pd.DataFrame) -> dict[str, Decimal]:
    """Accelerator name -> GiB per GPU, from the SkyPilot ``GpuInfo`` of GCP's accelerator rows."""
    out: dict[str, Decimal] = {}
    for name, info in zip(gcp["AcceleratorName"], gcp["GpuInfo"], strict=True):
        if not name or not info.startswith("{") or name in out:
            continue
        try:
            mib = ast.literal_eval(info)["Gpus"][0]["MemoryInfo"]["SizeInMiB"]
        except (ValueError, SyntaxError, KeyError, IndexError, TypeError):
            continue
        out[name] = Decimal(int(mib)) / Decimal(1024)
    return out


def model_memory(model: str, table: dict[str, Decimal]) -> Decimal | None:
    """GiB per GPU of a SkyPilot accelerator name: the name's own "-80GB" suffix, else GCP's figure."""
    m = _MEMORY_SUFFIX.search(model)
    if m:
        return Decimal(m.group(1))
    return table.get(model)


def build_instance_types(data: Path, pools: Iterable[dict[str, str]]) -> list[dict[str, str]]:
    """One row per (provider, instance type) of the snapshot's pools that some source states a fact of."""
    priced = {(p["price_source"], p["instance_type"]): p for p in pools}
    rows: dict[tuple[str, str], dict[str, str]] = {}
    aws = _read(data / "pricing" / "aws_ec2_linux_prices.csv")
    for r in aws.drop_duplicates("instance_type").itertuples(index=False):
        key = ("aws", str(r.instance_type))
        if key not in priced:
            continue
        processor = str(r.physical_processor).strip()
        rows[key] = {
            "provider": "aws",
            "instance_type": key[1],
            "processor": "" if processor in ("", "Variable") else processor,
            "gpu_memory_gib": _per_gpu(_dec(str(r.gpu_memory_gib)), _dec(str(r.gpu_count))),
            "bare_metal": "true" if str(r.is_bare_metal) == "True" else "false",
        }
    gcp = _read(data / "pricing" / "gcp_vms.csv")
    memory = gcp_accelerator_memory(gcp)
    for (provider, itype), pool in sorted(priced.items()):
        if provider not in ("azure", "gcp") or not pool["gpu_model"]:
            continue
        per_gpu = model_memory(pool["gpu_model"], memory)
        count = _dec(pool["gpus"])
        if per_gpu is None or count is None or count < 1:
            continue  # a fractional GPU's share of memory is not stated
        rows[(provider, itype)] = {
            "provider": provider,
            "instance_type": itype,
            "processor": "",
            "gpu_memory_gib": _fmt(per_gpu),
            "bare_metal": "",
        }
    return [rows[k] for k in sorted(rows)]
