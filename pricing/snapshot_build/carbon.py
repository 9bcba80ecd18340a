"""Grid carbon intensity per region: Cloud Carbon Footprint factors (AWS, Azure) and Google's own figures."""

from __future__ import annotations

import csv
import re
from decimal import Decimal
from pathlib import Path

from pricing.snapshot_build.common import Report, dec, read_csv_str

CCF_COMMIT = "dda7621f8ab227dcb45096af6ccc2227aaf92b3e"


def ccf_factors(path: Path, rep: Report) -> dict[str, tuple[Decimal, str]]:
    """Region (or display name) -> (gCO2e/kWh, note). Repairs the two malformed Azure rows."""
    out: dict[str, tuple[Decimal, str]] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    col = header.index("CO2e (metric ton/kWh)")
    for row in rows[1:]:
        if not row or not row[0].strip():
            continue
        raw = row[col].strip() if len(row) > col else ""
        note = ""
        if re.fullmatch(r"0\d+", raw):
            # Source lost the leading "0." (e.g. "000077" for 0.000077 t/kWh).
            fixed = "0." + raw
            note = f"repaired malformed CCF value '{raw}' -> {fixed}"
            rep.note(f"carbon: {path.name}: {row[0]}: {note}")
            raw = fixed
        d = dec(raw)
        if d is None:
            rep.note(f"carbon: {path.name}: {row[0]}: unparseable value {raw!r}, skipped")
            continue
        out[row[0].strip()] = (d * Decimal(1_000_000), note)
    return out


def gcp_carbon(data: Path) -> dict[str, tuple[Decimal, int]]:
    out: dict[str, tuple[Decimal, int]] = {}
    for year in range(2025, 2018, -1):
        p = data / "carbon" / f"gcp_region_carbon_{year}.csv"
        if not p.exists():
            continue
        df = read_csv_str(p)
        for r in df.itertuples(index=False):
            region = str(r[0]).strip()
            d = dec(str(r[3]))
            if region and d is not None and region not in out:
                out[region] = (d, year)
    return out
