"""The chat template of text-only models: the Qwen3.5 format with images as text.

A text-only causal LM (SmolLM2, a tiny random Llama) is trained and served in exactly the
turn format the harness parses for Qwen3.5: ChatML turns, tools declared in the system turn,
``<think>`` reasoning and ``<tool_call><function=python><parameter=input>`` calls. The one
difference is the image part: a text model has no vision tower, so each image becomes the
placeholder text :data:`IMAGE_TEXT` (the same text the local endpoint puts in place of image
parts of a chat-completions request). The template is derived from the packaged Qwen3.5
template by replacing its vision placeholders, so the two never drift apart.
"""

from __future__ import annotations

from captain_training.qwen.template import chat_template_text

#: Text that stands in for one image in a text-only model's prompt.
IMAGE_TEXT = "[image]"
#: Text that stands in for one video.
VIDEO_TEXT = "[video]"

_QWEN_IMAGE = "'<|vision_start|><|image_pad|><|vision_end|>'"
_QWEN_VIDEO = "'<|vision_start|><|video_pad|><|vision_end|>'"


def text_chat_template(image_text: str = IMAGE_TEXT, video_text: str = VIDEO_TEXT) -> str:
    """Jinja source of the text-only chat template (see the module docstring).

    Raises:
        ValueError: the packaged Qwen3.5 template no longer holds exactly one image and one
            video placeholder (the derivation would be wrong).
    """
    source = chat_template_text()
    for literal in (_QWEN_IMAGE, _QWEN_VIDEO):
        # the header comment mentions the placeholders without quotes; only quoted literals are code
        if source.count(literal) != 1:
            raise ValueError(f"the Qwen3.5 template holds {source.count(literal)} copies of {literal}, expected 1")
    for text in (image_text, video_text):
        if "'" in text or "{" in text:
            raise ValueError(f"placeholder text {text!r} must not contain quotes or braces")
    header = ("{#- Text-only variant of the Qwen3.5 chat format: images render as "
              f"'{image_text}', videos as '{video_text}'. -#}}\n")
    return header + source.replace(_QWEN_IMAGE, f"'{image_text}'").replace(_QWEN_VIDEO, f"'{video_text}'")
