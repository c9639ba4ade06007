"""Model families, read from a model directory's ``config.json``, and the loaders every stage uses.

Two families:

* ``qwen3_5_vlm``: a Qwen3.5 vision-language model (``Qwen3_5ForConditionalGeneration``,
  ``model_type`` ``qwen3_5``). Images go through its vision tower (frozen in SFT); the
  processor is the offline image-only Qwen3.5 processor.
* ``causal_lm``: any other Hugging Face causal LM that ``AutoModelForCausalLM`` knows
  (Llama/SmolLM2, Qwen3, a text-only Qwen3.5, ...). It is text-only: its chat template renders
  each image as a placeholder text (``text_template.py``), and its processor is
  :class:`~captain_training.models.text_processor.TextProcessor`.

The family is decided here and only here; the SFT trainer, the RL endpoint and ``captain
serve`` ask :func:`family_of` and call the loaders below. Attention defaults to PyTorch's
scaled-dot-product kernel (``sdpa``) on every device.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Marker file ``captain model build`` writes into a model directory (name, family, source).
MODEL_CARD_FILE = "captain_model.json"
#: Attention backend used unless a caller asks for another.
DEFAULT_ATTENTION = "sdpa"


class ModelError(ValueError):
    """A model directory is missing, incomplete, or of an architecture no stage supports."""


@dataclass(frozen=True)
class ModelFamily:
    """What a stage needs to know about a model's architecture.

    Attributes:
        name: ``qwen3_5_vlm`` or ``causal_lm``.
        multimodal: the model consumes pixels (a vision tower); otherwise images are text placeholders.
        model_type: the config's ``model_type`` (e.g. ``qwen3_5``, ``llama``).
    """

    name: str
    multimodal: bool
    model_type: str


QWEN3_5_VLM = "qwen3_5_vlm"
CAUSAL_LM = "causal_lm"
_VLM_TYPES = {"qwen3_5": QWEN3_5_VLM}


def read_config(model_dir: Path | str) -> Any:
    """The transformers config of a local model directory (``ModelError`` if there is none)."""
    from transformers import AutoConfig

    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise ModelError(f"no model at {path} (config.json missing); give a local model directory, e.g. one made "
                         "by `captain model build smollm2-135m --out DIR`")
    return AutoConfig.from_pretrained(str(path))


def family_of(model: Path | str | Any) -> ModelFamily:
    """The family of a model directory or a transformers config (see the module docstring)."""
    config = read_config(model) if isinstance(model, (str, Path)) else model
    model_type = str(getattr(config, "model_type", ""))
    if model_type in _VLM_TYPES:
        return ModelFamily(_VLM_TYPES[model_type], True, model_type)
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING:
        return ModelFamily(CAUSAL_LM, False, model_type)
    if getattr(config, "vision_config", None) is not None:
        raise ModelError(f"model_type {model_type!r} is a multimodal model this pipeline does not load; supported: "
                         f"Qwen3.5 VLMs ({', '.join(_VLM_TYPES)}) and any text-only causal LM")
    raise ModelError(f"model_type {model_type!r} is not a causal language model transformers can load with "
                     "AutoModelForCausalLM")


def load_model(model_dir: Path | str, *, dtype: Any = None, device: str | Any = "cpu",
               attn_implementation: str | None = None) -> Any:
    """Load the model of a directory with the class its family uses (fp32 unless ``dtype``), on ``device``."""
    import torch

    family = family_of(model_dir)
    if family.name == QWEN3_5_VLM:
        from transformers import Qwen3_5ForConditionalGeneration as ModelClass
    else:
        from transformers import AutoModelForCausalLM as ModelClass
    model = ModelClass.from_pretrained(str(model_dir), dtype=dtype or torch.float32,
                                       attn_implementation=attn_implementation or DEFAULT_ATTENTION)
    return model.to(device)


def decoder(model: Any) -> Any:
    """The module that maps input ids (and pixels, for a VLM) to last hidden states."""
    return getattr(model, model.base_model_prefix)


def output_layer(model: Any) -> Any:
    """The output projection (hidden state -> vocabulary logits)."""
    head = model.get_output_embeddings()
    if head is None:
        raise ModelError(f"{type(model).__name__} has no output layer")
    return head


def vision_tower(model: Any) -> Any | None:
    """The vision encoder of a multimodal model (None for a text-only one)."""
    inner = decoder(model)
    return getattr(inner, "visual", None)


def decoder_layers(model: Any) -> list[Any]:
    """The transformer blocks of the language model (the units FSDP2 shards one by one)."""
    inner = decoder(model)
    language = getattr(inner, "language_model", inner)
    layers = getattr(language, "layers", None)
    if layers is None:
        raise ModelError(f"{type(model).__name__}: no decoder layers found at {type(language).__name__}.layers")
    return list(layers)


def freeze_for_sft(model: Any) -> None:
    """Freeze what SFT does not train: the vision tower of a VLM (nothing for a text model)."""
    tower = vision_tower(model)
    if tower is not None:
        for param in tower.parameters():
            param.requires_grad_(False)


def load_processor(model_dir: Path | str, *, chat_template: str | None = None) -> Any:
    """The processor that renders rows for a model: Qwen3.5's image-only processor for the VLM
    family, a :class:`TextProcessor` (tokenizer + chat template) for text-only causal LMs."""
    family = family_of(model_dir)
    if family.multimodal:
        from captain_training.qwen.processor import load_processor as load_qwen_processor

        return load_qwen_processor(model_dir, chat_template=chat_template)
    from captain_training.models.text_processor import TextProcessor

    return TextProcessor.from_dir(model_dir, chat_template=chat_template)


def load_chat_tokenizer(model_dir: Path | str) -> Any:
    """The tokenizer of a model directory with its chat template attached (for serving)."""
    from transformers import AutoTokenizer

    path = Path(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    template = path / "chat_template.jinja"
    if template.is_file():
        tokenizer.chat_template = template.read_text(encoding="utf-8")
    if not getattr(tokenizer, "chat_template", None):
        raise ModelError(f"{path} has no chat template (chat_template.jinja); rebuild it with `captain model build` "
                         "or add the template the harness parses")
    return tokenizer


def model_card(model_dir: Path | str) -> dict[str, Any]:
    """The ``captain_model.json`` of a directory built by ``captain model build`` (empty if absent)."""
    path = Path(model_dir) / MODEL_CARD_FILE
    return json.loads(path.read_text()) if path.is_file() else {}
