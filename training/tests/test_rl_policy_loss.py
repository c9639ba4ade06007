"""Eq. 8 by hand, request sampling, staleness, gradient accumulation, and a step on a tiny causal LM."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from captain_training.rl.bench import tiny_causal_lm
from captain_training.rl.errors import CreditError, RLError, StaleRolloutError
from captain_training.rl.logprobs import completion_logprobs
from captain_training.rl.policy_loss import PolicyLossConfig, k3_divergence, policy_loss, sample_requests
from captain_training.rl.update import GradientAccumulator, check_staleness, is_fresh

# Four tokens: ratios pi/pi_rollout = 0.5/0.25 = 2 (kept), 0.1/0.6 = 1/6 (dropped, <= 0.2),
# 0.3/0.05 = 6 (dropped, >= 4), 0.2/0.2 = 1 (kept). SFT reference: 0.4 and 0.1 on the kept ones.
P = [0.5, 0.1, 0.3, 0.2]
P_ROLLOUT = [0.25, 0.6, 0.05, 0.2]
P_REF = [0.4, 0.5, 0.5, 0.1]
ADV = [1.0, 1.0, -1.0, -0.5]
# k3(token 0) = 0.8 - ln 0.8 - 1, k3(token 3) = 0.5 - ln 0.5 - 1
K3_0 = 0.8 - math.log(0.8) - 1.0
K3_3 = 0.5 - math.log(0.5) - 1.0


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Small models run faster on one thread than on two busy cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tensors():
    logp = torch.tensor(np.log(P), dtype=torch.float64, requires_grad=True)
    old = torch.tensor(np.log(P_ROLLOUT), dtype=torch.float64)
    ref = torch.tensor(np.log(P_REF), dtype=torch.float64)
    adv = torch.tensor(ADV, dtype=torch.float64)
    return logp, old, ref, adv


def test_loss_value_gradient_and_stats_by_hand():
    logp, old, ref, adv = _tensors()
    out = policy_loss(logp, old, ref, adv)
    # -(2 * 1) - (1 * -0.5) + 0.002 * (k3_0 + k3_3)
    expected = -2.0 + 0.5 + 0.002 * (K3_0 + K3_3)
    assert out.loss.item() == pytest.approx(expected, abs=1e-12)
    out.loss.backward()
    # d/dl [-r A] = -r A ; d/dl [beta k3] = beta (1 - exp(l_ref - l))
    grad = [-2.0 * 1.0 + 0.002 * (1 - 0.8), 0.0, 0.0, -1.0 * -0.5 + 0.002 * (1 - 0.5)]
    assert logp.grad.tolist() == pytest.approx(grad, abs=1e-12)
    s = out.stats
    assert (s["tokens"], s["kept_tokens"], s["dropped_low"], s["dropped_high"]) == (4, 2, 1, 1)
    assert s["kept_fraction"] == 0.5
    assert s["mean_ratio_kept"] == pytest.approx(1.5)
    assert s["pg_loss"] == pytest.approx(-1.5)
    assert s["kl_loss"] == pytest.approx(0.002 * (K3_0 + K3_3))


def test_ratio_is_weighted_not_detached():
    """The gradient of r A equals r A grad log pi, i.e. the surrogate stopgrad(r) log pi A."""
    logp, old, ref, adv = _tensors()
    policy_loss(logp, old, ref, adv, config=PolicyLossConfig(kl_beta=0.0)).loss.backward()
    g_eq8 = logp.grad.clone()
    logp2 = logp.detach().clone().requires_grad_(True)
    r = torch.exp(logp2 - old).detach()
    keep = ((r > 0.2) & (r < 4)).double()
    (-(keep * r * logp2 * adv).sum()).backward()
    assert torch.allclose(g_eq8, logp2.grad)


def test_weights_masks_and_bounds():
    logp, old, ref, adv = _tensors()
    w = torch.tensor([2.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    weighted = policy_loss(logp, old, ref, adv, weights=w)
    assert weighted.loss.item() == pytest.approx(2 * (-2.0 + 0.002 * K3_0) + 0.5 + 0.002 * K3_3)
    mask = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    masked = policy_loss(logp, old, ref, adv, token_mask=mask)
    assert masked.loss.item() == pytest.approx(-2.0 + 0.002 * K3_0)
    assert masked.stats["tokens"] == 3
    # just inside / outside the bounds (strict inequalities)
    lp = torch.log(torch.tensor([0.201, 0.199, 3.99, 4.01], dtype=torch.float64))
    out = policy_loss(lp, torch.zeros(4, dtype=torch.float64), lp.detach(), torch.ones(4, dtype=torch.float64))
    assert out.stats["kept_tokens"] == 2
    assert out.loss.item() == pytest.approx(-(0.201 + 3.99))
    with pytest.raises(CreditError):
        PolicyLossConfig(ratio_low=1.5)


def test_overflowing_ratio_is_dropped_without_nan():
    logp = torch.tensor([-0.1, -0.2], dtype=torch.float32, requires_grad=True)
    old = torch.tensor([-1000.0, -0.2])
    out = policy_loss(logp, old, torch.tensor([-0.1, -0.2]), torch.ones(2))
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert torch.all(torch.isfinite(logp.grad))
    assert logp.grad[0] == 0.0
    assert k3_divergence(torch.tensor([-1.0]), torch.tensor([-1.0])).item() == 0.0


def test_request_sampling_is_uniform_and_inclusion_weighted():
    idx, w = sample_requests(5, 8)
    assert idx.tolist() == [0, 1, 2, 3, 4] and w.tolist() == [1.0] * 5
    rng = np.random.default_rng(0)
    idx, w = sample_requests(20, 8, rng)
    assert len(set(idx.tolist())) == 8 and idx.tolist() == sorted(idx.tolist())
    assert w.tolist() == [2.5] * 8
    values = np.arange(20, dtype=float) ** 2
    estimates, counts = [], np.zeros(20)
    for _ in range(4000):
        i, wi = sample_requests(20, 8, rng)
        estimates.append(float((values[i] * wi).sum()))
        counts[i] += 1
    assert np.mean(estimates) == pytest.approx(values.sum(), rel=0.02)  # unbiased for the full sum
    assert counts / 4000 == pytest.approx(np.full(20, 0.4), abs=0.04)  # every request equally likely


def test_staleness_gate():
    assert is_fresh(5, 7) and is_fresh(7, 7)
    assert not is_fresh(4, 7)
    check_staleness(5, 7)
    with pytest.raises(StaleRolloutError, match="3 versions behind"):
        check_staleness(4, 7)
    with pytest.raises(RLError, match="newer"):
        is_fresh(8, 7)


def test_gradient_accumulation_over_k_rounds():
    w = torch.nn.Parameter(torch.tensor(1.0))
    acc = GradientAccumulator([w], torch.optim.SGD([w], lr=0.1), rounds_per_step=2)
    acc.backward(3.0 * w)       # round 1: one episode, gradient 3
    acc.add_episodes(1)
    assert not acc.end_round()
    assert w.item() == 1.0 and acc.policy_version == 0
    acc.backward(5.0 * w)       # round 2: three episodes, summed gradient 5
    acc.add_episodes(3)
    assert acc.end_round()
    # mean gradient (3 + 5) / 4 = 2 -> w = 1 - 0.1 * 2
    assert w.item() == pytest.approx(0.8)
    assert acc.policy_version == 1 and acc.episodes_accumulated == 0
    assert w.grad is None
    state = acc.state_dict()
    other = GradientAccumulator([w], torch.optim.SGD([w], lr=0.1), rounds_per_step=2)
    other.load_state_dict(state)
    assert other.policy_version == 1


def test_tiny_causal_lm_step_is_differentiable_and_moves_toward_positive_advantage():
    torch.manual_seed(0)
    model = tiny_causal_lm(vocab_size=128)
    reference = copy.deepcopy(model).eval()
    prompt = list(range(3, 40))
    completion = [7, 19, 101, 64, 5, 88]
    lp_full = torch.log_softmax(model(torch.tensor([prompt + completion])).logits[0].float(), -1)
    expected = lp_full[len(prompt) - 1:-1].gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)
    with torch.no_grad():
        rollout = completion_logprobs(model, prompt, completion)
    assert torch.allclose(rollout, expected.detach(), atol=1e-5)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    logp = completion_logprobs(model, prompt, completion)
    with torch.no_grad():
        ref = completion_logprobs(reference, prompt, completion)
    out = policy_loss(logp, rollout, ref, torch.ones_like(logp))
    assert out.stats["kept_fraction"] == 1.0
    out.loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.all(torch.isfinite(g)) for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0
    opt.step()
    changed = [n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert len(changed) > 0.9 * len(before)
    with torch.no_grad():
        after = completion_logprobs(model, prompt, completion)
    assert float(after.sum()) > float(rollout.sum()), "a positive advantage must raise the sampled tokens' log-prob"
