"""Training the placement policy with sb3-contrib's MaskablePPO (the `rl` extra), and exporting
its actor as plain files the simulator runs with numpy (broker/simulate/rl/model.py).

Why this stack (bench/RESULTS.md, "Learned scheduler: the training stack"): MaskablePPO is the
maintained PPO with invalid-action masking; with torch's CPU wheel the extra is about 1 GB
installed. sbx (JAX) has no action masking and depends on stable-baselines3, so on torch as well.

Episodes replay the training days only (`start_days`); each evaluation replays a fixed
validation episode, also on training days, with the actor as exported, so the learning curve
shows what the shipped file does. Days after the training days are left for `broker rl evaluate`.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from broker.simulate.fleet import FleetIn
from broker.simulate.market import Market
from broker.simulate.rl.env import REWARD_SCALE, Penalties, PlacementEnv, run_episode
from broker.simulate.rl.model import Actor, save

Progress = Callable[[int, int, dict[str, float] | None], None]  # (timesteps done, in all, last evaluation)


@dataclass(frozen=True)
class TrainConfig:
    timesteps: int = 100_000
    seed: int = 0
    days: float = 2.0
    start_days: tuple[int, ...] = (1, 2, 3, 4, 5)
    validation_start_day: int = 5
    eval_every: int = 10_000
    n_steps: int = 2048
    batch_size: int = 256
    n_epochs: int = 5
    learning_rate: float = 3e-4
    gamma: float = 1.0  # the reward shaping (env.py) keeps every policy's ranking only undiscounted
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    hidden: tuple[int, ...] = (64, 64)
    penalties: Penalties = field(default_factory=Penalties)


class MissingExtra(RuntimeError):
    """Training or plotting without the `rl` extra installed."""

    def __init__(self) -> None:
        super().__init__("training needs the rl extra: pip install -c constraints.txt -e '.[rl]'")


def require_extra() -> None:
    """Raises MissingExtra unless the training stack imports."""
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("sb3_contrib", "stable_baselines3", "torch", "matplotlib")):
        raise MissingExtra()


def export(model: Any) -> Actor:
    """The actor of a MaskablePPO MlpPolicy (policy_net's Linear layers, then action_net)."""
    import torch

    linears = [m for m in model.policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    layers = tuple(
        (lin.weight.detach().cpu().numpy().astype(np.float64), lin.bias.detach().cpu().numpy()) for lin in linears
    )
    head = model.policy.action_net
    return Actor(
        layers=layers, head=(head.weight.detach().cpu().numpy().astype(np.float64), head.bias.detach().cpu().numpy())
    )


def validate(env: PlacementEnv, actor: Actor, config: TrainConfig) -> dict[str, float]:
    options = {"start_day": config.validation_start_day, "scenario_seed": config.seed}
    ret, fig = run_episode(env, actor, options=options)
    return {
        "return": ret,
        "spend_usd": fig.spend_usd,
        "unavailable_replica_min": fig.unavailable_replica_min,
        "starved_core_min": fig.starved_core_min,
        "slo_violation_replica_min": fig.slo_violation_replica_min,
    }


def train(
    fleet: FleetIn,
    market: Market,
    traces: pd.DataFrame,
    config: TrainConfig,
    out: Path,
    *,
    progress: Progress | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Train, export the actor as the next version in `out` with its card; returns the .npz path
    and the card (the learning curve is in the card and plotted beside it as a PNG)."""
    try:
        import sb3_contrib
        import stable_baselines3
        import torch
        from sb3_contrib import MaskablePPO
        from stable_baselines3.common.callbacks import BaseCallback
    except ImportError as exc:
        raise MissingExtra() from exc

    torch.set_num_threads(1)  # a laptop's other core stays free; small networks gain nothing from more
    env = PlacementEnv(
        fleet, market, traces, days=config.days, start_days=config.start_days, penalties=config.penalties
    )
    probe = PlacementEnv(
        fleet, market, traces, days=config.days, start_days=config.start_days, penalties=config.penalties
    )
    curve: list[dict[str, float]] = []
    started, cpu_started = time.perf_counter(), time.process_time()

    class Curve(BaseCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.next_eval = 0

        def _on_step(self) -> bool:
            done = self.num_timesteps
            if done >= self.next_eval:
                self.next_eval += config.eval_every
                point = {"timesteps": float(done), "wall_s": time.perf_counter() - started}
                episodes = [e["r"] for e in self.model.ep_info_buffer] if self.model.ep_info_buffer else []
                point["train_return_mean"] = float(np.mean(episodes)) if episodes else float("nan")
                point.update(validate(probe, export(self.model), config))
                curve.append(point)
                if progress is not None:
                    progress(done, config.timesteps, point)
            elif progress is not None and done % 256 == 0:
                progress(done, config.timesteps, None)
            return True

    model = MaskablePPO(
        "MlpPolicy",
        env,
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        learning_rate=config.learning_rate,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        ent_coef=config.ent_coef,
        policy_kwargs={"net_arch": {"pi": list(config.hidden), "vf": list(config.hidden)}},
        seed=config.seed,
        device="cpu",
        verbose=0,
    )
    callback = Curve()
    model.learn(total_timesteps=config.timesteps, callback=callback)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    actor = export(model)
    final = validate(probe, actor, config)
    curve.append({"timesteps": float(model.num_timesteps), "wall_s": wall, "train_return_mean": float("nan"), **final})
    card: dict[str, Any] = {
        "name": "ppo",
        "fleet": fleet.name,
        "library": f"sb3-contrib {sb3_contrib.__version__} MaskablePPO, stable-baselines3 "
        f"{stable_baselines3.__version__}, torch {torch.__version__}",
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}",
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": {**asdict(config), "reward_scale_usd": REWARD_SCALE},
        "timesteps": int(model.num_timesteps),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "timesteps_per_s": round(model.num_timesteps / max(wall, 1e-9), 1),
        "validation": final,
        "curve": curve,
    }
    path = save(actor, out, card)
    plot_curve(curve, path.with_suffix(".png"), title=f"{path.stem} on {fleet.name}")
    return path, card


def plot_curve(curve: list[dict[str, float]], png: Path, *, title: str) -> None:
    """Validation return, spend and unavailable replica-minutes against timesteps."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingExtra() from exc
    x = [p["timesteps"] for p in curve]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    panels = (
        ("return", "validation return (reward units)"),
        ("spend_usd", "validation spend (USD)"),
        ("unavailable_replica_min", "unavailable replica-min"),
    )
    for ax, (key, label) in zip(axes, panels, strict=True):
        ax.plot(x, [p[key] for p in curve], marker="o", markersize=3)
        ax.set_xlabel("timesteps (decisions)")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].plot(x, [p["train_return_mean"] for p in curve], linestyle="--", label="training episodes (mean)")
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
