"""The learned scheduler: its Gymnasium environment (masks, bounds, determinism, reward), the
saved policy's files and numpy forward pass, and `ppo` / `broker+ppo` as simulator policies."""

from __future__ import annotations

import json

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")  # the dev extra has it; a core-only install skips

from gymnasium.utils.env_checker import check_env  # noqa: E402

from broker.errors import InvalidRequest  # noqa: E402
from broker.simulate.cluster import GONE  # noqa: E402
from broker.simulate.fleet import parse_fleet  # noqa: E402
from broker.simulate.market import build_market  # noqa: E402
from broker.simulate.metrics import summary  # noqa: E402
from broker.simulate.policies.base import Requests  # noqa: E402
from broker.simulate.rl import model as rl_model  # noqa: E402
from broker.simulate.rl.env import Penalties, PlacementEnv, run_episode  # noqa: E402
from broker.simulate.rl.observe import NODE_SLOTS, OBS_SIZE, SLOTS  # noqa: E402
from broker.simulate.run import run_simulation  # noqa: E402

DAYS = 0.25


@pytest.fixture()
def env(fleet_doc, parts, traces):
    fleet = parse_fleet(fleet_doc)
    return PlacementEnv(fleet, build_market(fleet, parts), traces, days=DAYS, start_days=(1, 2, 3))


class RandomAllowed:
    """Picks uniformly among the allowed actions (seeded)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, obs, mask):
        return int(self.rng.choice(np.flatnonzero(mask)))


def _check_allowed(env: PlacementEnv) -> None:
    """Every action the mask offers keeps the hard rules, checked from the market's own tables."""
    d = env._decision
    c = env.replay.c
    m = env.market
    t = m.table
    w = int(c.rep_w[d.replica])
    need = Requests.declared(m).of(w)
    free = c.free(*[getattr(Requests.declared(m), k) for k in ("cpu", "memory_gib", "gpus")])
    for slot in np.flatnonzero(d.mask).tolist():
        if slot < NODE_SLOTS:
            node = int(d.nodes[slot])
            pool = int(c.node_pool[node])
            assert c.node_state[node] != GONE and not c.node_drain[node]
            assert (free[:, node] >= need - 1e-9).all(), "the replica does not fit the node's room"
        else:
            pool = int(d.pools[slot - NODE_SLOTS])
            assert int(t.site_idx[pool]) not in c.down, "a pool at a failed site"
            assert t.vcpus[pool] >= need[0] and t.memory_gib[pool] >= need[1]
        site = int(t.site_idx[pool])
        assert m.residency_ok[w, site] and m.latency_ok[w, site], "residency or a latency SLO broken"
        assert m.hardware_ok[w, pool], "arch or GPU broken"
        spot_ok = any(ct.value == "spot" for ct in m.workloads[w].capacity_types)
        assert spot_ok or t.cap_idx[pool] != 1, "spot for a workload that does not tolerate it"


def test_gymnasium_env_checker_passes(env):
    check_env(env, skip_render_check=True)


def test_masks_offer_only_legal_actions_and_observations_stay_in_bounds(env):
    agent = RandomAllowed(0)
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        done, checked, downs = False, 0, 0
        while not done:
            assert env.observation_space.contains(obs)
            mask = env.action_masks()
            assert mask.shape == (SLOTS,) and mask.any()
            _check_allowed(env)
            downs += bool(env.replay.c.down)
            checked += 1
            obs, _, done, _, _ = env.step(agent.act(obs, mask))
        assert checked > 7  # the opening placement at least
        assert env.illegal_actions == 0
    c = env.replay.c
    on = c.rep_alive[: c.n_reps] & (c.rep_node[: c.n_reps] >= 0)
    pools = c.node_pool[c.rep_node[: c.n_reps][on]]
    assert env.market.feasible[c.rep_w[: c.n_reps][on], pools].all()


def test_an_action_the_mask_forbids_is_replaced_by_an_allowed_one(env):
    env.reset(seed=0)
    forbidden = np.flatnonzero(~env.action_masks())
    assert len(forbidden)
    env.step(int(forbidden[0]))
    assert env.illegal_actions == 1


def test_the_same_seed_gives_the_same_episode_and_another_seed_another(env):
    def episode(seed):
        obs, info = env.reset(seed=seed)
        agent, seen, done = RandomAllowed(seed), [obs.copy()], False
        rewards = []
        while not done:
            obs, r, done, _, _ = env.step(agent.act(obs, env.action_masks()))
            seen.append(obs.copy())
            rewards.append(r)
        return info, np.array(seen), np.array(rewards)

    a, b, other = episode(4), episode(4), episode(5)
    assert a[0] == b[0]
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    assert a[0] != other[0] or len(a[2]) != len(other[2]) or not np.array_equal(a[2], other[2])


def test_an_episodes_rewards_sum_to_minus_its_spend_and_penalties(env):
    """The shaping moves node costs to the decisions that launch them, and adds nothing."""
    env.reset(seed=2)
    total, done, agent = 0.0, False, RandomAllowed(2)
    obs = None
    while not done:
        obs, r, done, _, _ = env.step(agent.act(obs, env.action_masks()))
        total += r
    f = env.figures()
    p = Penalties()
    cost = (
        f.spend_usd
        + p.starved_core_min * f.starved_core_min
        + p.unavailable_replica_min * f.unavailable_replica_min
        + p.slo_violation_replica_min * f.slo_violation_replica_min
    )
    assert f.spend_usd > 0
    assert total == pytest.approx(-cost / 10.0, rel=1e-9)


def _actor(seed: int = 0) -> rl_model.Actor:
    rng = np.random.default_rng(seed)
    layers = ((rng.normal(size=(16, OBS_SIZE)), rng.normal(size=16)), (rng.normal(size=(16, 16)), rng.normal(size=16)))
    return rl_model.Actor(layers=layers, head=(rng.normal(size=(SLOTS, 16)), rng.normal(size=SLOTS)))


def test_a_saved_policy_loads_with_its_card_and_acts_as_saved(tmp_path):
    actor = _actor()
    first = rl_model.save(actor, tmp_path, {"name": "ppo", "timesteps": 10})
    second = rl_model.save(actor, tmp_path, {"name": "ppo", "timesteps": 20})
    assert (first.name, second.name) == ("ppo-v1.npz", "ppo-v2.npz")
    loaded = rl_model.load(tmp_path)  # a folder: its newest version
    assert loaded.version == 2 and loaded.card["timesteps"] == 20
    x = np.random.default_rng(1).uniform(size=OBS_SIZE)
    h = np.tanh(actor.layers[1][0] @ np.tanh(actor.layers[0][0] @ x + actor.layers[0][1]) + actor.layers[1][1])
    expected = actor.head[0] @ h + actor.head[1]
    assert np.allclose(loaded.logits(x), expected, atol=1e-4)  # stored as float32
    mask = np.zeros(SLOTS, dtype=bool)
    mask[[3, 11]] = True
    assert loaded.act(x, mask) == [3, 11][int(np.argmax(expected[[3, 11]]))]


def test_a_policy_of_another_observation_layout_or_no_file_is_refused(tmp_path):
    path = rl_model.save(_actor(), tmp_path, {"name": "ppo"})
    card = json.loads(path.with_suffix(".json").read_text())
    card["obs_layout"] = "v0:older"
    path.with_suffix(".json").write_text(json.dumps(card))
    with pytest.raises(InvalidRequest, match="observation layout"):
        rl_model.load(path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidRequest, match="no trained policy"):
        rl_model.load(tmp_path / "empty")
    with pytest.raises(InvalidRequest, match="missing"):
        rl_model.load(tmp_path / "ppo-v9.npz")


def test_the_shipped_policy_loads_and_acts_only_through_the_mask(env):
    actor = rl_model.load()
    assert actor.card["obs_layout"] and actor.card["timesteps"] > 0 and actor.card["curve"]
    ret, figures = run_episode(env, actor, seed=0)
    assert env.illegal_actions == 0 and figures.decisions > 7
    assert np.isfinite(ret)


def test_ppo_and_broker_ppo_run_in_the_simulator(fleet_doc, parts, traces):
    sim = run_simulation(
        parse_fleet(fleet_doc), parts, traces, policies=["kube-default", "ppo", "broker+ppo"], days=DAYS
    )
    rows = {r.policy: summary(r) for r in sim.runs}
    assert set(rows) == {"kube-default", "ppo", "broker+ppo"}
    for name in ("ppo", "broker+ppo"):
        assert rows[name]["spend_usd"] > 0
        assert rows[name]["slo_violation_replica_min"] == 0.0  # masks keep web within its SLO
    # broker+ppo is the broker with the actor between re-plans: the broker's sizing holds
    broker_ppo = next(r for r in sim.runs if r.policy == "broker+ppo")
    assert broker_ppo.ledger.series["nodes"].min() >= 1
