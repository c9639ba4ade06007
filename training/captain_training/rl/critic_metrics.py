"""Ranking and calibration metrics of a success predictor (numpy only).

All functions take binary labels ``y`` (0/1) and predicted probabilities ``p`` in [0, 1].
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from captain_training.rl.errors import CriticError


def _check(y: Sequence[float], p: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    y_arr = np.asarray(y, dtype=float).ravel()
    p_arr = np.asarray(p, dtype=float).ravel()
    if y_arr.shape != p_arr.shape:
        raise CriticError(f"labels and predictions differ in length: {y_arr.size} vs {p_arr.size}")
    if not np.all((y_arr == 0) | (y_arr == 1)):
        raise CriticError("labels must be 0 or 1 (host success of the episode)")
    return y_arr, p_arr


def roc_auc(y: Sequence[float], p: Sequence[float]) -> float:
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties).

    Returns NaN when only one class is present.
    """
    y_arr, p_arr = _check(y, p)
    n_pos = int(y_arr.sum())
    n_neg = y_arr.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(p_arr)
    return float((ranks[y_arr == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def within_group_auc(groups: Sequence[Hashable], y: Sequence[float], p: Sequence[float]) -> float:
    """AUC over pairs that share a group (e.g. rollouts of one start state), pair-weighted.

    Only groups with both outcomes contribute; NaN when none does.
    """
    y_arr, p_arr = _check(y, p)
    g_arr = np.asarray(list(groups), dtype=object)
    if g_arr.size != y_arr.size:
        raise CriticError(f"groups and labels differ in length: {g_arr.size} vs {y_arr.size}")
    total, weight = 0.0, 0.0
    for g in dict.fromkeys(g_arr.tolist()):
        sel = g_arr == g
        n_pos = int(y_arr[sel].sum())
        n_neg = int(sel.sum()) - n_pos
        if n_pos and n_neg:
            pairs = n_pos * n_neg
            total += roc_auc(y_arr[sel], p_arr[sel]) * pairs
            weight += pairs
    return total / weight if weight else float("nan")


def brier_score(y: Sequence[float], p: Sequence[float]) -> float:
    """Mean squared error of the probabilities, in [0, 1]."""
    y_arr, p_arr = _check(y, p)
    return float(np.mean((p_arr - y_arr) ** 2)) if y_arr.size else float("nan")


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability diagram: predictions in [low, high)."""

    low: float
    high: float
    count: int
    mean_prediction: float
    fraction_positive: float


def reliability_bins(y: Sequence[float], p: Sequence[float], n_bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins over [0, 1]; the last bin includes 1.0. Empty bins have NaN means."""
    if n_bins < 1:
        raise CriticError(f"n_bins must be >= 1, got {n_bins}")
    y_arr, p_arr = _check(y, p)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.clip(np.digitize(p_arr, edges[1:-1], right=False), 0, n_bins - 1)
    bins = []
    for b in range(n_bins):
        sel = idx == b
        count = int(sel.sum())
        bins.append(ReliabilityBin(
            low=float(edges[b]), high=float(edges[b + 1]), count=count,
            mean_prediction=float(p_arr[sel].mean()) if count else float("nan"),
            fraction_positive=float(y_arr[sel].mean()) if count else float("nan"),
        ))
    return bins


def expected_calibration_error(y: Sequence[float], p: Sequence[float], n_bins: int = 10) -> float:
    """Count-weighted mean |fraction positive - mean prediction| over the reliability bins."""
    bins = reliability_bins(y, p, n_bins)
    n = sum(b.count for b in bins)
    if n == 0:
        return float("nan")
    return float(sum(b.count * abs(b.fraction_positive - b.mean_prediction) for b in bins if b.count) / n)


def critic_report(y: Sequence[float], p: Sequence[float], groups: Sequence[Hashable] | None = None,
                  n_bins: int = 10) -> dict[str, float]:
    """AUC, within-group AUC (when groups are given), Brier score, ECE and the state count."""
    report = {
        "auc": roc_auc(y, p),
        "brier": brier_score(y, p),
        "ece": expected_calibration_error(y, p, n_bins),
        "n_states": float(len(np.asarray(y).ravel())),
        "positive_fraction": float(np.mean(y)) if len(np.asarray(y).ravel()) else float("nan"),
    }
    if groups is not None:
        report["within_group_auc"] = within_group_auc(groups, y, p)
    return report
