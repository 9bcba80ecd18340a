"""Writing a simulation's figures: summary, per-step series and events, each as CSV and Parquet."""

from __future__ import annotations

from pathlib import Path

from broker.simulate.metrics import events_frame, series_frame, summary_frame
from broker.simulate.run import Simulation


def write_results(sim: Simulation, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    frames = {
        "summary": summary_frame(sim.runs),
        "series": series_frame(sim.runs),
        "events": events_frame(sim.runs),
    }
    for name, frame in frames.items():
        csv, parquet = out / f"{name}.csv", out / f"{name}.parquet"
        frame.to_csv(csv, index=False)
        frame.to_parquet(parquet, index=False)
        written += [csv, parquet]
    return written
