"""Special and added tokens of the Qwen3.5 vocabulary (ids as in the released checkpoints)."""

from __future__ import annotations

ENDOFTEXT_ID = 248044
IM_START_ID = 248045
IM_END_ID = 248046
VISION_START_ID = 248053
VISION_END_ID = 248054
IMAGE_PAD_ID = 248056
VIDEO_PAD_ID = 248057
TOOL_CALL_ID = 248058
THINK_ID = 248068

#: Size of the embedding matrix of the released Qwen3.5 models (the tokenizer has 248,077
#: entries; the rest is padding rows).
MODEL_VOCAB_SIZE = 248320

#: Added tokens that the model writes as ordinary text (``special: false`` in the released
#: tokenizer config): decoding with ``skip_special_tokens=True`` keeps them.
TEXT_ADDED_TOKENS = frozenset(
    {
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
    }
)
