"""A tiny random ``Qwen3_5ForConditionalGeneration`` with the real Qwen3.5 vocabulary.

Same architecture as the released models (hybrid Gated-DeltaNet and full attention layers,
M-RoPE, a ViT with 2x2 patch merging) at toy width (hidden 32, 16M parameters, almost all of
them the 248k-row embedding and output layer), so the SFT trainer runs the real code path on
a CPU. It is not fast: without the flash-linear-attention and causal-conv1d kernels
transformers runs the Gated-DeltaNet layers in pure PyTorch, and the 248k-vocabulary output
layer dominates; ``captain bench sft`` measured ~20 s per step on ~1k-token rows (52 tokens/s)
on a busy 2-core machine, and real harness rows took 22-65 s per step. The model directory it
writes also holds the offline processor files, so it loads exactly like a real checkpoint
directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from captain_training.qwen.cache import cached_build
from captain_training.qwen.processor import write_processor_files
from captain_training.qwen.special_tokens import MODEL_VOCAB_SIZE

#: Bump when the tiny configuration or the processor files change (invalidates the cache).
TINY_VERSION = "v2"

#: Image pixel budget of the tiny fixture: a 32x32 image is 2x2 patches -> one image token.
TINY_MIN_PIXELS = 32 * 32
TINY_MAX_PIXELS = 128 * 128


def tiny_config_dict(vocab_size: int = MODEL_VOCAB_SIZE) -> dict[str, Any]:
    """Keyword arguments of ``Qwen3_5Config`` for the tiny model (2 text layers, hidden 32)."""
    return {
        "text_config": {
            "vocab_size": vocab_size,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 2,
            "layer_types": ["linear_attention", "full_attention"],
            "max_position_embeddings": 8192,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10_000_000.0,
                "partial_rotary_factor": 0.25,
                "mrope_section": [2, 1, 1],
                "mrope_interleaved": True,
            },
        },
        "vision_config": {
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 32,
            "num_position_embeddings": 64,
        },
        "tie_word_embeddings": False,
    }


def build_tiny_model_dir(out_dir: Path, *, seed: int = 0) -> Path:
    """Write a tiny random Qwen3.5 model plus the offline processor files into ``out_dir``."""
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(Qwen3_5Config(**tiny_config_dict()))
    model.save_pretrained(str(out_dir))
    write_processor_files(out_dir, min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS)
    return out_dir


def cached_tiny_model_dir(*, seed: int = 0, root: Path | None = None) -> Path:
    """The tiny model directory from the build cache (built on first use, ~15 s)."""
    return cached_build(f"qwen3_5-tiny-{TINY_VERSION}-seed{seed}",
                        lambda d: build_tiny_model_dir(d, seed=seed), root=root)


def cached_processor_dir(*, root: Path | None = None) -> Path:
    """Offline processor files with the released image settings, from the build cache."""
    return cached_build(f"qwen3_5-processor-{TINY_VERSION}", write_processor_files, root=root)
