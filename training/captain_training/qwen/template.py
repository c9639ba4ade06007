"""The Qwen3.5 chat template shipped with this package."""

from __future__ import annotations

from importlib import resources

TEMPLATE_FILE = "chat_template.jinja"


def chat_template_text() -> str:
    """The Jinja source of the Qwen3.5 chat template (``chat_template.jinja`` in this package)."""
    return resources.files("captain_training.qwen").joinpath(TEMPLATE_FILE).read_text(encoding="utf-8")
