"""Loading the Qwen3.5 processor (tokenizer + image processor + chat template) for training.

A real Qwen3.5 checkpoint directory and the offline fixture directory have the same files
(``tokenizer.json``, ``tokenizer_config.json``, ``preprocessor_config.json``,
``chat_template.jinja``) and load through :func:`load_processor`.

The processor is image-only: it binds images to ``<|image_pad|>`` placeholders in order of
appearance exactly like ``Qwen3VLProcessor`` but has no video processor, because the video
processor needs torchvision, which does not import beside the CPU build of torch. SFT rows
contain images only. With ``image_backend="auto"`` the torchvision image processor is used
where torchvision imports, the PIL one elsewhere.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from captain_training.qwen.template import TEMPLATE_FILE, chat_template_text
from captain_training.qwen.tokenizer import build_tokenizer_files

#: Image processor settings of the released Qwen3.5 models: 16-px patches merged 2x2 into one
#: token, pixel budget between 256x256 and 4096x4096.
QWEN3_5_IMAGE_PROCESSOR: dict[str, Any] = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
}

PROCESSOR_FILES = ("tokenizer.json", "tokenizer_config.json", "preprocessor_config.json", TEMPLATE_FILE)


def write_processor_files(
    out_dir: Path, *, min_pixels: int | None = None, max_pixels: int | None = None
) -> Path:
    """Write the offline Qwen3.5 processor files into ``out_dir`` and return it.

    Args:
        out_dir: target directory (created).
        min_pixels, max_pixels: image pixel budget (area in pixels) if different from the
            released one; the tiny test model uses a small budget so images cost few tokens.
    """
    out_dir = Path(out_dir)
    build_tokenizer_files(out_dir)
    config = json.loads(json.dumps(QWEN3_5_IMAGE_PROCESSOR))
    if min_pixels is not None:
        config["size"]["shortest_edge"] = int(min_pixels)
    if max_pixels is not None:
        config["size"]["longest_edge"] = int(max_pixels)
    (out_dir / "preprocessor_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out_dir / TEMPLATE_FILE).write_text(chat_template_text(), encoding="utf-8")
    return out_dir


@functools.cache
def _image_only_processor_class() -> type:
    from transformers import Qwen3VLProcessor

    class ImageOnlyQwen3VLProcessor(Qwen3VLProcessor):
        """``Qwen3VLProcessor`` without the video processor (which needs torchvision)."""

        def __init__(self, image_processor: Any = None, tokenizer: Any = None, chat_template: str | None = None,
                     **kwargs: Any) -> None:
            super().__init__(image_processor=image_processor, tokenizer=tokenizer, video_processor=None,
                             chat_template=chat_template, **kwargs)

    return ImageOnlyQwen3VLProcessor


def _read_chat_template(path: Path, tokenizer: Any) -> str | None:
    template_file = path / TEMPLATE_FILE
    if template_file.is_file():
        return template_file.read_text(encoding="utf-8")
    processor_config = path / "processor_config.json"
    if processor_config.is_file():
        template = json.loads(processor_config.read_text()).get("chat_template")
        if template:
            return str(template)
    template = getattr(tokenizer, "chat_template", None)
    return str(template) if template else None


def load_processor(path: Path | str, *, chat_template: str | None = None, image_backend: str = "auto") -> Any:
    """Load the processor of a Qwen3.5 model directory (real checkpoint or offline fixture).

    Args:
        path: model directory holding the tokenizer, ``preprocessor_config.json`` and a chat template.
        chat_template: Jinja source that replaces the directory's template (optional).
        image_backend: ``"auto"`` (torchvision where available, else PIL), ``"pil"`` or ``"torchvision"``.

    Returns:
        A ``Qwen3VLProcessor`` (image-only) whose ``apply_chat_template`` renders rows.
    """
    from transformers import AutoImageProcessor, AutoTokenizer
    from transformers.utils import is_torchvision_available

    path = Path(path)
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
        raise FileNotFoundError(
            f"{path} has no tokenizer files; pass a Qwen3.5 model directory or one written by "
            "captain_training.qwen.processor.write_processor_files"
        )
    if image_backend not in ("auto", "pil", "torchvision"):
        raise ValueError(f"image_backend {image_backend!r} is not one of: auto, pil, torchvision")
    backend = image_backend
    if backend == "auto":
        backend = "torchvision" if is_torchvision_available() else "pil"
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    image_processor = AutoImageProcessor.from_pretrained(str(path), backend=backend)
    template = chat_template if chat_template is not None else _read_chat_template(path, tokenizer)
    if not template:
        raise FileNotFoundError(f"{path} has no chat template ({TEMPLATE_FILE}); pass chat_template=")
    processor_class = _image_only_processor_class()
    return processor_class(image_processor=image_processor, tokenizer=tokenizer, chat_template=template)
