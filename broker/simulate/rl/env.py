"""The fleet simulator as a Gymnasium environment: one decision per pending replica.

An episode replays `days` of a fleet from a start day drawn from `start_days` (the training
days; evaluation replays later days no episode saw) with a scenario seed drawn from the
episode's seed: the engine (broker.simulate.engine.Replay) is the one `broker simulate` runs,
the policy's side is `ppo`'s (declared requests, observe.py's candidates and mask, nodes left
empty drained). Observation, action and mask: broker/simulate/rl/observe.py.

Reward (docs/simulate.md): minus each step's spend (USD) and penalties per starved core-minute,
unavailable replica-minute and SLO-violating replica-minute (`Penalties`), divided by
`REWARD_SCALE`. A step's figures go to the decision that preceded them. Decisions take no time,
so a node launched in the opening placement would be paid for only through the rewards of
later, unrelated decisions; the reward is therefore shaped with the potential "minus what the
billed nodes cost until the episode ends at today's prices" (Ng, Harada and Russell 1999): a
launch is charged its remaining node-hours when it is decided, a drain refunds them. With the
discount at 1 the shaping changes no policy's ranking, and an episode's rewards still sum to
minus its spend and penalties exactly (the potential is 0 before the first node and at the end).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pandas as pd

from broker.core.pooltable import BoolArray
from broker.simulate.accounting import STEP_H
from broker.simulate.cluster import GONE
from broker.simulate.engine import Replay
from broker.simulate.events import build_scenario
from broker.simulate.fleet import FleetIn
from broker.simulate.market import Market
from broker.simulate.policies.base import Requests, StepView
from broker.simulate.rl.observe import OBS_SIZE, SLOTS, Decision, Observer, Room, act, drain_empty
from broker.simulate.rl.policy import tenant_weights
from broker.simulate.usage import Usage, build_usage

REWARD_SCALE = 10.0  # USD: rewards of a few units per decision suit PPO's default step sizes


@dataclass(frozen=True)
class Penalties:
    """USD per unit, each weighed against spend (docs/simulate.md: the weights and why)."""

    starved_core_min: float = 0.02
    unavailable_replica_min: float = 0.05
    slo_violation_replica_min: float = 0.05


@dataclass(frozen=True)
class Figures:
    """An episode's totals, as the simulator's summary counts them."""

    spend_usd: float
    starved_core_min: float
    unavailable_replica_min: float
    slo_violation_replica_min: float
    decisions: int


Obs = npt.NDArray[np.float32]


class PlacementEnv(gym.Env[Obs, np.int64]):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        fleet: FleetIn,
        market: Market,
        traces: pd.DataFrame,
        *,
        days: float = 2.0,
        start_days: tuple[int, ...] = (1, 2, 3, 4, 5),
        penalties: Penalties | None = None,
    ) -> None:
        self.fleet, self.market, self.traces = fleet, market, traces
        self.days = days
        self.start_days = start_days
        self.penalties = penalties or Penalties()
        self.req = Requests.declared(market)
        self.observer = Observer(market, market.feasible, tenant_weights(fleet))
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(OBS_SIZE,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(SLOTS)
        self._usage: dict[int, Usage] = {}
        self._run: Generator[Decision, int, None] | None = None
        self._decision: Decision | None = None
        self._cost = 0.0  # spend and penalties accounted since the last decision (USD)
        self._committed = 0.0  # the potential at the last decision (USD, as a cost)
        self.replay: Replay | None = None
        self.illegal_actions = 0
        self.decisions = 0

    # ---- Gymnasium -----------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        start_day = int(options.get("start_day", self.np_random.choice(self.start_days)))
        scenario_seed = int(options.get("scenario_seed", self.np_random.integers(0, 2**31 - 1)))
        fleet = self.fleet.model_copy(update={"seed": scenario_seed, "start_day": start_day})
        if start_day not in self._usage:
            self._usage[start_day] = build_usage(fleet, self.traces, days=self.days)
        scenario = build_scenario(fleet, self.market, days=self.days)
        self.replay = Replay(fleet, self.market, self._usage[start_day], scenario, "ppo")
        self._cost = 0.0
        self._committed = 0.0
        self.illegal_actions = 0
        self.decisions = 0
        self._run = self._episode(self.replay)
        self._decision = next(self._run)  # the opening placement always has replicas to place
        self._committed = self._potential()
        info = {"start_day": start_day, "scenario_seed": scenario_seed}
        return self._decision.obs.astype(np.float32), info

    def step(self, action: np.int64 | int) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if self._run is None or self._decision is None:
            raise RuntimeError("call reset() first")
        a = int(action)
        if not (0 <= a < SLOTS and self._decision.mask[a]):
            # the mask forbids it; a caller that ignores the mask gets the first allowed slot
            self.illegal_actions += 1
            a = int(np.flatnonzero(self._decision.mask)[0])
        before = self._committed
        try:
            self._decision = self._run.send(a)
            terminated = False
        except StopIteration:
            self._decision = None
            terminated = True
        after = 0.0 if terminated else self._potential()
        reward = -(self._cost + after - before) / REWARD_SCALE
        self._cost = 0.0
        self._committed = after
        self.decisions += 1
        obs = np.zeros(OBS_SIZE, dtype=np.float32) if self._decision is None else self._decision.obs.astype(np.float32)
        return obs, float(reward), terminated, False, {}

    def action_masks(self) -> BoolArray:
        """The allowed actions now (sb3-contrib's MaskablePPO reads this)."""
        if self._decision is None:
            return np.ones(SLOTS, dtype=bool)
        return self._decision.mask.copy()

    # ---- the episode ---------------------------------------------------------------

    def _episode(self, replay: Replay) -> Generator[Decision, int, None]:
        c = replay.c
        yield from self._place(replay, replay.opening())
        drain_empty(c)
        replay.opened()
        for step in range(replay.scenario.steps):
            view = replay.begin(step)
            yield from self._place(replay, view)
            drain_empty(c)
            replay.end(step)
            self._cost += self._step_cost(replay, step)

    def _place(self, replay: Replay, view: StepView) -> Generator[Decision, int, None]:
        c = replay.c
        order = self.observer.decide_order(c)
        if len(order) == 0:
            return
        room = Room(c, self.req)
        for r in order.tolist():
            d = self.observer.decision(c, view, r, self.req, room=room)
            if not d.mask.any():
                continue
            action = yield d
            act(c, d, action, room=room)

    def _step_cost(self, replay: Replay, step: int) -> float:
        s = replay.ledger.series
        p = self.penalties
        return float(
            s["spend"][step]
            + p.starved_core_min * s["starved_core_min"][step]
            + p.unavailable_replica_min * s["unavailable_replica_min"][step]
            + p.slo_violation_replica_min * s["slo_violation_replica_min"][step]
        )

    def _potential(self) -> float:
        """What the billed nodes cost from now to the episode's end at the prices of the moment
        (the step under way not yet accounted counts)."""
        assert self.replay is not None
        c = self.replay.c
        n = c.n_nodes
        billed = c.node_state[:n] != GONE
        steps_left = self.replay.scenario.steps - (c.step if not c.instant else 0)
        return float(c.price[c.node_pool[:n][billed]].sum()) * steps_left * STEP_H

    def figures(self) -> Figures:
        """The finished (or current) episode's totals."""
        assert self.replay is not None
        s = self.replay.ledger.series
        return Figures(
            spend_usd=float(s["spend"].sum()),
            starved_core_min=float(s["starved_core_min"].sum()),
            unavailable_replica_min=float(s["unavailable_replica_min"].sum()),
            slo_violation_replica_min=float(s["slo_violation_replica_min"].sum()),
            decisions=self.decisions,
        )


def run_episode(
    env: PlacementEnv, actor: Any, *, seed: int | None = None, options: dict[str, Any] | None = None
) -> tuple[float, Figures]:
    """One episode with `actor` (anything with `act(obs, mask) -> int`) choosing every action:
    the episode's return and its totals."""
    obs, _ = env.reset(seed=seed, options=options)
    total, done = 0.0, False
    while not done:
        obs, reward, done, _, _ = env.step(actor.act(obs, env.action_masks()))
        total += reward
    return total, env.figures()
