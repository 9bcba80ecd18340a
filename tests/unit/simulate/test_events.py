"""The scenario's draws: reproducible per seed, at the rate the risk estimate gives."""

from __future__ import annotations

import numpy as np

from broker.simulate.events import build_scenario, uniform
from broker.simulate.fleet import parse_fleet
from broker.simulate.market import build_market


def test_uniform_is_reproducible_and_uniform():
    a = np.arange(20_000)
    u = uniform(7, a, a % 13, a % 5)
    assert np.array_equal(u, uniform(7, a, a % 13, a % 5))
    assert not np.array_equal(u, uniform(8, a, a % 13, a % 5))
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01
    assert abs(np.quantile(u, 0.1) - 0.1) < 0.01


def test_reclaims_follow_the_hazard(fleet_doc, parts):
    market = build_market(parse_fleet(fleet_doc), parts)
    sc = build_scenario(parse_fleet(fleet_doc), market, days=0.5)
    spot = np.flatnonzero(sc.hazard > 0)
    assert len(spot) and (market.table.cap_idx[spot] == 1).all()
    pool = int(spot[0])
    steps = 400_000
    draws = uniform(sc.seed, np.full(steps, pool), np.arange(steps), np.zeros(steps, dtype=np.int64))
    hits = int((draws < sc.hazard[pool]).sum())
    assert abs(hits / steps - sc.hazard[pool]) < 4 * np.sqrt(sc.hazard[pool] / steps)
    # and reclaimed() is that draw
    assert sc.reclaimed(5, np.array([pool]), np.array([0]))[0] == (draws[5] < sc.hazard[pool])


def test_events_switch_off(fleet_doc, parts):
    for key in ("site_outage", "surge", "spot_price_change", "spot_interruptions"):
        fleet_doc["events"][key]["enabled"] = False
    fleet = parse_fleet(fleet_doc)
    market = build_market(fleet, parts)
    sc = build_scenario(fleet, market, days=0.5)
    assert sc.timeline(market) == []
    assert not sc.hazard.any()
    assert sc.surge(10) == 1.0 and sc.site_down(80) == -1
