"""A trained placement policy as plain files, and its forward pass in numpy.

A policy is saved as `ppo-v<N>.npz` (the actor's weights) beside `ppo-v<N>.json` (its card:
the observation layout it was trained on, the library that trained it, the training run's
figures). Versions count up in a directory, as forecast models count up per series: `latest`
reads the highest. The simulator runs the actor with numpy alone (tanh MLP, masked argmax), so
`--policies ppo` needs no training library; training (broker/simulate/rl/train.py) needs the
`rl` extra.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray
from broker.errors import InvalidRequest
from broker.simulate.rl.observe import OBS_LAYOUT, OBS_SIZE, SLOTS

SHIPPED = Path(__file__).resolve().parent / "models"
NAME = re.compile(r"^ppo-v(\d+)\.npz$")


@dataclass(frozen=True)
class Actor:
    """The policy network: hidden tanh layers (`layers`: (weight [out, in], bias [out])), then
    the action head; logits of masked-out actions never win."""

    layers: tuple[tuple[FloatArray, FloatArray], ...]
    head: tuple[FloatArray, FloatArray]
    card: dict[str, Any] = field(default_factory=dict)

    def logits(self, obs: FloatArray) -> FloatArray:
        x = np.asarray(obs, dtype=np.float64)
        for w, b in self.layers:
            x = np.tanh(x @ w.T + b)
        w, b = self.head
        return np.asarray(x @ w.T + b, dtype=np.float64)

    def act(self, obs: FloatArray, mask: BoolArray) -> int:
        """The most likely allowed action (deterministic, as evaluation runs it)."""
        if not mask.any():
            raise ValueError("no action is allowed")
        z = np.where(mask, self.logits(obs), -np.inf)
        return int(np.argmax(z))

    @property
    def version(self) -> int:
        return int(self.card.get("version", 0))


def save(actor: Actor, directory: Path, card: dict[str, Any]) -> Path:
    """Write the next version into `directory`; returns the .npz path."""
    directory.mkdir(parents=True, exist_ok=True)
    version = max(versions(directory), default=0) + 1
    arrays: dict[str, FloatArray] = {}
    for i, (w, b) in enumerate(actor.layers):
        arrays[f"w{i}"], arrays[f"b{i}"] = w.astype(np.float32), b.astype(np.float32)
    arrays["head_w"], arrays["head_b"] = actor.head[0].astype(np.float32), actor.head[1].astype(np.float32)
    path = directory / f"ppo-v{version}.npz"
    np.savez_compressed(path, **arrays)  # type: ignore[arg-type]
    full = {**card, "version": version, "obs_layout": OBS_LAYOUT, "obs_size": OBS_SIZE, "actions": SLOTS}
    path.with_suffix(".json").write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    return path


def versions(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := NAME.match(p.name)))


def latest(directory: Path = SHIPPED) -> Path:
    found = versions(directory)
    if not found:
        raise InvalidRequest(
            f"no trained policy (ppo-v<N>.npz) in {directory}",
            errors=[{"loc": ["model"], "msg": f"no ppo-v<N>.npz in {directory}"}],
        )
    return directory / f"ppo-v{found[-1]}.npz"


def load(path: Path | None = None) -> Actor:
    """A saved policy (default: the newest shipped one). Refused, naming the file, when it is
    missing, unreadable or trained on another observation layout."""
    path = latest() if path is None else path
    if path.is_dir():
        path = latest(path)

    def refuse(msg: str) -> InvalidRequest:
        return InvalidRequest(f"{path}: {msg}", errors=[{"loc": ["model"], "msg": msg}])

    card_path = path.with_suffix(".json")
    try:
        card = json.loads(card_path.read_text())
        with np.load(path) as z:
            arrays = {k: np.asarray(z[k], dtype=np.float64) for k in z.files}
    except FileNotFoundError as exc:
        raise refuse(f"missing {Path(exc.filename).name if exc.filename else 'file'}") from exc
    except (OSError, ValueError) as exc:
        raise refuse(f"not a saved policy ({exc})") from exc
    if card.get("obs_layout") != OBS_LAYOUT:
        raise refuse(f"trained on observation layout {card.get('obs_layout')!r}, this simulator has {OBS_LAYOUT!r}")
    layers = []
    i = 0
    while f"w{i}" in arrays:
        layers.append((arrays[f"w{i}"], arrays[f"b{i}"]))
        i += 1
    if "head_w" not in arrays or not layers:
        raise refuse("no actor weights")
    actor = Actor(layers=tuple(layers), head=(arrays["head_w"], arrays["head_b"]), card=card)
    try:
        out = actor.logits(np.zeros(OBS_SIZE))
    except ValueError as exc:
        raise refuse(f"weights do not chain ({exc})") from exc
    if out.shape != (SLOTS,):
        raise refuse(f"{out.shape[0]} actions, the simulator has {SLOTS}")
    return actor
