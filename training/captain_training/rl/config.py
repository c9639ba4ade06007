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
from captain_training.rl.start_states import PAPER_WIDE_LAYOUT_FRACTION


@dataclass(frozen=True)
class CriticTrainingConfig:
    """Critic warm start and co-training.

    Attributes:
        init_path: a saved critic to start from (``captain rl critic``); its shape must match
            ``hidden_units`` / ``hidden_layers`` / ``n_members``.
        warm_start_data: request-state JSONL trained on before round 0 of a fresh run
            (``warm_start_epochs`` epochs of ``batch_size`` states; the input normaliser is
            fitted on it unless ``init_path`` gave one).
        learning_rate / weight_decay: AdamW of the warm start and co-training.
        steps_per_round: full-batch co-training steps per round (2).
    """

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

    def __post_init__(self) -> None:
        _check(self.warm_start_epochs >= 1 and self.batch_size >= 1, "critic.warm_start_epochs and "
               "critic.batch_size must be >= 1")
        _check(self.learning_rate > 0 and self.weight_decay >= 0, "critic.learning_rate > 0, weight_decay >= 0")
        _check(self.steps_per_round >= 0, "critic.steps_per_round must be >= 0")
        _check(min(self.hidden_units, self.hidden_layers, self.n_members) >= 1, "critic.hidden_units, "
               "hidden_layers and n_members must be >= 1")


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


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass(frozen=True)
class RolloutConfig:
    """Rollout collection (units in the names; ranges checked).

    Attributes:
        tasks: ``"<suite>/<task>"`` names drawn for start states (required to train).
        official_states: official initial-state indices that may be drawn (``excluded_init_states``
            are removed); LIBERO has 0..49.
        wide_layout_fraction: share of start states that are wide-layout random starts, [0, 1];
            default the paper's mix, 5,600 wide-layout to 1,760 official states (0.761).
        randomize_appearance: light / camera pose / material randomisation on wide layouts.
        pool: ``auto`` | ``inline`` | ``process`` | ``ray`` (see ``workers.py``) | ``ros``
            (running sim stacks, one episode per stack at a time; see ``ros_pool.py``).
        namespaces: with ``pool: ros``, the stacks' namespaces, e.g. ``[/robot1, /robot2]``.
        mode: ``sync`` (collect a round, then update, then sync weights) or ``streaming`` (the
            next round's episodes run on the pool while the learner updates on this one; each
            request records the policy version that answered it and requests more than
            ``max_staleness`` versions behind are dropped and counted). Streaming needs the
            ``process`` or ``ray`` pool.
        workers: rollout processes or Ray actors, >= 1.
        ray_address: a Ray cluster address (None: a local Ray).
        cell_timeout_s: time limit of one code cell, s, > 0.
        max_wall_time_s: wall-time budget of one episode, s, > 0.
        sft_median_actions: per task, the median physical-action count of its SFT episodes
            (over-median action cost; tasks missing here are not charged).
    """

    tasks: tuple[str, ...] = ()
    official_states: tuple[int, ...] = tuple(range(50))
    wide_layout_fraction: float = PAPER_WIDE_LAYOUT_FRACTION
    randomize_appearance: bool = True
    pool: str = "auto"
    namespaces: tuple[str, ...] = ()
    mode: str = "sync"
    workers: int = 1
    ray_address: str | None = None
    cell_timeout_s: float = 120.0
    max_wall_time_s: float = 1080.0
    sft_median_actions: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(0.0 <= self.wide_layout_fraction <= 1.0, "rollout.wide_layout_fraction must be in [0, 1]")
        _check(self.pool in ("auto", "inline", "process", "ray", "ros"),
               f"rollout.pool {self.pool!r} is not one of auto, inline, process, ray, ros")
        _check(self.pool == "ros" or not self.namespaces,
               "rollout.namespaces is read only with rollout.pool ros (the stacks to run episodes on)")
        _check(self.pool != "ros" or bool(self.namespaces),
               "rollout.pool ros needs rollout.namespaces, e.g. [/robot1, /robot2] (running `captain bringup sim "
               "--namespace robot1` stacks)")
        _check(self.pool != "ros" or self.wide_layout_fraction == 0.0,
               "rollout.pool ros needs rollout.wide_layout_fraction: 0 (a stack resets to official initial states)")
        _check(self.workers >= 1, "rollout.workers must be >= 1")
        _check(self.mode in ("sync", "streaming"), f"rollout.mode {self.mode!r} is not one of sync, streaming")
        _check(self.mode == "sync" or self.pool in ("process", "ray", "ros", "auto"),
               "rollout.mode streaming needs rollout.pool process, ray or ros")
        _check(self.cell_timeout_s > 0 and self.max_wall_time_s > 0, "rollout time limits must be > 0 s")
        _check(all("/" in t for t in self.tasks), "rollout.tasks must look like <suite>/<task>, e.g. "
               "libero_goal/3 or tabletop/cube_on_plate")


@dataclass(frozen=True)
class EndpointSettings:
    """The policy server the rollouts talk to.

    Attributes:
        kind: ``local`` (this process serves the policy on 127.0.0.1 from ``sft_model``, with
            token ids and log-probabilities; weights copied in after each optimiser step) or
            ``external`` (an OpenAI-compatible server at ``base_url``, e.g. vLLM; weights pushed
            after each optimiser step by ``weight_sync``).
        weight_sync: how an external server gets new weights (``weight_sync.py``):
            ``collective_rpc`` (vLLM with our worker extension) or ``load_weights``.
        base_url: API root of an external server, e.g. ``http://127.0.0.1:8000/v1``.
        model: served model name.
        max_tokens: completion limit per request, tokens (paper: 4096), >= 1.
        temperature / top_p: sampling (RL: 1.0 / 1.0).
        enable_thinking: thinking channel on.
        request_timeout_s: one HTTP request, s.
        seed: the local server's sampling seed.
        threads: torch threads of the local server (None: torch's default).
        scripted_completions: local server only: python cells whose tool-call completions are
            scored by the model instead of sampled (tests and debugging; see ``endpoint.py``).
    """

    kind: str = "local"
    base_url: str = ""
    model: str = "captain-policy"
    max_tokens: int = 4096
    temperature: float = 1.0
    top_p: float = 1.0
    enable_thinking: bool = True
    request_timeout_s: float = 600.0
    seed: int = 0
    threads: int | None = None
    scripted_completions: tuple[str, ...] = ()
    weight_sync: str = "collective_rpc"

    def __post_init__(self) -> None:
        _check(self.kind in ("local", "external"), f"endpoint.kind {self.kind!r} is not one of local, external")
        _check(self.weight_sync in ("collective_rpc", "load_weights"),
               f"endpoint.weight_sync {self.weight_sync!r} is not one of collective_rpc, load_weights")
        _check(self.kind == "local" or bool(self.base_url), "endpoint.kind external needs endpoint.base_url")
        _check(self.max_tokens >= 1, "endpoint.max_tokens must be >= 1")
        _check(self.temperature > 0 and 0 < self.top_p <= 1, "endpoint: temperature > 0, top_p in (0, 1]")


@dataclass(frozen=True)
class DistributedSettings:
    """Trainer process layout (``sft.distributed``): ``strategy`` auto | single | fsdp2 (under
    torchrun), ``device`` auto | cpu | cuda, ``precision`` bf16 | fp32 (FSDP2 compute dtype)."""

    strategy: str = "auto"
    device: str = "auto"
    precision: str = "bf16"

    def __post_init__(self) -> None:
        _check(self.strategy in ("auto", "single", "fsdp2"), f"distributed.strategy {self.strategy!r} is not one "
               "of auto, single, fsdp2")
        _check(self.device in ("auto", "cpu", "cuda"), f"distributed.device {self.device!r} is not one of "
               "auto, cpu, cuda")
        _check(self.precision in ("bf16", "fp32"), f"distributed.precision {self.precision!r} is not bf16 or fp32")


@dataclass(frozen=True)
class RLConfig:
    """A whole RL run.

    Attributes (beyond the nested sections):
        start_states_per_round: start states per round (64); each rolled out ``group_size`` times.
        rounds_per_step: K, rounds of gradient accumulation per optimiser step (4).
        policy_learning_rate: AdamW learning rate after warm-up (4.24e-6).
        policy_warmup_steps: optimiser steps of linear warm-up: step n < warm-up runs at
            ``policy_learning_rate * (n + 1) / (policy_warmup_steps + 1)`` (0: none).
        max_grad_norm: clip the mean policy gradient to this norm (None: no clipping).
        max_staleness: policy versions a request may lag the trainer (2).
        max_requests / max_physical_actions: episode budgets during RL (60 / 120).
        monitor_every: every n-th episode is a held-out monitor episode (10).
        excluded_init_states: official initial-state indices never drawn (evaluation, 11-16).
        total_rounds: rounds of the whole run (a resumed run stops there), >= 1.
        checkpoint_every: write a checkpoint after every n-th round and after every
            optimiser step, >= 1.
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
    total_rounds: int = 200
    checkpoint_every: int = 1
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    endpoint: EndpointSettings = field(default_factory=EndpointSettings)
    distributed: DistributedSettings = field(default_factory=DistributedSettings)
    critic: CriticTrainingConfig = field(default_factory=CriticTrainingConfig)
    early_stop: EarlyStopConfig = field(default_factory=EarlyStopConfig)
    ladder: LadderConfig = field(default_factory=LadderConfig)
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    costs: CostConfig = field(default_factory=CostConfig)
    returns: ReturnConfig = field(default_factory=ReturnConfig)
    policy_loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)

    def __post_init__(self) -> None:
        _check(self.start_states_per_round >= 1 and self.group_size >= 1,
               "start_states_per_round and group_size must be >= 1")
        _check(self.rounds_per_step >= 1, "rounds_per_step must be >= 1")
        _check(self.policy_learning_rate > 0 and self.policy_warmup_steps >= 0,
               "policy_learning_rate must be > 0 and policy_warmup_steps >= 0")
        _check(self.max_staleness >= 0, "max_staleness must be >= 0")
        _check(self.max_grad_norm is None or self.max_grad_norm > 0, "max_grad_norm must be > 0 (or null)")
        _check(self.max_requests >= 1 and self.max_physical_actions >= 0, "episode budgets must be positive")
        _check(self.monitor_every >= 0, "monitor_every must be >= 0 (0: no monitor episodes)")
        _check(self.total_rounds >= 1 and self.checkpoint_every >= 1, "total_rounds and checkpoint_every must be >= 1")

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


def schema_rows(cls: type = RLConfig, prefix: str = "") -> list[dict[str, Any]]:
    """Every config key with its type and default, nested sections flattened (``critic.steps_per_round``).

    Units are in the key names (``_s``, ``_m``) and meanings and ranges in the section
    docstrings; ``captain rl schema`` prints this table.
    """
    rows: list[dict[str, Any]] = []
    hints = typing.get_type_hints(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        if f.name.startswith("_"):
            continue
        hint = hints[f.name]
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(hint):
            rows.extend(schema_rows(hint, key + "."))
            continue
        value = getattr(defaults, f.name)
        rows.append({"key": key, "type": getattr(hint, "__name__", str(hint)).replace("typing.", ""),
                     "default": json.loads(json.dumps(value, default=list))})
    return rows
