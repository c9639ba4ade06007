"""One RL round on recorded episodes (paper Algorithm 1, steps 2-5).

Input: the episodes of a round, as the rollout workers record them (``RolloutEpisode``):
per request the features of the hidden snapshot taken before it, what the request did
(``RequestRecord``) and the token ids / log-probabilities the rollout server returned.
The round then

1. evaluates the critic *before* its update on every request state (values for credit,
   and the round's critic AUC / calibration, which are out-of-sample for that critic);
2. computes costs, terminal returns and advantages (Eq. 5-7, 9-10);
3. co-trains the critic on all request states of the round (two AdamW steps);
4. accumulates the policy gradient of Eq. 8 on at most 8 sampled requests per episode,
   dropping requests more than ``max_staleness`` policy versions old;
5. closes the round in the gradient accumulator, which steps every K rounds.

Monitor episodes (the held-out stream) enter the success metrics only: no critic update,
no policy gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from captain_training.rl.advantages import (
    AdvantageConfig,
    EpisodeCreditInput,
    compute_advantages,
    critic_values,
)
from captain_training.rl.critic import SimulatorCritic, cotrain_critic
from captain_training.rl.critic_data import CriticDataset, episode_rows
from captain_training.rl.critic_metrics import critic_report
from captain_training.rl.errors import CreditError
from captain_training.rl.logprobs import completion_logprobs, multimodal_inputs
from captain_training.rl.normalizer import RunningStd
from captain_training.rl.policy_loss import PolicyLossConfig, policy_loss, sample_requests
from captain_training.rl.returns import (
    CostConfig,
    RequestRecord,
    ReturnConfig,
    Termination,
    request_costs,
    terminal_return,
)
from captain_training.rl.update import GradientAccumulator, is_fresh


@dataclass(frozen=True)
class TokenSample:
    """What the rollout server returned for one request (never re-rendered text).

    Attributes:
        prompt_token_ids: the exact prompt ids the server received.
        completion_token_ids: the sampled ids.
        completion_logprobs: log pi_rollout of each sampled id (temperature 1).
        policy_version: the policy version that generated it.
        images: the prompt's image files in prompt order (a multimodal policy: the trainer
            recomputes the server's pixel inputs from them); empty for a text prompt.
    """

    prompt_token_ids: tuple[int, ...]
    completion_token_ids: tuple[int, ...]
    completion_logprobs: tuple[float, ...]
    policy_version: int
    images: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.completion_token_ids) != len(self.completion_logprobs):
            raise CreditError(f"{len(self.completion_token_ids)} completion ids but "
                              f"{len(self.completion_logprobs)} log-probabilities")


@dataclass
class RolloutEpisode:
    """One recorded RL episode.

    Attributes:
        episode_key / group_key / task_id: identity; episodes sharing ``group_key`` were
            rolled out from the same start state.
        features: (T, 36) x(s_1)..x(s_T), the snapshots before each request.
        requests: T request records.
        tokens: T token samples (None for an episode used by the critic only).
        host_success: the benchmark predicate on the final state.
        termination: how it ended.
        ladder_reward: subgoal-ladder reward (0 unless a hard task after the ladder round).
        sft_median_actions: the task's SFT median physical-action count (None: no cost).
        monitor: a held-out monitor episode (metrics only).
    """

    episode_key: str
    group_key: str
    task_id: str
    features: np.ndarray
    requests: list[RequestRecord]
    tokens: list[TokenSample] | None
    host_success: bool
    termination: Termination
    ladder_reward: float = 0.0
    sft_median_actions: float | None = None
    monitor: bool = False

    def __post_init__(self) -> None:
        self.features = np.asarray(self.features, dtype=float)
        self.termination = Termination.parse(self.termination)
        T = len(self.requests)
        if T == 0 or self.features.shape[0] != T:
            raise CreditError(f"episode {self.episode_key}: {self.features.shape[0]} feature rows for "
                              f"{T} requests (need one snapshot before each request, T >= 1)")
        if self.tokens is not None and len(self.tokens) != T:
            raise CreditError(f"episode {self.episode_key}: {len(self.tokens)} token samples "
                              f"for {T} requests")

    @property
    def strict_success(self) -> bool:
        """Host success and ended by an accepted finish()."""
        return self.host_success and self.termination is Termination.FINISH

    @property
    def false_finish(self) -> bool:
        return (not self.host_success) and self.termination is Termination.FINISH


@dataclass(frozen=True)
class RoundConfig:
    """Constants of a round."""

    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    costs: CostConfig = field(default_factory=CostConfig)
    returns: ReturnConfig = field(default_factory=ReturnConfig)
    policy: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    critic_steps: int = 2
    max_staleness: int = 2
    #: multiplies every A_{i,t} in the policy loss (1.0); 0.0 is the negative control of the
    #: learning check: the same rollouts and update path with no policy signal.
    advantage_scale: float = 1.0


def round_rng(seed: int, round_index: int) -> np.random.Generator:
    """The request-sampling generator of a round: a function of (seed, round) only, so resumes repeat it."""
    return np.random.default_rng([int(seed), int(round_index)])


@dataclass
class RoundResult:
    """Metrics of a round and the advantages A_{i,t} it used, by episode key."""

    metrics: dict[str, float]
    advantages: dict[str, np.ndarray] = field(default_factory=dict)


def run_round(episodes: Sequence[RolloutEpisode], *, critic: SimulatorCritic,
              critic_optimizer: torch.optim.Optimizer, policy: torch.nn.Module | None,
              reference: torch.nn.Module | None, accumulator: GradientAccumulator | None,
              normalizer: RunningStd, rng: np.random.Generator, config: RoundConfig | None = None,
              policy_shard: tuple[int, int] = (0, 1), processor: Any = None) -> RoundResult:
    """Run steps 2-5 of Algorithm 1 on one round's episodes.

    ``policy``, ``reference`` and ``accumulator`` may be None to update the critic only.
    ``policy_shard = (rank, world_size)``: with a sharded trainer every rank runs the whole
    round (identical credit and critic update) but computes the policy gradient only for
    the training episodes whose position ``j`` has ``j % world_size == rank``; the request
    sample of every episode is still drawn on every rank, so the union over ranks is the
    single-process update. ``processor``: the processor of a policy that consumes pixels (None
    for a text-only one); each request's images (``TokenSample.images``) then enter the
    log-probabilities as the server computed them.
    """
    rank, world = policy_shard
    if not 0 <= rank < world:
        raise CreditError(f"policy_shard {policy_shard} must be (rank, world_size) with 0 <= rank < world_size")
    cfg = config or RoundConfig()
    if not episodes:
        raise CreditError("a round needs at least one episode")
    train_eps = [ep for ep in episodes if not ep.monitor]
    metrics: dict[str, float] = {
        "episodes": float(len(episodes)),
        "host_success": float(np.mean([ep.host_success for ep in episodes])),
        "strict_success": float(np.mean([ep.strict_success for ep in episodes])),
        "false_finish": float(np.mean([ep.false_finish for ep in episodes])),
        "requests_mean": float(np.mean([len(ep.requests) for ep in episodes])),
        "critic_cut": float(np.mean([ep.termination is Termination.CRITIC_CUT for ep in episodes])),
    }
    if not train_eps:
        return RoundResult(metrics)

    # 2. credit with the critic before this round's update
    credit_inputs, labels, values_all = [], [], []
    for ep in train_eps:
        v_now, v_next = critic_values(critic.value, ep.features, ep.task_id)
        costs = request_costs(ep.requests, ep.sft_median_actions, cfg.costs)
        R = terminal_return(ep.host_success, ep.termination, ep.ladder_reward, cfg.returns)
        credit_inputs.append(EpisodeCreditInput(
            ep.group_key, costs, R, v_now, v_next,
            np.array([r.python_error_only for r in ep.requests], dtype=bool)))
        labels.append(np.full(len(ep.requests), float(ep.host_success)))
        values_all.append(v_now)
    report = critic_report(np.concatenate(labels), np.concatenate(values_all),
                           groups=[ep.group_key for ep in train_eps for _ in ep.requests])
    metrics.update({f"critic_{k}": v for k, v in report.items()})
    advantages = compute_advantages(credit_inputs, normalizer, cfg.advantage)
    result = RoundResult(metrics, {ep.episode_key: a.advantages for ep, a in zip(train_eps, advantages,
                                                                                 strict=True)})
    metrics["return_mean"] = float(np.mean([c.terminal_return for c in credit_inputs]))
    metrics["outcome_mean"] = float(np.mean([a.outcome for a in advantages]))
    metrics["advantage_std_running"] = normalizer.std
    metrics["advantage_abs_mean"] = float(np.mean(np.concatenate([np.abs(a.advantages) for a in advantages])))

    # 3. critic co-training on all request states of the round
    round_data = CriticDataset.concatenate([
        episode_rows(ep.episode_key, ep.task_id, ep.features, ep.host_success, ep.group_key)
        for ep in train_eps])
    cot = cotrain_critic(critic, critic_optimizer, round_data, steps=cfg.critic_steps)
    metrics["critic_loss_before"] = cot.losses[0]
    metrics["critic_loss_after_steps"] = cot.losses[-1]

    # 4. policy gradient on sampled requests
    if policy is None or accumulator is None:
        return result
    if reference is None:
        raise CreditError("the policy update needs the SFT reference model for the KL term")
    totals = {"tokens": 0.0, "kept_tokens": 0.0, "pg_loss": 0.0, "kl_loss": 0.0}
    stale, trained_requests, trained_episodes = 0, 0, 0
    policy.train()
    for j, (ep, adv) in enumerate(zip(train_eps, advantages, strict=True)):
        if ep.tokens is None:
            continue
        idx, weights = sample_requests(len(ep.requests), cfg.policy.max_requests_per_episode, rng)
        if j % world != rank:
            continue
        used = False
        for t, w in zip(idx.tolist(), weights.tolist(), strict=True):
            sample = ep.tokens[t]
            if not is_fresh(sample.policy_version, accumulator.policy_version, cfg.max_staleness):
                stale += 1
                continue
            if not sample.completion_token_ids:
                continue
            # a multimodal policy (processor given): the prompt's pixels, checked against its image
            # tokens; a text-only policy saw its images as placeholder text, already in the ids
            mm = (multimodal_inputs(processor, sample.prompt_token_ids, sample.images)
                  if processor is not None else None)
            logp = completion_logprobs(policy, sample.prompt_token_ids, sample.completion_token_ids, mm)
            with torch.no_grad():
                ref = completion_logprobs(reference, sample.prompt_token_ids, sample.completion_token_ids, mm)
            old = torch.tensor(sample.completion_logprobs, dtype=logp.dtype, device=logp.device)
            a = torch.full_like(logp, cfg.advantage_scale * float(adv.advantages[t]))
            out = policy_loss(logp, old, ref.to(logp.device), a, weights=torch.full_like(logp, w),
                              config=cfg.policy)
            accumulator.backward(out.loss)
            for k in totals:
                totals[k] += out.stats[k]
            trained_requests += 1
            used = True
        trained_episodes += int(used)
    accumulator.add_episodes(trained_episodes)
    closes_step = accumulator.rounds_accumulated + 1 >= accumulator.rounds_per_step
    learning_rate = accumulator.learning_rate
    stepped = accumulator.end_round()
    tokens = totals["tokens"]
    metrics.update({
        "policy_requests_trained": float(trained_requests),
        "policy_episodes_trained": float(trained_episodes),
        "policy_stale_dropped": float(stale),
        "policy_kept_fraction": totals["kept_tokens"] / tokens if tokens else float("nan"),
        "policy_pg_loss": totals["pg_loss"],
        "policy_kl_loss": totals["kl_loss"],
        "policy_stepped": float(stepped),
        # a step was due after this round but its gradient was zero / not finite: no new version
        "policy_step_skipped": float(closes_step and not stepped),
        "policy_version": float(accumulator.policy_version),
    })
    if closes_step:
        metrics["policy_grad_norm"] = accumulator.last_grad_norm
    if stepped:
        metrics["policy_learning_rate"] = learning_rate
    return result
