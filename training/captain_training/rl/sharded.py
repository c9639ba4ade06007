"""The RL trainer under ``torchrun`` with FSDP2 (``distributed.strategy: fsdp2``).

Reuses the SFT layout (``sft.distributed``: ``setup_distributed``, ``apply_fsdp2`` with one
shard group per decoder layer, one for the vision tower, the rest at the root; ``sft.checkpoint``:
sharded ``torch.distributed.checkpoint`` saves). Division of work:

* rank 0 hosts the rollout pool and the local endpoint (or talks to the external servers),
  collects the round and broadcasts the episodes to every rank;
* every rank runs the whole round's credit and critic co-training (identical inputs, so
  identical critics) and the policy gradient of its share of the training episodes
  (``run_round(policy_shard=(rank, world_size))``);
* FSDP2 averages gradients over ranks, so the accumulator divides by the global episode
  count over the world size (``ShardedAccumulator``); the step is the single-process step;
* after a step every rank gathers the full state dict and rank 0 synchronises the servers;
* checkpoints: policy and optimiser shards with ``sft.checkpoint.save_checkpoint`` under
  ``policy_shards/``, the critic and counters by rank 0, ``latest.json`` last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from captain_training.rl.update import GradientAccumulator


class PolicyWrapper(torch.nn.Module):
    """Holds the causal LM as ``.model`` (the layout ``apply_fsdp2`` shards) and forwards to it."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, **kwargs: Any) -> Any:
        return self.model(**kwargs)


@dataclass
class ShardedAccumulator(GradientAccumulator):
    """Gradient accumulation whose episode count is the global one, over the world size."""

    ctx: Any = field(default=None, repr=False)

    def episode_count(self) -> float:
        total = self.ctx.sum([float(self.episodes_accumulated)])[0]
        return total / self.ctx.world_size

    def state_dict(self) -> dict[str, Any]:
        """Counters only: the optimiser state is saved as shards."""
        return {"policy_version": self.policy_version, "rounds_accumulated": self.rounds_accumulated,
                "episodes_accumulated": self.episodes_accumulated, "rounds_per_step": self.rounds_per_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy_version = int(state["policy_version"])
        self.rounds_accumulated = int(state["rounds_accumulated"])
        self.episodes_accumulated = int(state["episodes_accumulated"])
        self._apply_warmup()


def shard(model: torch.nn.Module, ctx: Any, precision: str) -> PolicyWrapper:
    """Wrap and shard a Qwen3.5 model with ``sft.distributed.apply_fsdp2``."""
    from captain_training.rl.errors import ConfigError
    from captain_training.sft.distributed import apply_fsdp2

    if not hasattr(getattr(model, "model", None), "language_model"):
        raise ConfigError("distributed.strategy fsdp2 shards Qwen3.5 models (model.language_model layers); "
                          f"{type(model).__name__} is not one")
    wrapper = PolicyWrapper(model.to(ctx.device))
    return apply_fsdp2(wrapper, ctx, precision)


def full_state(wrapper: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded state dict of the wrapped model on the CPU (every rank must call this)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(wrapper, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k.removeprefix("model."): v for k, v in state.items()}


def broadcast(obj: Any, ctx: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    import torch.distributed as dist

    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def save(ctx: Any, run_dir: Path, round_index: int, *, wrapper: torch.nn.Module, accumulator: ShardedAccumulator,
         critic: Any, critic_optimizer: torch.optim.Optimizer, normalizer: Any, extra: dict[str, Any]) -> None:
    """Sharded policy + optimiser, then (rank 0) critic, counters and ``latest.json``."""
    from captain_training.rl.checkpoint import atomic_torch_save, atomic_write_json
    from captain_training.rl.critic import save_critic
    from captain_training.rl.trainer_state import LATEST, round_dir_name
    from captain_training.sft.checkpoint import save_checkpoint

    shards = save_checkpoint(ctx, run_dir / "policy_shards", round_index, wrapper, accumulator.optimizer,
                             {"round": int(round_index)}, keep=2)
    if ctx.is_main:
        sub = run_dir / round_dir_name(round_index)
        save_critic(critic, sub / "critic.pt", optimizer=critic_optimizer)
        atomic_torch_save(sub / "trainer.pt", {"round_index": int(round_index), "accumulator": accumulator.state_dict(),
                                               "normalizer": normalizer.state_dict(), "extra": dict(extra),
                                               "policy_shards": str(shards.relative_to(run_dir))})
        atomic_write_json(run_dir / LATEST, {"round": int(round_index), "path": sub.name})
    ctx.barrier()


def load(run_dir: Path, *, wrapper: torch.nn.Module, accumulator: ShardedAccumulator) -> Any:
    """Restore shards and counters; returns what ``trainer_state.load_checkpoint`` returns."""
    import json

    from captain_training.rl.critic import load_critic
    from captain_training.rl.normalizer import RunningStd
    from captain_training.rl.trainer_state import LATEST, ResumedState
    from captain_training.sft.checkpoint import load_checkpoint

    sub = run_dir / json.loads((run_dir / LATEST).read_text())["path"]
    trainer = torch.load(sub / "trainer.pt", map_location="cpu", weights_only=True)
    load_checkpoint(run_dir / trainer["policy_shards"], wrapper, accumulator.optimizer)
    accumulator.load_state_dict(trainer["accumulator"])
    loaded = load_critic(sub / "critic.pt")
    return ResumedState(round_index=int(trainer["round_index"]), critic=loaded.critic,
                        critic_optimizer_state=loaded.optimizer_state,
                        normalizer=RunningStd.from_state_dict(trainer["normalizer"]),
                        extra=dict(trainer.get("extra") or {}))
