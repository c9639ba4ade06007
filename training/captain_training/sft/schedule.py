"""Learning-rate schedule: linear warm-up, then cosine decay to ``min_lr_ratio * peak``."""

from __future__ import annotations

import math


def cosine_lr_factor(step: int, total_steps: int, warmup_steps: int = 0, min_lr_ratio: float = 0.0) -> float:
    """Multiplier of the peak learning rate for optimizer step ``step`` (0-based).

    During warm-up the factor rises linearly to 1 at ``step = warmup_steps``; afterwards it
    follows half a cosine from 1 down to ``min_lr_ratio`` at ``step = total_steps``.
    """
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, max(0.0, (step - warmup_steps) / decay_steps))
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
