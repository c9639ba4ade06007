"""The learning check: RL rounds that must raise a policy's success on the simulator.

A policy whose choice depends on its weights (``candidates.py``): the tiny Qwen3.5 behind the
local endpoint scores three candidate cells per request (one solves the tabletop's
``cube_on_plate``, one carries the wrong cube, one never closes the jaw) and samples one in
proportion to its likelihood. Each round rolls out ``group_size`` episodes from each of the
``layouts`` (seeded tabletop layouts) through the real harness (``rollout.collect_episode``:
the MuJoCo tabletop driver, the sandboxed session, the host's success predicate), then runs
``round.run_round`` (credit with the critic, the group term, Eq. 8 on the chosen
completion's token ids and log-probabilities, one optimiser step per round) and copies the
new weights into the endpoint.

Every round reseeds the endpoint's sampler with the same seed (common random numbers), so
two rounds differ only by the policy's weights: with ``advantage_scale = 0`` (the negative
control) the gradient is exactly zero, no step is taken and the success rate cannot move.

``run_learning_check`` returns, per round, the host success rate, the mean probability the
model gives the solving candidate, the chosen candidates, and the sign of every trained
advantage next to its episode's success.
"""

from __future__ import annotations

import copy
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The provider of the tabletop candidates.
PROVIDER = "captain_training.rl.candidates:tabletop_pick_place"


@dataclass(frozen=True)
class LearningConfig:
    """Settings of the learning check.

    Attributes:
        task: a tabletop pick-and-place task with a second cube.
        layouts: seeds of the tabletop layouts (start states; the same every round).
        group_size: rollouts per layout and round (the group of the advantage).
        rounds: rounds (each: rollouts, then one optimiser step; the last round only measures
            unless ``update_last_round``).
        learning_rate: AdamW learning rate of the policy.
        advantage_scale: 1.0; 0.0 is the negative control.
        kl_beta: the k3 KL weight of Eq. 8 (paper: 0.002).
        seed: sampler, critic and model seed.
        threads: torch threads.
    """

    task: str = "tabletop/cube_on_plate"
    layouts: tuple[int, ...] = (101, 102)
    group_size: int = 4
    rounds: int = 3
    update_last_round: bool = False
    # 0.02: at 0.05 the step after an all-success round (every A = 0: the k3 KL gradient alone,
    # normalised by AdamW and carried by its momentum from the previous step) moved the tiny model
    # far enough to drop p(solve) from 0.95 to 0.36; at 0.02 the same rounds gave 0.26 -> 0.89 -> 0.81.
    learning_rate: float = 0.02
    advantage_scale: float = 1.0
    kl_beta: float = 0.002
    seed: int = 0
    threads: int = 1


@dataclass
class LearningResult:
    """Per-round figures of a learning check (index = round)."""

    success: list[float] = field(default_factory=list)
    p_solve: list[float] = field(default_factory=list)
    chosen: list[list[str]] = field(default_factory=list)
    policy_version: list[int] = field(default_factory=list)
    step_skipped: list[bool] = field(default_factory=list)
    #: (host success, advantage) of every trained request
    advantages: list[list[tuple[bool, float]]] = field(default_factory=list)
    round_wall_s: list[float] = field(default_factory=list)

    def advantage_signs_agree(self, tol: float = 1e-9) -> bool:
        """Successes got A > 0 and failures A < 0 wherever a group had both; |A| <= ``tol`` (a group
        of equal outcomes, up to rounding) counts as no credit."""
        return all((a > 0) if ok else (a < 0) for rows in self.advantages for ok, a in rows if abs(a) > tol)

    def to_dict(self) -> dict[str, Any]:
        return {"success": self.success, "p_solve": self.p_solve, "chosen": self.chosen,
                "policy_version": self.policy_version, "step_skipped": self.step_skipped,
                "advantages": self.advantages, "round_wall_s": self.round_wall_s}


def run_learning_check(cfg: LearningConfig | None = None, *, model_dir: str | Path | None = None,
                       out_dir: str | Path | None = None, log: Callable[[str], None] | None = None
                       ) -> LearningResult:
    """Run the learning check (see the module docstring); ``model_dir`` defaults to the tiny Qwen3.5."""
    import torch

    from captain_training.qwen.tiny_model import cached_tiny_model_dir
    from captain_training.rl.critic import CriticConfig, SimulatorCritic, make_optimizer
    from captain_training.rl.endpoint import EndpointConfig, LocalPolicyServer, load_causal_model, load_tokenizer
    from captain_training.rl.normalizer import RunningStd
    from captain_training.rl.policy_loss import PolicyLossConfig
    from captain_training.rl.rollout import RolloutJob, to_rollout_episode
    from captain_training.rl.round import RoundConfig, round_rng, run_round
    from captain_training.rl.start_states import StartState
    from captain_training.rl.update import GradientAccumulator
    from captain_training.rl.workers import make_pool

    cfg = cfg or LearningConfig()
    say = log or (lambda _m: None)
    threads = torch.get_num_threads()
    torch.set_num_threads(int(cfg.threads))
    torch.manual_seed(cfg.seed)
    model_dir = Path(model_dir) if model_dir is not None else cached_tiny_model_dir()
    policy = load_causal_model(model_dir).train()
    reference = copy.deepcopy(policy).eval()
    served = copy.deepcopy(policy).eval()
    for p in [*reference.parameters(), *served.parameters()]:
        p.requires_grad_(False)
    visual = getattr(getattr(policy, "model", None), "visual", None)
    for p in visual.parameters() if visual is not None else ():
        p.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=cfg.learning_rate,
                                  weight_decay=0.0)
    acc = GradientAccumulator.for_model(policy, optimizer, rounds_per_step=1)
    critic = SimulatorCritic(CriticConfig(task_ids=(cfg.task,), seed=cfg.seed))
    critic_opt = make_optimizer(critic)
    normalizer = RunningStd()
    round_cfg = RoundConfig(critic_steps=1, advantage_scale=cfg.advantage_scale,
                            policy=PolicyLossConfig(kl_beta=cfg.kl_beta))
    result = LearningResult()
    tmp = tempfile.TemporaryDirectory(prefix="captain-rl-learning-") if out_dir is None else None
    root = Path(out_dir) if out_dir is not None else Path(tmp.name)
    pool = make_pool("inline")
    server = LocalPolicyServer(EndpointConfig(model_dir=str(model_dir), seed=cfg.seed, threads=cfg.threads),
                               model=served, tokenizer=load_tokenizer(model_dir)).start()
    try:
        options = {"base_url": server.base_url, "model": server.config.served_model_name, "max_tokens": 512,
                   "candidates": PROVIDER}
        for r in range(cfg.rounds):
            t0 = time.monotonic()
            server.generator.manual_seed(int(cfg.seed))  # common random numbers across rounds
            jobs = [RolloutJob(episode_key=f"r{r}-l{layout}-g{g}", group_key=f"r{r}-l{layout}",
                               start=StartState(cfg.task, -1, int(layout)),
                               policy_name="captain_training.rl.policy_client:make_rollout_policy",
                               policy_options={**options, "policy_version": acc.policy_version},
                               out_dir=str(root / f"round_{r}"), max_requests=1, max_physical_actions=20,
                               critic_cut_allowed=False)
                    for layout in cfg.layouts for g in range(cfg.group_size)]
            collected = pool.run(jobs)
            bad = [c.get("error") or c.get("end_reason") for c in collected if not c.get("usable")]
            if bad:
                from captain_training.rl.errors import RLError

                raise RLError(f"learning check round {r}: {len(bad)} unusable episode(s), e.g. {bad[0]}")
            episodes = [to_rollout_episode(c) for c in collected]
            update = r < cfg.rounds - 1 or cfg.update_last_round
            out = run_round(episodes, critic=critic, critic_optimizer=critic_opt,
                            policy=policy if update else None, reference=reference,
                            accumulator=acc if update else None, normalizer=normalizer,
                            rng=round_rng(cfg.seed, r), config=round_cfg, processor=server.processor)
            if out.metrics.get("policy_stepped"):
                server.set_state_dict({k: v.detach().clone() for k, v in policy.state_dict().items()},
                                      acc.policy_version)
            result.success.append(float(np.mean([c["host_success"] for c in collected])))
            result.p_solve.append(float(np.mean([c["candidate_probs"][0]["solve"] for c in collected])))
            result.chosen.append([c["chosen_candidates"][0] for c in collected])
            result.policy_version.append(acc.policy_version)
            result.step_skipped.append(bool(out.metrics.get("policy_step_skipped")) if update else False)
            # the credit of each episode's request (the loss multiplies it by advantage_scale)
            result.advantages.append([(bool(ep.host_success), float(out.advantages[ep.episode_key][0]))
                                      for ep in episodes])
            result.round_wall_s.append(time.monotonic() - t0)
            say(f"round {r}: success {result.success[-1]:.3f}, p(solve) {result.p_solve[-1]:.3f}, "
                f"chosen {result.chosen[-1]}, version {acc.policy_version}, "
                f"skipped {result.step_skipped[-1]}, {result.round_wall_s[-1]:.0f} s")
    finally:
        server.close()
        pool.close()
        torch.set_num_threads(threads)
        if tmp is not None:
            tmp.cleanup()
    return result
