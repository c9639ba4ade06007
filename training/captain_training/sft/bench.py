"""``captain bench sft``: throughput of validate and prepare, and of a few training steps per model.

Runs over a generated synthetic row file (``synthetic.py``) in a temporary directory. Training
is timed for each model of ``models`` (names of ``captain model build``, built into the cache
on first use, or model directories): by default the tiny random Qwen3.5 and SmolLM2-135M, so
the figures show both the pipeline's overhead and a real pretrained model's speed on this
machine. ``device="cuda"`` and ``precision="bf16"`` measure a real model on a GPU. The first
step of each model is warm-up and is left out of the rates.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def _model_dir(spec: str) -> Path:
    from captain_training.models.build import MODELS, cached_model_dir

    if spec in MODELS:
        return cached_model_dir(spec)
    path = Path(spec)
    if not (path / "config.json").is_file():
        raise ValueError(f"model {spec!r} is neither a name ({', '.join(MODELS)}) nor a model directory")
    return path


def _key(spec: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", Path(spec).name.lower()).strip("_")


def run(
    rows: int = 200,
    turns_per_row: int = 4,
    words_per_turn: int = 40,
    image_size_px: int = 64,
    train_rows: int = 8,
    train_steps: int = 4,
    models: str = "tiny-qwen3.5,smollm2-135m",
    model: str | None = None,
    device: str = "auto",
    precision: str = "fp32",
    seed: int = 0,
) -> dict[str, Any]:
    """Measure the SFT pipeline; figures carry their units in the key names.

    Args:
        rows: synthetic rows validated and prepared.
        turns_per_row, words_per_turn, image_size_px: size of each synthetic agent row.
        train_rows: rows of the (separately prepared) training file.
        train_steps: optimizer steps timed per model (the first one, warm-up, is excluded).
        models: comma-separated model names (``captain model list``) or directories to train.
        model: one model directory (overrides ``models``).
        device, precision: as for ``captain sft train``.
        seed: seed of the synthetic data.
    """
    from captain_training.models.family import load_processor
    from captain_training.sft.prepare import prepare
    from captain_training.sft.reader import validate_file
    from captain_training.sft.synthetic import write_synthetic_rows
    from captain_training.sft.trainer import TrainConfig, train

    specs = [model] if model else [m.strip() for m in models.split(",") if m.strip()]
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="captain-bench-sft-") as tmp:
        root = Path(tmp)
        data = write_synthetic_rows(root / "rows.jsonl", root, n_rows=rows, turns_per_row=turns_per_row,
                                    words_per_turn=words_per_turn, image_size_px=image_size_px, seed=seed)
        report = validate_file(data, image_root=root)
        if not report.ok:
            raise RuntimeError(f"synthetic rows are malformed: {report.problems[:3]}")
        figures["validate_rows_per_s"] = report.rows_per_s
        figures["validate_mb_per_s"] = report.n_bytes / 2**20 / report.elapsed_s
        train_data = write_synthetic_rows(root / "train.jsonl", root / "train_images", n_rows=train_rows,
                                          turns_per_row=turns_per_row, words_per_turn=words_per_turn,
                                          image_size_px=image_size_px, seed=seed + 1)
        for index, spec in enumerate(specs):
            key = _key(spec)
            model_dir = _model_dir(spec)
            started = time.perf_counter()
            processor = load_processor(model_dir)
            figures[f"{key}_processor_load_s"] = time.perf_counter() - started
            if index == 0:
                started = time.perf_counter()
                prepare(data, root / "prepared", processor_path=model_dir, image_root=root, processor=processor)
                figures["prepare_rows_per_s"] = rows / (time.perf_counter() - started)
            prepared = prepare(train_data, root / f"train_prepared_{index}", processor_path=model_dir,
                               image_root=root / "train_images", processor=processor)
            config = TrainConfig(data=prepared.path, model=model_dir, output_dir=root / f"run_{index}",
                                 max_steps=train_steps, precision=precision, device=device, save_every_steps=0,
                                 checkpoint_at_end=False, export_final=False, log_every_steps=10**9)
            result = train(config, processor=processor)
            timed = result.metrics[1:] or result.metrics
            figures[f"{key}_train_tokens_per_s"] = statistics.median(m.tokens_per_s for m in timed)
            figures[f"{key}_train_step_s"] = statistics.median(m.step_time_s for m in timed)
            figures[f"{key}_train_tokens_per_step"] = statistics.mean(m.tokens for m in timed)
            figures[f"{key}_train_supervised_tokens_per_step"] = statistics.mean(m.supervised_tokens for m in timed)
            figures[f"{key}_train_peak_mem_mb"] = max(m.peak_mem_mb for m in result.metrics)
    return figures
