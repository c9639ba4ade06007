"""Running standard deviation of advantages; advantages are divided by it, never re-centred.

The estimate merges each batch into running (count, mean, M2) statistics with Chan's
parallel update. With ``decay < 1`` the previous statistics are down-weighted by
``decay`` before each merge, so the estimate follows a changing policy; ``decay = 1``
gives the exact standard deviation of everything seen so far. The mean is tracked only
to compute the variance: the advantages themselves are not shifted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from captain_training.rl.errors import CreditError


@dataclass
class RunningStd:
    """Running (population) standard deviation.

    Attributes:
        decay: weight of the previous statistics at each merge, in (0, 1].
        min_std: floor of the returned standard deviation (avoids division by ~0).
        count / mean / m2: the running statistics (saved with ``state_dict``).
    """

    decay: float = 1.0
    min_std: float = 1e-6
    count: float = 0.0
    mean: float = 0.0
    m2: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.decay <= 1.0:
            raise CreditError(f"RunningStd.decay must be in (0, 1], got {self.decay}")

    def update(self, values: Sequence[float] | np.ndarray) -> None:
        """Merge a batch of values into the statistics."""
        x = np.asarray(values, dtype=float).ravel()
        if x.size == 0:
            return
        if not np.all(np.isfinite(x)):
            raise CreditError("advantages contain NaN or inf; check the critic values and returns")
        n_a, mean_a, m2_a = self.count * self.decay, self.mean, self.m2 * self.decay
        n_b, mean_b = float(x.size), float(x.mean())
        m2_b = float(((x - mean_b) ** 2).sum())
        n = n_a + n_b
        delta = mean_b - mean_a
        self.mean = mean_a + delta * n_b / n
        self.m2 = m2_a + m2_b + delta * delta * n_a * n_b / n
        self.count = n

    @property
    def std(self) -> float:
        """Current standard deviation (1.0 before any update), at least ``min_std``."""
        if self.count <= 0:
            return 1.0
        return max(math.sqrt(max(self.m2, 0.0) / self.count), self.min_std)

    def normalize(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """values / std, without re-centring."""
        return np.asarray(values, dtype=float) / self.std

    def state_dict(self) -> dict[str, Any]:
        """Plain-data state for checkpoints."""
        return {"decay": self.decay, "min_std": self.min_std, "count": self.count, "mean": self.mean,
                "m2": self.m2}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> RunningStd:
        """Inverse of ``state_dict``."""
        return cls(**{k: float(state[k]) for k in ("decay", "min_std", "count", "mean", "m2")})
