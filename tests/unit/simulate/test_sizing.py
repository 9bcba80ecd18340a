"""The broker policy's sizing: a calibrated headroom covers what a held-out horizon showed."""

from __future__ import annotations

import numpy as np
import pytest

from broker.forecast.baselines import median_last_week, with_p95
from broker.simulate.fleet import STEPS_PER_DAY
from broker.simulate.policies.sizing import MAX_HEADROOM, Sizer, baseline_p95_peak


def _history(days: int = 7) -> np.ndarray:
    """Two steady workloads around 1 core; the second bursts to 6 cores for 10 minutes a day."""
    rng = np.random.default_rng(3)
    h = np.abs(rng.normal(1.0, 0.05, (2, days * STEPS_PER_DAY)))
    h[1, STEPS_PER_DAY // 2 :: STEPS_PER_DAY] = 6.0
    h[1, STEPS_PER_DAY // 2 + 1 :: STEPS_PER_DAY] = 6.0
    return h


def test_a_bursty_workload_gets_the_headroom_its_held_out_peak_needed() -> None:
    h = _history()
    s = Sizer("baseline", STEPS_PER_DAY, 0.2, calibrate=True)
    s.fit(h)
    assert s.headroom_k is not None
    steady, bursty = s.headroom_k.tolist()
    assert steady == pytest.approx(0.2)  # the steady one's p95 covered it: the configured floor
    assert 2.0 < bursty <= MAX_HEADROOM  # its p95 (~1 core) missed the 6-core burst
    rows, reps = np.arange(2), np.array([2, 2])
    plain = Sizer("baseline", STEPS_PER_DAY, 0.2)
    plain.fit(h)
    fixed = plain.cpu(h, rows, reps)
    sized = s.cpu(h, rows, reps)
    assert sized[0] == pytest.approx(fixed[0])
    assert sized[1] == pytest.approx(fixed[1] * (1 + bursty) / 1.2)  # the same p95 peak, a wider headroom
    assert sized[1] * 2 > 4.0 > fixed[1] * 2
    # never past what the user declared for the burst
    capped = s.cpu(h, rows, reps, declared=np.array([4.0, 2.5]))
    assert capped[1] == pytest.approx(2.5) and capped[0] == pytest.approx(fixed[0])


def test_without_a_day_before_the_held_out_horizon_the_configured_headroom_stands() -> None:
    s = Sizer("baseline", STEPS_PER_DAY, 0.2, calibrate=True)
    s.fit(_history(days=1)[:, : STEPS_PER_DAY + 10])
    assert s.headroom_k is not None and s.headroom_k.tolist() == [0.2, 0.2]


@pytest.mark.parametrize("steps", [50, 2 * 288, 2 * 288 + 1, 9 * 288])
def test_baseline_p95_peak_batched_equals_per_series(steps):
    """The batched baseline forecast gives each workload what with_p95(median_last_week) gives it
    alone, gaps (NaN) and all."""
    rng = np.random.default_rng(steps)
    values = rng.gamma(2.0, 1.5, size=(7, steps))
    values[1, rng.random(steps) < 0.3] = np.nan
    values[2, : steps // 2] = np.nan
    values[3, -288:] = np.nan  # nothing to backtest on
    values[4] = np.nan
    got = baseline_p95_peak(values, 288)
    for i, y in enumerate(values):
        _, p95 = with_p95(median_last_week, y, 12, 288)
        assert got[i] == pytest.approx(float(np.max(p95)), rel=1e-12, abs=1e-12), i


def test_the_sizers_baseline_reads_what_with_p95_reads_on_the_whole_history():
    rng = np.random.default_rng(9)
    values = rng.gamma(2.0, 1.5, size=(4, 12 * STEPS_PER_DAY))
    rows = np.array([3, 1])
    got = Sizer("baseline", 12, 0.2).p95_peak(values, rows)
    want = [float(np.max(with_p95(median_last_week, values[k], 12, STEPS_PER_DAY)[1])) for k in rows.tolist()]
    assert got == pytest.approx(want, rel=1e-12)
