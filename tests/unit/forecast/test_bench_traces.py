"""The forecast benchmark reads the traces in the broker's unit (bench/forecast.py, docs/forecast.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[3]


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_forecast", REPO / "bench" / "forecast.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_traces(root: Path) -> None:
    (root / "traces").mkdir()
    t = 1375308176 + 300 * np.arange(4)
    pd.DataFrame(
        {
            "series_id": ["bb1"] * 4 + ["bb2"] * 4,
            "timestamp_unix_s": np.concatenate([t, t]),
            "cpu_cores": [8] * 4 + [1] * 4,
            "cpu_capacity_mhz": [20_800.0] * 4 + [2_600.0] * 4,
            "cpu_usage_pct": [50.0, 25.0, 100.0, 0.0, 50.0, 10.0, 20.0, 30.0],
            "mem_usage_kb": [1024.0**2] * 4 + [512.0 * 1024] * 4,
        }
    ).to_csv(root / "traces" / "bitbrains_rnd_2013-08_5min.csv.gz", index=False)
    pd.DataFrame(
        {"series_id": ["az1"] * 3, "t_offset_s": [0, 300, 600], "cpu_avg_pct": [5.0, 6.0, 7.0], "cpu_max_pct": 9.0}
    ).to_csv(root / "traces" / "azure_v1_vm_cpu_5min.csv.gz", index=False)


def test_bitbrains_is_read_as_cores_used(tmp_path: Path) -> None:
    # the reference figures weigh VMs by their size: 50 % of 8 cores is 4 cores, 8x 50 % of 1
    write_traces(tmp_path)
    panel = bench().load(tmp_path, "bitbrains")
    assert panel.ids == ["bb1", "bb2"]
    np.testing.assert_allclose(panel.values[0], [4.0, 2.0, 8.0, 0.0])
    np.testing.assert_allclose(panel.values[1], [0.5, 0.1, 0.2, 0.3])
    raw = bench().load(tmp_path, "bitbrains", percent=True)
    np.testing.assert_allclose(raw.values[0], [50.0, 25.0, 100.0, 0.0])


def test_azure_has_no_capacity_and_stays_in_percent(tmp_path: Path) -> None:
    write_traces(tmp_path)
    panel = bench().load(tmp_path, "azure")
    np.testing.assert_allclose(panel.values[0], [5.0, 6.0, 7.0])


def test_bitbrains_memory_is_read_in_gib(tmp_path: Path) -> None:
    write_traces(tmp_path)
    panel = bench().load(tmp_path, "bitbrains_memory")
    np.testing.assert_allclose(panel.values[0], [1.0] * 4)
    np.testing.assert_allclose(panel.values[1], [0.5] * 4)
