"""Mapping between gripper joint positions and the jaw opening fraction.

A position-controlled gripper is described by its joints' positions when closed and
when fully open. The opening fraction is the mean over joints of
``(q - closed) / (open - closed)``, clipped to 0..1; a fraction maps back to
``closed + fraction * (open - closed)`` per joint. Joint units are those of the joints
(m for prismatic fingers, rad for revolute ones).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class GripperMap:
    """Fraction <-> joint positions for one gripper.

    Args:
        closed_positions: joint positions with the jaw closed.
        open_positions: joint positions with the jaw fully open.
        max_opening_m: fingertip distance when fully open, m.
    """

    def __init__(self, closed_positions: Sequence[float], open_positions: Sequence[float],
                 max_opening_m: float) -> None:
        self.closed = np.asarray(closed_positions, dtype=float)
        self.open = np.asarray(open_positions, dtype=float)
        self.span = self.open - self.closed
        self.max_opening_m = float(max_opening_m)

    def fraction(self, joint_positions: np.ndarray) -> float:
        """The opening fraction 0 (closed) .. 1 (open) of measured joint positions."""
        f = (np.asarray(joint_positions, dtype=float) - self.closed) / self.span
        return float(np.clip(np.mean(f), 0.0, 1.0))

    def opening_m(self, joint_positions: np.ndarray) -> float:
        """Fingertip distance of measured joint positions, m."""
        return self.fraction(joint_positions) * self.max_opening_m

    def positions(self, fraction: float) -> np.ndarray:
        """Joint position targets for an opening fraction (clipped to 0..1)."""
        return self.closed + float(np.clip(fraction, 0.0, 1.0)) * self.span
