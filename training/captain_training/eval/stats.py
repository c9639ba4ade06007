"""Paired comparison of two policies (paper §4, "Protocol and metrics").

Episodes of policies A and B are paired on identical (suite, task, initial-state) triples.
For a binary metric (host or strict success):

* the exact two-sided McNemar test: with b = pairs where only A succeeded and c = pairs
  where only B succeeded, p = min(1, 2 P[X <= min(b, c)]) for X ~ Binomial(b + c, 1/2)
  (p = 1 when b + c = 0);
* a 95 % task-cluster bootstrap interval of the success difference B - A: tasks
  (suite, task) are resampled with replacement, all paired episodes of a drawn task come
  along, and the difference of success rates over the resampled episodes is recomputed;
  the interval is the percentile interval (seeded, so reproducible).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from math import comb

import numpy as np

from captain_training.eval.errors import EvalError, PairingError
from captain_training.eval.results import METRICS, EpisodeResult


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts b and c."""
    if b < 0 or c < 0:
        raise EvalError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = Fraction(sum(comb(n, i) for i in range(k + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


@dataclass(frozen=True)
class PairedOutcome:
    """One (suite, task, initial state) triple with both policies' outcomes."""

    suite: str
    task_id: str
    init_state: str
    a: bool
    b: bool

    @property
    def cluster(self) -> tuple[str, str]:
        return (self.suite, self.task_id)


def _index(results: Sequence[EpisodeResult], label: str) -> dict[tuple[str, str, str], EpisodeResult]:
    out: dict[tuple[str, str, str], EpisodeResult] = {}
    dups = []
    for r in results:
        if r.key in out:
            dups.append(r.key)
        out[r.key] = r
    if dups:
        raise PairingError(f"policy {label} has {len(dups)} duplicate (suite, task, init_state) triples, "
                           f"e.g. {dups[:3]}; keep one episode per triple")
    return out


def pair_results(results_a: Sequence[EpisodeResult], results_b: Sequence[EpisodeResult], metric: str,
                 allow_unpaired: bool = False) -> list[PairedOutcome]:
    """Join two result sets on (suite, task, init_state).

    Raises ``PairingError`` when a triple is duplicated, or present for only one policy
    (unless ``allow_unpaired``, which drops those triples).
    """
    if metric not in METRICS:
        raise EvalError(f"unknown metric {metric!r}; valid: {list(METRICS)}")
    ia, ib = _index(results_a, "A"), _index(results_b, "B")
    only_a = sorted(set(ia) - set(ib))
    only_b = sorted(set(ib) - set(ia))
    if (only_a or only_b) and not allow_unpaired:
        raise PairingError(
            f"results are not paired: {len(only_a)} triple(s) only in A (e.g. {only_a[:3]}), "
            f"{len(only_b)} only in B (e.g. {only_b[:3]}); evaluate both policies on identical "
            "(suite, task, init_state) triples or pass allow_unpaired")
    keys = sorted(set(ia) & set(ib))
    if not keys:
        raise PairingError("the two result sets share no (suite, task, init_state) triple")
    return [PairedOutcome(k[0], k[1], k[2], ia[k].metric(metric), ib[k].metric(metric)) for k in keys]


def cluster_bootstrap_ci(pairs: Sequence[PairedOutcome], n_boot: int = 10_000, seed: int = 0,
                         confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of rate(B) - rate(A) under resampling of task clusters."""
    if not pairs:
        raise EvalError("no paired outcomes to bootstrap")
    if not 0.0 < confidence < 1.0:
        raise EvalError(f"confidence must be in (0, 1), got {confidence}")
    clusters = sorted({p.cluster for p in pairs})
    pos = {c: i for i, c in enumerate(clusters)}
    K = len(clusters)
    n = np.zeros(K)
    sa = np.zeros(K)
    sb = np.zeros(K)
    for p in pairs:
        i = pos[p.cluster]
        n[i] += 1
        sa[i] += p.a
        sb[i] += p.b
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(K, np.full(K, 1.0 / K), size=int(n_boot)).astype(float)
    diffs = (counts @ sb - counts @ sa) / (counts @ n)
    alpha = 1.0 - confidence
    lo, hi = np.quantile(diffs, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


@dataclass
class PairedComparison:
    """Result of ``compare_paired`` for one metric (B minus A)."""

    metric: str
    n_pairs: int
    n_tasks: int
    rate_a: float
    rate_b: float
    difference: float
    only_a: int
    only_b: int
    p_value: float
    ci_low: float
    ci_high: float
    confidence: float
    per_suite: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def compare_paired(results_a: Sequence[EpisodeResult], results_b: Sequence[EpisodeResult],
                   metric: str = "strict_success", n_boot: int = 10_000, seed: int = 0,
                   confidence: float = 0.95, allow_unpaired: bool = False) -> PairedComparison:
    """Paired comparison of policy B against policy A on one metric."""
    pairs = pair_results(results_a, results_b, metric, allow_unpaired=allow_unpaired)
    a = np.array([p.a for p in pairs], dtype=float)
    b = np.array([p.b for p in pairs], dtype=float)
    only_a = int(np.sum((a == 1) & (b == 0)))
    only_b = int(np.sum((a == 0) & (b == 1)))
    lo, hi = cluster_bootstrap_ci(pairs, n_boot=n_boot, seed=seed, confidence=confidence)
    per_suite: dict[str, dict[str, float]] = {}
    for suite in sorted({p.suite for p in pairs}):
        sel = [p for p in pairs if p.suite == suite]
        per_suite[suite] = {"n": float(len(sel)), "rate_a": float(np.mean([p.a for p in sel])),
                            "rate_b": float(np.mean([p.b for p in sel]))}
    return PairedComparison(
        metric=metric, n_pairs=len(pairs), n_tasks=len({p.cluster for p in pairs}),
        rate_a=float(a.mean()), rate_b=float(b.mean()), difference=float(b.mean() - a.mean()),
        only_a=only_a, only_b=only_b, p_value=mcnemar_exact(only_a, only_b),
        ci_low=lo, ci_high=hi, confidence=confidence, per_suite=per_suite,
    )
