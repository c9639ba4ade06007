"""PNG plots: per-suite success bars and the critic's reliability diagram (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from captain_training.eval.errors import EvalError


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_suite_success(rates: Mapping[str, Mapping[str, float]], path: str | Path,
                       title: str = "Success per suite", ylabel: str = "success rate") -> Path:
    """Grouped bars: one group per suite, one bar per policy.

    Args:
        rates: ``{suite: {policy label: success rate in [0, 1]}}``; every suite must name
            the same policies.
        path: output PNG.
    """
    if not rates:
        raise EvalError("no suites to plot")
    suites = list(rates)
    labels = list(rates[suites[0]])
    for s in suites:
        if list(rates[s]) != labels:
            raise EvalError(f"suite {s!r} has policies {list(rates[s])}, expected {labels}")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(suites) * max(1, len(labels)) / 2 + 2), 3.6), dpi=120)
    width = 0.8 / max(len(labels), 1)
    for j, label in enumerate(labels):
        xs = [i + (j - (len(labels) - 1) / 2) * width for i in range(len(suites))]
        vals = [float(rates[s][label]) for s in suites]
        bars = ax.bar(xs, vals, width=width, label=label)
        for bar, v in zip(bars, vals, strict=True):
            ax.text(bar.get_x() + bar.get_width() / 2, v + 0.01, f"{100 * v:.0f}", ha="center", va="bottom",
                    fontsize=7)
    ax.set_xticks(range(len(suites)))
    ax.set_xticklabels(suites, rotation=20, ha="right")
    ax.set_ylim(0, 1.08)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def plot_calibration(bins: Sequence, path: str | Path, title: str = "Critic calibration") -> Path:
    """Reliability diagram from ``rl.critic_metrics.reliability_bins`` output.

    Points are (mean prediction, fraction of successes) per non-empty bin, sized by count,
    against the diagonal.
    """
    used = [b for b in bins if b.count > 0]
    if not used:
        raise EvalError("all reliability bins are empty; nothing to plot")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.0, 4.0), dpi=120)
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect")
    total = sum(b.count for b in used)
    ax.plot([b.mean_prediction for b in used], [b.fraction_positive for b in used], marker="o",
            linewidth=1, label="critic")
    ax.scatter([b.mean_prediction for b in used], [b.fraction_positive for b in used],
               s=[20 + 400 * b.count / total for b in used], alpha=0.4)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted success V(s, t)")
    ax.set_ylabel("observed host success")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path
