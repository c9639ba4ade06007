"""Fixtures: tiny model directories of each family from the build cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# the row helpers of the SFT tests (sft_rows.py)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))


@pytest.fixture(scope="session")
def tiny_smollm2_dir() -> Path:
    """A random 2-layer Llama with the real SmolLM2 tokenizer and the text-only template (~20 s once)."""
    from captain_training.models.build import cached_model_dir

    return cached_model_dir("tiny-smollm2")


@pytest.fixture(scope="session")
def tiny_qwen_dir() -> Path:
    """The tiny random Qwen3.5 VLM."""
    from captain_training.models.build import cached_model_dir

    return cached_model_dir("tiny-qwen3.5")
