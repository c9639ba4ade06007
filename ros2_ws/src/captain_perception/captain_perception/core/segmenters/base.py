"""The interface every text-prompted segmenter implements.

A segmenter receives one camera frame (as a ``FrameCloud``: image, depth and the
point cloud in the robot base frame) and a text prompt, and returns instance masks
with scores, best first. When it cannot ground the prompt it raises
``NothingFoundError`` (nothing matches) or ``BackendUnavailableError`` (its model is
not available) with a message that says why and what to try instead.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from captain_perception.core.pointcloud import FrameCloud


@dataclass(frozen=True)
class Segment:
    """One instance found for a prompt.

    Attributes:
        mask: (H, W) bool mask of the instance's pixels.
        score: confidence in [0, 1].
        label: what the segmenter took the instance to be (e.g. ``"black bowl"``).
        evidence: backend-specific reasons (colour names, sizes, ...), plain values.
    """

    mask: np.ndarray
    score: float
    label: str
    evidence: dict[str, Any] = field(default_factory=dict)


class Segmenter(abc.ABC):
    """Base class of text-prompted segmenters (see the module docstring)."""

    #: short backend name reported in results (e.g. ``"classical"``, ``"sam3"``)
    name: str = ""

    @abc.abstractmethod
    def segment(self, cloud: FrameCloud, text: str, max_results: int = 5) -> list[Segment]:
        """Instances matching ``text`` in the frame, best first (at most ``max_results``).

        Raises:
            NothingFoundError: nothing in the frame matches the prompt (the message says
                what was seen).
            BackendUnavailableError: the backend's model cannot be used.
        """

    def describe(self) -> dict[str, Any]:
        """What the backend is (for results and logs)."""
        return {"backend": self.name}
