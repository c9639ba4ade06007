"""Per-request credit and advantages (paper Eq. 5-6 / 9-10).

For episode i with requests t = 1..T (1-based), costs c_t, terminal return R_i and critic
V(s, t)::

    delta_t = c_t + V(s_{t+1}, t) - V(s_t, t)      (t < T)   # the same index t in both values
    delta_T = c_T + R_i - V(s_T, T)
    A^GAE_t = sum_{k>=0} lambda^k delta_{t+k}         lambda = 0.9, no discount
    G_i     = R_i + sum_t c_t
    A_{i,t} = (G_i - mean_group G) + (A^GAE_{i,t} - mean_t A^GAE_{i,.})

The group is the set of rollouts of one start state (G = 4). A_{i,t} is then divided by a
running estimate of its standard deviation (``normalizer.RunningStd``), without
re-centring. Finally, a request whose cells only produced Python errors gets no positive
credit and a small extra penalty: ``A <- min(A, 0) - python_error_penalty`` (in units of
the normalised advantage). All tokens of request t share A_{i,t}.

The critic values are those of the critic *before* this round's co-training update.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from captain_training.rl.errors import CreditError
from captain_training.rl.normalizer import RunningStd

#: A value function: (features (N, 36), request indices (N,), task) -> V, shape (N,).
ValueFn = Callable[[np.ndarray, np.ndarray, str], np.ndarray]


@dataclass(frozen=True)
class AdvantageConfig:
    """Constants of the advantage computation.

    Attributes:
        gae_lambda: lambda of GAE (0.9); there is no discount.
        python_error_penalty: extra penalty of Python-error-only requests, >= 0.
        group_term: add the group-relative outcome term (Eq. 6); False gives the
            critic term alone (for ablations).
    """

    gae_lambda: float = 0.9
    python_error_penalty: float = 0.1
    group_term: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.gae_lambda <= 1.0:
            raise CreditError(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
        if self.python_error_penalty < 0:
            raise CreditError("python_error_penalty must be >= 0 (it is subtracted)")


def critic_values(value_fn: ValueFn, features: np.ndarray, task: str) -> tuple[np.ndarray, np.ndarray]:
    """V(s_t, t) for t = 1..T and V(s_{t+1}, t) for t = 1..T-1, from x(s_1..s_T).

    Args:
        value_fn: e.g. ``SimulatorCritic.value``.
        features: (T, 36), the features of the snapshots taken before requests 1..T.
        task: the episode's task id.
    """
    x = np.asarray(features, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0:
        raise CreditError(f"features must be (T, n_features) with T >= 1, got shape {x.shape}")
    T = x.shape[0]
    t = np.arange(1, T + 1)
    values_now = np.asarray(value_fn(x, t, task), dtype=float)
    values_next = np.asarray(value_fn(x[1:], t[:-1], task), dtype=float) if T > 1 else np.zeros(0)
    return values_now, values_next


def td_residuals(costs: Sequence[float], values_now: Sequence[float], values_next: Sequence[float],
                 terminal_return: float) -> np.ndarray:
    """delta_t of Eq. 5 / 9, shape (T,).

    Args:
        costs: c_1..c_T.
        values_now: V(s_t, t) for t = 1..T.
        values_next: V(s_{t+1}, t) for t = 1..T-1 (length T-1).
        terminal_return: R_i.
    """
    c = np.asarray(costs, dtype=float)
    v = np.asarray(values_now, dtype=float)
    vn = np.asarray(values_next, dtype=float)
    T = c.size
    if T == 0:
        raise CreditError("an episode needs at least one request")
    if v.size != T or vn.size != T - 1:
        raise CreditError(f"for T={T} requests need {T} values V(s_t,t) and {T - 1} values V(s_(t+1),t); "
                          f"got {v.size} and {vn.size}")
    nxt = np.append(vn, terminal_return)
    return c + nxt - v


def gae(deltas: Sequence[float], gae_lambda: float = 0.9) -> np.ndarray:
    """A^GAE_t = sum_k lambda^k delta_{t+k} (no discount), shape (T,)."""
    d = np.asarray(deltas, dtype=float)
    out = np.zeros_like(d)
    acc = 0.0
    for t in range(d.size - 1, -1, -1):
        acc = d[t] + gae_lambda * acc
        out[t] = acc
    return out


@dataclass(frozen=True)
class EpisodeCreditInput:
    """What the advantage computation needs about one episode.

    Attributes:
        group_key: the start state it was rolled out from (rollouts sharing it form a group).
        costs: c_t, (T,).
        terminal_return: R_i.
        values_now: V(s_t, t), (T,).
        values_next: V(s_{t+1}, t), (T-1,).
        python_error_only: per request, whether it only produced Python errors, (T,);
            None means no such request.
    """

    group_key: Hashable
    costs: np.ndarray
    terminal_return: float
    values_now: np.ndarray
    values_next: np.ndarray
    python_error_only: np.ndarray | None = None


@dataclass(frozen=True)
class EpisodeAdvantage:
    """Credit of one episode: intermediate terms and the final per-request advantages."""

    deltas: np.ndarray
    gae: np.ndarray
    outcome: float
    raw: np.ndarray
    advantages: np.ndarray


def compute_advantages(episodes: Sequence[EpisodeCreditInput], normalizer: RunningStd | None = None,
                       config: AdvantageConfig | None = None) -> list[EpisodeAdvantage]:
    """A_{i,t} for every episode of a round (Eq. 6 / 10, then normalisation and error masking).

    The normaliser is first updated with this round's raw advantages (all requests of all
    episodes), then used to divide them. Without a normaliser the raw advantages are used.
    """
    cfg = config or AdvantageConfig()
    if not episodes:
        return []
    parts = []
    for ep in episodes:
        deltas = td_residuals(ep.costs, ep.values_now, ep.values_next, ep.terminal_return)
        a_gae = gae(deltas, cfg.gae_lambda)
        outcome = float(ep.terminal_return) + float(np.sum(ep.costs))
        parts.append((deltas, a_gae, outcome))
    group_means: dict[Hashable, float] = {}
    for key in dict.fromkeys(ep.group_key for ep in episodes):
        group_means[key] = float(np.mean([p[2] for p, ep in zip(parts, episodes, strict=True)
                                          if ep.group_key == key]))
    raws = []
    for (_, a_gae, outcome), ep in zip(parts, episodes, strict=True):
        group = (outcome - group_means[ep.group_key]) if cfg.group_term else 0.0
        raws.append(group + (a_gae - a_gae.mean()))
    if normalizer is not None:
        normalizer.update(np.concatenate(raws))
    result = []
    for (deltas, a_gae, outcome), ep, raw in zip(parts, episodes, raws, strict=True):
        adv = normalizer.normalize(raw) if normalizer is not None else raw.copy()
        if ep.python_error_only is not None:
            mask = np.asarray(ep.python_error_only, dtype=bool)
            if mask.shape != adv.shape:
                raise CreditError(f"python_error_only has {mask.size} entries for {adv.size} requests")
            adv = np.where(mask, np.minimum(adv, 0.0) - cfg.python_error_penalty, adv)
        result.append(EpisodeAdvantage(deltas, a_gae, outcome, raw, adv))
    return result
