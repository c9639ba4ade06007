"""One full RL round offline (tiny causal LM as the rollout policy), and a resumed run that continues exactly."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from captain_training.rl.advantages import EpisodeCreditInput, compute_advantages, critic_values
from captain_training.rl.bench import tiny_causal_lm
from captain_training.rl.critic import CriticConfig, SimulatorCritic, load_optimizer, make_optimizer
from captain_training.rl.features import episode_features
from captain_training.rl.logprobs import completion_logprobs
from captain_training.rl.normalizer import RunningStd
from captain_training.rl.returns import request_costs, terminal_return
from captain_training.rl.round import RolloutEpisode, RoundConfig, TokenSample, round_rng, run_round
from captain_training.rl.synthetic_episodes import DEFAULT_TASKS, generate_episodes
from captain_training.rl.trainer_state import (
    append_metrics,
    latest_round,
    load_checkpoint,
    read_metrics,
    save_checkpoint,
)
from captain_training.rl.update import GradientAccumulator

VOCAB = 96
COMPLETION_TOKENS = 5


def _rollouts(model: torch.nn.Module, seed: int, n_start_states: int, version: int = 0) -> list[RolloutEpisode]:
    """Recorded episodes whose requests carry token ids and the policy's log-probabilities of them.

    Completion ids are drawn at random and scored by the policy in one pass (what a rollout
    server returns as sampled ids and their log-probabilities), which keeps the test fast.
    """
    gen = torch.Generator().manual_seed(seed)
    episodes = []
    for ep in generate_episodes(n_start_states, seed=seed):
        x = episode_features(ep.snapshots[:-1], ep.snapshots[0])
        tokens = []
        for t in range(ep.n_requests):
            prompt = [1, 2 + t % 50] + [3 + int(abs(v) * 997) % (VOCAB - 3) for v in x[t, :12]]
            ids = torch.randint(3, VOCAB, (COMPLETION_TOKENS,), generator=gen).tolist()
            with torch.no_grad():
                lps = completion_logprobs(model, prompt, ids).tolist()
            tokens.append(TokenSample(tuple(prompt), tuple(ids), tuple(lps), policy_version=version))
        episodes.append(RolloutEpisode(ep.episode_key, ep.group_key, ep.task_id, x, ep.requests, tokens,
                                       ep.host_success, ep.termination, sft_median_actions=6.0))
    return episodes


def _fresh_state(seed: int = 0):
    policy = tiny_causal_lm(vocab_size=VOCAB, seed=seed)
    reference = copy.deepcopy(policy).eval()
    critic = SimulatorCritic(CriticConfig(task_ids=tuple(t.task_id for t in DEFAULT_TASKS), seed=seed))
    critic.fit_normalizer(np.random.default_rng(seed).normal(size=(50, 36)), np.arange(1, 51))
    acc = GradientAccumulator.for_model(policy, torch.optim.AdamW(policy.parameters(), lr=1e-3), rounds_per_step=1)
    return policy, reference, critic, make_optimizer(critic), acc, RunningStd()


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """A 2-layer model runs several times faster on one thread than on two busy cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def round_data():
    policy = tiny_causal_lm(vocab_size=VOCAB, seed=0)
    return _rollouts(policy, seed=3, n_start_states=2), _rollouts(policy, seed=4, n_start_states=2)


def test_one_full_round_updates_critic_and_policy(round_data):
    episodes = [dataclasses.replace(ep) for ep in round_data[0]]
    episodes[-1].monitor = True  # a held-out monitor episode: metrics only
    policy, reference, critic, critic_opt, acc, norm = _fresh_state()
    critic_before = copy.deepcopy(critic)
    weights_before = {n: p.detach().clone() for n, p in policy.named_parameters()}

    result = run_round(episodes, critic=critic, critic_optimizer=critic_opt, policy=policy, reference=reference,
                       accumulator=acc, normalizer=norm, rng=round_rng(0, 0))
    m = result.metrics

    # advantages use the critic from before this round's update
    trained = episodes[:-1]
    inputs = []
    for ep in trained:
        v_now, v_next = critic_values(critic_before.value, ep.features, ep.task_id)
        R = terminal_return(ep.host_success, ep.termination)
        inputs.append(EpisodeCreditInput(ep.group_key, request_costs(ep.requests, 6.0), R, v_now, v_next,
                                         np.array([r.python_error_only for r in ep.requests])))
    expected = compute_advantages(inputs, RunningStd())
    for ep, adv in zip(trained, expected, strict=True):
        assert result.advantages[ep.episode_key] == pytest.approx(adv.advantages)
    assert episodes[-1].episode_key not in result.advantages
    assert norm.count == sum(len(ep.requests) for ep in trained)

    # the critic was co-trained, the policy took one optimiser step
    assert any(not torch.equal(a, b) for a, b in zip(critic_before.parameters(), critic.parameters(), strict=True))
    changed = [n for n, p in policy.named_parameters() if not torch.equal(p.detach(), weights_before[n])]
    assert len(changed) > 0.9 * len(weights_before)
    assert m["policy_stepped"] == 1.0 and m["policy_version"] == 1.0
    assert m["policy_requests_trained"] == sum(min(len(ep.requests), 8) for ep in trained)
    assert m["policy_episodes_trained"] == len(trained)
    assert m["policy_kept_fraction"] == pytest.approx(1.0)  # fresh rollouts: ratio 1 everywhere
    assert m["episodes"] == len(episodes)
    for key in ("host_success", "strict_success", "false_finish", "requests_mean", "critic_auc", "critic_brier",
                "critic_ece", "critic_loss_before", "advantage_std_running", "policy_grad_norm"):
        assert np.isfinite(m[key]), key


def test_stale_requests_are_not_trained(round_data):
    policy, reference, critic, critic_opt, acc, norm = _fresh_state()
    acc.policy_version = 3  # rollouts of version 0 are 3 versions behind
    m = run_round(round_data[0][:4], critic=critic, critic_optimizer=critic_opt, policy=policy, reference=reference,
                  accumulator=acc, normalizer=norm, rng=round_rng(0, 0),
                  config=RoundConfig(max_staleness=2)).metrics
    assert m["policy_requests_trained"] == 0
    assert m["policy_stale_dropped"] == sum(min(len(ep.requests), 8) for ep in round_data[0][:4])


def _two_rounds(run_dir, round_data, interrupt: bool):
    policy, reference, critic, critic_opt, acc, norm = _fresh_state()
    for r, episodes in enumerate(round_data):
        if interrupt and r == 1:
            # a new process: different initial objects, then everything restored from disk
            policy, reference, critic, critic_opt, acc, norm = _fresh_state(seed=7)
            reference = copy.deepcopy(tiny_causal_lm(vocab_size=VOCAB, seed=0)).eval()
            resumed = load_checkpoint(run_dir, policy=policy, accumulator=acc)
            assert resumed.round_index == 0
            critic, norm = resumed.critic, resumed.normalizer
            critic_opt = load_optimizer(critic, resumed.critic_optimizer_state)
        result = run_round(episodes, critic=critic, critic_optimizer=critic_opt, policy=policy,
                           reference=reference, accumulator=acc, normalizer=norm, rng=round_rng(0, r))
        append_metrics(run_dir, r, result.metrics)
        save_checkpoint(run_dir, r, policy=policy, accumulator=acc, critic=critic, critic_optimizer=critic_opt,
                        normalizer=norm)
    return policy, critic, norm, acc


def test_resumed_run_continues_exactly(tmp_path, round_data):
    p_a, c_a, n_a, acc_a = _two_rounds(tmp_path / "straight", round_data, interrupt=False)
    p_b, c_b, n_b, acc_b = _two_rounds(tmp_path / "resumed", round_data, interrupt=True)
    assert latest_round(tmp_path / "resumed") == 1
    assert acc_a.policy_version == acc_b.policy_version == 2
    for (name, a), b in zip(p_a.state_dict().items(), p_b.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    for a, b in zip(c_a.state_dict().values(), c_b.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert n_a == n_b
    rows = read_metrics(tmp_path / "resumed")
    assert [r["round"] for r in rows] == [0, 1]
    assert "critic_auc" in rows[0]
    assert not list((tmp_path / "resumed").rglob("*.tmp"))


def test_a_round_with_zero_gradient_is_a_skipped_step_not_a_new_version(round_data):
    """All advantages 0 and the policy equal to its reference: the gradient is exactly 0, so
    no optimiser step, no new policy version, unchanged weights, and the metrics say so."""
    policy, reference, critic, critic_opt, acc, norm = _fresh_state()
    weights_before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    config = RoundConfig(advantage_scale=0.0)  # the negative control: no policy signal
    episodes = [dataclasses.replace(ep) for ep in round_data[0][:4]]
    m = run_round(episodes, critic=critic, critic_optimizer=critic_opt, policy=policy, reference=reference,
                  accumulator=acc, normalizer=norm, rng=round_rng(0, 0), config=config).metrics
    assert m["policy_requests_trained"] > 0  # requests were trained on, yet nothing to learn
    assert m["policy_stepped"] == 0.0 and m["policy_step_skipped"] == 1.0
    assert m["policy_version"] == 0.0 and acc.policy_version == 0 and acc.last_step_skipped == "zero_gradient"
    assert m["policy_grad_norm"] == 0.0
    for n, p in policy.named_parameters():
        assert torch.equal(p.detach(), weights_before[n]), n


def test_learning_rate_warms_up_linearly_then_stays():
    p = torch.nn.Parameter(torch.ones(3))
    acc = GradientAccumulator([p], torch.optim.SGD([p], lr=0.3), rounds_per_step=1, warmup_steps=2)
    rates = []
    for _ in range(4):
        rates.append(acc.learning_rate)
        (p * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
        acc.add_episodes(1)
        assert acc.end_round()
    assert rates == pytest.approx([0.1, 0.2, 0.3, 0.3])
    state = acc.state_dict()
    again = GradientAccumulator([p], torch.optim.SGD([p], lr=0.3), rounds_per_step=1, warmup_steps=2)
    again.load_state_dict(state)
    assert again.policy_version == 4 and again.learning_rate == pytest.approx(0.3)
