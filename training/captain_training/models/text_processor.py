"""The processor of a text-only causal LM: its tokenizer plus the chat template.

It offers the two calls the SFT renderer makes on a Qwen3.5 processor
(``apply_chat_template`` and ``__call__``), so rows render through the same code for both
families. Image parts of a row render as the template's placeholder text; no pixels are read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from captain_training.models.family import ModelError
from captain_training.models.text_template import IMAGE_TEXT


class TextProcessor:
    """Tokenizer + chat template of a text-only model.

    Args:
        tokenizer: a transformers tokenizer whose vocabulary has ``<|im_start|>``/``<|im_end|>``.
        chat_template: Jinja source of the chat template (the text-only Qwen3.5 format).
        image_text: what the template renders for an image part (for reporting only).

    Attributes:
        text_only: always True (the renderer reads no pixels and adds no image tokens).
        image_processor: None.
    """

    text_only = True
    image_processor = None

    def __init__(self, tokenizer: Any, chat_template: str, image_text: str = IMAGE_TEXT) -> None:
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.image_text = image_text
        self.tokenizer.chat_template = chat_template

    @classmethod
    def from_dir(cls, model_dir: Path | str, *, chat_template: str | None = None) -> TextProcessor:
        """Load from a model directory (``tokenizer.json`` + ``chat_template.jinja``)."""
        from transformers import AutoTokenizer

        path = Path(model_dir)
        if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
            raise ModelError(f"{path} has no tokenizer files (tokenizer.json)")
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        if chat_template is None:
            template_file = path / "chat_template.jinja"
            chat_template = (template_file.read_text(encoding="utf-8") if template_file.is_file()
                             else getattr(tokenizer, "chat_template", None))
        if not chat_template:
            raise ModelError(f"{path} has no chat template (chat_template.jinja)")
        return cls(tokenizer, chat_template)

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                            tokenize: bool = False, add_generation_prompt: bool = False, **kwargs: Any) -> Any:
        """Render messages with the chat template (text; token ids with ``tokenize=True``)."""
        text = self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                  add_generation_prompt=add_generation_prompt, **kwargs)
        if not tokenize:
            return text
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def __call__(self, text: list[str] | str, images: Any = None, return_tensors: str | None = "pt",
                 **kwargs: Any) -> dict[str, Any]:
        """Token ids of rendered text (images are already placeholders in the text and are ignored)."""
        texts = [text] if isinstance(text, str) else list(text)
        return dict(self.tokenizer(texts, add_special_tokens=False, return_tensors=return_tensors))
