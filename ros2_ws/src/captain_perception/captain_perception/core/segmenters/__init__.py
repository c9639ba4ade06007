"""Text-prompted segmenters behind one interface (``Segmenter``).

* ``classical`` (default): geometry and colour, no weights, works offline.
* ``sam3``: SAM 3, the paper's choice, from a local weights folder.

``make_segmenter(name, **options)`` builds one by name and lists the valid names when
the name is wrong.
"""

from __future__ import annotations

from typing import Any

from captain_perception.core.errors import InvalidPerceptionArgument
from captain_perception.core.segmenters.base import Segment, Segmenter
from captain_perception.core.segmenters.classical import ClassicalSegmenter
from captain_perception.core.segmenters.sam3 import Sam3Segmenter

SEGMENTERS: dict[str, type[Segmenter]] = {"classical": ClassicalSegmenter, "sam3": Sam3Segmenter}

__all__ = ["SEGMENTERS", "ClassicalSegmenter", "Sam3Segmenter", "Segment", "Segmenter", "make_segmenter"]


def make_segmenter(name: str = "classical", **options: Any) -> Segmenter:
    """Build a segmenter by name (``"classical"`` or ``"sam3"``) with its keyword options."""
    cls = SEGMENTERS.get(name)
    if cls is None:
        raise InvalidPerceptionArgument(f"unknown segmenter {name!r}; valid: {', '.join(SEGMENTERS)}")
    return cls(**options)
