"""Token counts of history text, for truncation and compaction.

The default estimate needs no tokenizer: Qwen-family tokenizers give every digit its own
token and about 3.5 characters per token elsewhere in code and English, so the
estimate counts digits one by one and the rest by length. It errs on the high side,
which makes truncation and compaction slightly early rather than late. A real counter
(any ``Callable[[str], int]``) can replace it, and ``History.calibrate`` rescales the
estimate with the prompt token counts the server reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable

TokenCounter = Callable[[str], int]

#: Tokens of one 512x512 image for Qwen3.5 (16-px patches merged 2x2, plus start/end).
IMAGE_TOKENS_512 = 258

_DIGITS = "0123456789"


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text`` (digits count one each, other characters 3.5 each)."""
    if not text:
        return 0
    digits = sum(text.count(d) for d in _DIGITS)
    return digits + math.ceil((len(text) - digits) / 3.5)
