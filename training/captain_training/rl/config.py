"""RL configuration by file (YAML or JSON), with defaults from the paper.

Every key is optional; unknown keys are errors that list the valid ones. Example::

    seed: 0
    output_dir: runs/rl-4b
    sft_model: /models/captain-4b-sft
    rounds_per_step: 4
    critic: {init_path: runs/critic-warm/critic.pt, steps_per_round: 2}
    early_stop: {threshold: 0.02, consecutive: 5}
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from captain_training.rl.advantages import AdvantageConfig
from captain_training.rl.errors import ConfigError, RLError
from captain_training.rl.ladder import HARD_TASK_IDS, LADDER_FROM_ROUND, LADDER_SCALE
from captain_training.rl.policy_loss import PolicyLossConfig
from captain_training.rl.returns import CostConfig, ReturnConfig


@dataclass(frozen=True)
class CriticTrainingConfig:
    """Critic warm start and co-training."""

    init_path: str | None = None
    warm_start_data: str | None = None
    warm_start_epochs: int = 20
    batch_size: int = 256
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    steps_per_round: int = 2
    hidden_units: int = 256
    hidden_layers: int = 3
    n_members: int = 5


@dataclass(frozen=True)
class EarlyStopConfig:
    """Critic cut and missed-finish stop (Appendix E)."""

    threshold: float = 0.02
    consecutive: int = 5
    after_request: int = 5
    control_fraction: float = 0.05
    missed_finish_hold_requests: int = 15


@dataclass(frozen=True)
class LadderConfig:
    """Staged subgoal ladder of the hard tasks."""

    from_round: int = LADDER_FROM_ROUND
    scale: float = LADDER_SCALE
    hard_tasks: tuple[str, ...] = tuple(sorted(HARD_TASK_IDS))


@dataclass(frozen=True)
class RLConfig:
    """A whole RL run.

    Attributes (beyond the nested sections):
        start_states_per_round: start states per round (64); each rolled out ``group_size`` times.
        rounds_per_step: K, rounds of gradient accumulation per optimiser step (4).
        policy_learning_rate: AdamW learning rate after warm-up (4.24e-6).
        max_staleness: policy versions a request may lag the trainer (2).
        max_requests / max_physical_actions: episode budgets during RL (60 / 120).
        monitor_every: every n-th episode is a held-out monitor episode (10).
        excluded_init_states: official initial-state indices never drawn (evaluation, 11-16).
    """

    seed: int = 0
    output_dir: str = "runs/rl"
    sft_model: str = ""
    start_states_per_round: int = 64
    group_size: int = 4
    rounds_per_step: int = 4
    policy_learning_rate: float = 4.24e-6
    policy_warmup_steps: int = 0
    max_grad_norm: float | None = None
    max_staleness: int = 2
    max_requests: int = 60
    max_physical_actions: int = 120
    monitor_every: int = 10
    excluded_init_states: tuple[int, ...] = (11, 12, 13, 14, 15, 16)
    critic: CriticTrainingConfig = field(default_factory=CriticTrainingConfig)
    early_stop: EarlyStopConfig = field(default_factory=EarlyStopConfig)
    ladder: LadderConfig = field(default_factory=LadderConfig)
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    costs: CostConfig = field(default_factory=CostConfig)
    returns: ReturnConfig = field(default_factory=ReturnConfig)
    policy_loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (tuples become lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'the config'} must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in {where or 'the config'}; valid keys: {valid}")
    kwargs = {}
    for name, value in data.items():
        hint = hints[name]
        key = f"{where}.{name}" if where else name
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _build(hint, value, key)
        elif typing.get_origin(hint) is tuple and isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError, RLError) as exc:
        raise ConfigError(f"invalid {where or 'config'}: {exc}") from None


def config_from_dict(data: dict[str, Any]) -> RLConfig:
    """Build and validate an ``RLConfig`` from plain data."""
    return _build(RLConfig, data or {}, "")


def load_config(path: str | Path) -> RLConfig:
    """Read a YAML (``.yaml`` / ``.yml``) or JSON file into an ``RLConfig``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no RL config file at {path}")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    elif path.suffix == ".json":
        data = json.loads(text)
    else:
        raise ConfigError(f"config {path} must end in .yaml, .yml or .json")
    return config_from_dict(data or {})
