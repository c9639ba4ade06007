"""Resumable RL runs: atomic per-round checkpoints and a per-round metrics log.

Layout of a run directory::

    round_000012/policy.pt    policy weights (state_dict)
    round_000012/critic.pt    critic, its normaliser and AdamW state (``save_critic``)
    round_000012/trainer.pt   accumulator counters + policy optimiser, advantage normaliser,
                              round index
    latest.json               {"round": 12, "path": "round_000012"}, written last
    metrics.jsonl             one JSON line per round

Every file is written atomically, and ``latest.json`` is replaced only after the round's
files are complete, so a crash leaves the previous checkpoint usable. Checkpoint right after
an optimiser step (``accumulator.rounds_accumulated == 0``) to resume exactly: gradients
accumulated in memory are not saved. This single-process form stores full state dicts; a
sharded (FSDP2) trainer saves the policy with torch.distributed.checkpoint instead.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from captain_training.rl.checkpoint import atomic_torch_save, atomic_write_json
from captain_training.rl.critic import SimulatorCritic, load_critic, save_critic
from captain_training.rl.errors import RLError
from captain_training.rl.normalizer import RunningStd
from captain_training.rl.update import GradientAccumulator

LATEST = "latest.json"
METRICS = "metrics.jsonl"


def round_dir_name(round_index: int) -> str:
    return f"round_{round_index:06d}"


def save_checkpoint(run_dir: str | Path, round_index: int, *, policy: torch.nn.Module,
                    accumulator: GradientAccumulator, critic: SimulatorCritic,
                    critic_optimizer: torch.optim.Optimizer, normalizer: RunningStd,
                    extra: dict[str, Any] | None = None) -> Path:
    """Write the state after round ``round_index`` (0-based) and point ``latest.json`` at it."""
    run_dir = Path(run_dir)
    sub = run_dir / round_dir_name(round_index)
    atomic_torch_save(sub / "policy.pt", policy.state_dict())
    save_critic(critic, sub / "critic.pt", optimizer=critic_optimizer)
    atomic_torch_save(sub / "trainer.pt", {
        "round_index": int(round_index),
        "accumulator": accumulator.state_dict(),
        "normalizer": normalizer.state_dict(),
        "extra": dict(extra or {}),
    })
    atomic_write_json(run_dir / LATEST, {"round": int(round_index), "path": sub.name})
    return sub


@dataclass
class ResumedState:
    """What ``load_checkpoint`` restores besides the objects it fills in place."""

    round_index: int
    critic: SimulatorCritic
    critic_optimizer_state: dict[str, Any] | None
    normalizer: RunningStd
    extra: dict[str, Any]


def latest_round(run_dir: str | Path) -> int | None:
    """Round index of the latest complete checkpoint, or None for a fresh run."""
    path = Path(run_dir) / LATEST
    if not path.is_file():
        return None
    return int(json.loads(path.read_text())["round"])


def load_checkpoint(run_dir: str | Path, *, policy: torch.nn.Module, accumulator: GradientAccumulator
                    ) -> ResumedState:
    """Restore policy weights and accumulator (with its optimiser) in place; return the rest."""
    run_dir = Path(run_dir)
    latest = run_dir / LATEST
    if not latest.is_file():
        raise RLError(f"no checkpoint in {run_dir} (missing {LATEST}); start a fresh run instead of resuming")
    pointer = json.loads(latest.read_text())
    sub = run_dir / pointer["path"]
    policy.load_state_dict(torch.load(sub / "policy.pt", map_location="cpu", weights_only=True))
    trainer = torch.load(sub / "trainer.pt", map_location="cpu", weights_only=True)
    accumulator.load_state_dict(trainer["accumulator"])
    loaded = load_critic(sub / "critic.pt")
    return ResumedState(
        round_index=int(trainer["round_index"]), critic=loaded.critic,
        critic_optimizer_state=loaded.optimizer_state,
        normalizer=RunningStd.from_state_dict(trainer["normalizer"]), extra=dict(trainer.get("extra") or {}),
    )


def append_metrics(run_dir: str | Path, round_index: int, metrics: dict[str, float]) -> None:
    """Append one round's metrics as a JSON line (flushed and fsynced)."""
    path = Path(run_dir) / METRICS
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"round": int(round_index), **{k: (None if v != v else v) for k, v in metrics.items()}}
    with path.open("a") as fh:
        fh.write(json.dumps(row, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """All metric rows of a run, in order."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
