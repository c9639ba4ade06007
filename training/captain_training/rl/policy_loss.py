"""The token-level policy loss of Eq. 8 with double-sided ratio masking and a k3 KL to SFT.

For token j of request t of episode i, with r = pi_theta / pi_rollout::

    L = sum_{i,t,j} w_{i,t} m_{t,j} [ -r_{t,j} A_{i,t} + beta * k3_{t,j} ]
    m_{t,j} = 1[0.2 < r_{t,j} < 4]                     (no gradient through the mask)
    k3      = exp(l_ref - l) - (l_ref - l) - 1,  l = log pi_theta, l_ref = log pi_SFT

* The ratio is **not** detached: d(r A)/d(theta) = r A grad log pi_theta, i.e. the kept token
  is weighted by its ratio (Appendix A.2: "it is then weighted by that ratio"). This equals
  the surrogate ``stopgrad(r) * log pi_theta * A`` in value of the gradient.
* Tokens outside (0.2, 4) are dropped, not clipped: they contribute neither policy
  gradient nor KL.
* The k3 penalty (beta = 0.002) is applied on kept tokens only.
* ``w_{i,t}`` is the inclusion weight of the request (``sample_requests``): at most 8
  requests per trajectory are trained, drawn uniformly without replacement, each weighted
  by T_i / n_i so that the sum is unbiased for the sum over all T_i requests.

The loss is a sum over tokens (Eq. 8); ``GradientAccumulator`` divides the accumulated
gradient by the number of episodes before each optimiser step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from captain_training.rl.errors import CreditError


@dataclass(frozen=True)
class PolicyLossConfig:
    """Constants of Eq. 8 and the request sampling."""

    ratio_low: float = 0.2
    ratio_high: float = 4.0
    kl_beta: float = 0.002
    max_requests_per_episode: int = 8

    def __post_init__(self) -> None:
        if not 0.0 <= self.ratio_low < 1.0 < self.ratio_high:
            raise CreditError(f"need 0 <= ratio_low < 1 < ratio_high, got {self.ratio_low}, "
                              f"{self.ratio_high}")
        if self.kl_beta < 0:
            raise CreditError("kl_beta must be >= 0")
        if self.max_requests_per_episode < 1:
            raise CreditError("max_requests_per_episode must be >= 1")


def sample_requests(n_requests: int, max_requests: int = 8, rng: np.random.Generator | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``max_requests`` request positions (0-based, sorted), uniform without replacement.

    Returns:
        (indices, weights): the chosen positions and their inclusion weights T / n
        (1 / inclusion probability). With T <= max_requests every request is kept at weight 1.
    """
    if n_requests < 0:
        raise CreditError("n_requests must be >= 0")
    if n_requests <= max_requests:
        return np.arange(n_requests), np.ones(n_requests)
    rng = rng if rng is not None else np.random.default_rng()
    idx = np.sort(rng.choice(n_requests, size=max_requests, replace=False))
    return idx, np.full(max_requests, n_requests / max_requests)


def k3_divergence(logprobs: torch.Tensor, reference_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi_theta || pi_ref): exp(d) - d - 1 with d = l_ref - l (>= 0)."""
    d = reference_logprobs - logprobs
    return torch.exp(d) - d - 1.0


@dataclass
class PolicyLossOutput:
    """Loss (a scalar to back-propagate) and plain-number statistics."""

    loss: torch.Tensor
    stats: dict[str, float]


def policy_loss(logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, reference_logprobs: torch.Tensor,
                advantages: torch.Tensor, token_mask: torch.Tensor | None = None,
                weights: torch.Tensor | None = None, config: PolicyLossConfig | None = None
                ) -> PolicyLossOutput:
    """Eq. 8 summed over tokens.

    All tensors share one shape (e.g. (n_tokens,) or (batch, length)).

    Args:
        logprobs: log pi_theta of the sampled tokens (carries the gradient).
        rollout_logprobs: log pi_rollout returned by the rollout server (no gradient).
        reference_logprobs: log pi_SFT of the same tokens (no gradient).
        advantages: A_{i,t} of each token's request.
        token_mask: 1 for trained (generated) tokens, 0 for padding / context.
        weights: per-token inclusion weight w_{i,t} (1 when None).
        config: ratio bounds and beta.
    """
    cfg = config or PolicyLossConfig()
    shape = logprobs.shape
    for name, t in (("rollout_logprobs", rollout_logprobs), ("reference_logprobs", reference_logprobs),
                    ("advantages", advantages)):
        if t.shape != shape:
            raise CreditError(f"{name} has shape {tuple(t.shape)}, logprobs {tuple(shape)}")
    old = rollout_logprobs.detach().to(logprobs.dtype)
    ref = reference_logprobs.detach().to(logprobs.dtype)
    adv = advantages.detach().to(logprobs.dtype)
    valid = torch.ones_like(logprobs) if token_mask is None else token_mask.detach().to(logprobs.dtype)
    w = torch.ones_like(logprobs) if weights is None else weights.detach().to(logprobs.dtype)
    log_ratio = logprobs - old
    with torch.no_grad():
        raw_ratio = torch.exp(log_ratio)
        keep = ((raw_ratio > cfg.ratio_low) & (raw_ratio < cfg.ratio_high)).to(logprobs.dtype) * valid
    kept = keep > 0
    zeros = torch.zeros_like(logprobs)
    # dropped tokens enter exp() as 0 so that an overflowing ratio cannot turn their zero
    # gradient into NaN
    ratio = torch.exp(torch.where(kept, log_ratio, zeros))
    pg_terms = torch.where(kept, -ratio * adv, zeros)
    k3 = torch.where(kept, k3_divergence(torch.where(kept, logprobs, ref), ref), zeros)
    pg = (w * keep * pg_terms).sum()
    kl = (w * keep * k3).sum()
    loss = pg + cfg.kl_beta * kl
    with torch.no_grad():
        n_valid = float(valid.sum())
        n_kept = float(keep.sum())
        stats = {
            "tokens": n_valid,
            "kept_tokens": n_kept,
            "kept_fraction": n_kept / n_valid if n_valid else float("nan"),
            "dropped_low": float(((raw_ratio <= cfg.ratio_low).to(valid.dtype) * valid).sum()),
            "dropped_high": float(((raw_ratio >= cfg.ratio_high).to(valid.dtype) * valid).sum()),
            "mean_ratio_kept": float((ratio * keep).sum() / n_kept) if n_kept else float("nan"),
            "mean_k3_kept": float((k3 * keep).sum() / n_kept) if n_kept else float("nan"),
            "pg_loss": float(pg.detach()),
            "kl_loss": float(cfg.kl_beta * kl.detach()),
        }
    return PolicyLossOutput(loss, stats)
