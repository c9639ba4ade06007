"""``captain bench sft``: throughput of validate and prepare, and of a few training steps.

Runs over a generated synthetic row file (``synthetic.py``) in a temporary directory. The
training figures use the tiny random Qwen3.5 unless ``model`` names a real model directory
(then ``device="cuda"`` and ``precision="bf16"`` measure the real thing on a GPU).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path


def run(
    rows: int = 200,
    turns_per_row: int = 4,
    words_per_turn: int = 40,
    image_size_px: int = 64,
    train_rows: int = 8,
    train_steps: int = 4,
    model: str | None = None,
    device: str = "auto",
    precision: str = "fp32",
    seed: int = 0,
) -> dict[str, float]:
    """Measure the SFT pipeline; figures carry their units in the key names.

    Args:
        rows: synthetic rows validated and prepared.
        turns_per_row, words_per_turn, image_size_px: size of each synthetic agent row.
        train_rows: rows of the (separately prepared) training file.
        train_steps: optimizer steps timed (the first one, warm-up, is excluded from the rate).
        model: model directory (default: the cached tiny random Qwen3.5).
        device, precision: as for ``captain sft train``.
        seed: seed of the synthetic data.
    """
    from captain_training.qwen.processor import load_processor
    from captain_training.qwen.tiny_model import cached_tiny_model_dir
    from captain_training.sft.prepare import prepare
    from captain_training.sft.reader import validate_file
    from captain_training.sft.synthetic import write_synthetic_rows
    from captain_training.sft.trainer import TrainConfig, train

    model_dir = Path(model) if model else cached_tiny_model_dir()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="captain-bench-sft-") as tmp:
        root = Path(tmp)
        data = write_synthetic_rows(root / "rows.jsonl", root, n_rows=rows, turns_per_row=turns_per_row,
                                    words_per_turn=words_per_turn, image_size_px=image_size_px, seed=seed)
        report = validate_file(data, image_root=root)
        if not report.ok:
            raise RuntimeError(f"synthetic rows are malformed: {report.problems[:3]}")
        figures["validate_rows_per_s"] = report.rows_per_s
        figures["validate_mb_per_s"] = report.n_bytes / 2**20 / report.elapsed_s

        started = time.perf_counter()
        processor = load_processor(model_dir)
        figures["processor_load_s"] = time.perf_counter() - started
        started = time.perf_counter()
        prepare(data, root / "prepared", processor_path=model_dir, image_root=root, processor=processor)
        figures["prepare_rows_per_s"] = rows / (time.perf_counter() - started)

        train_data = write_synthetic_rows(root / "train.jsonl", root / "train_images", n_rows=train_rows,
                                          turns_per_row=turns_per_row, words_per_turn=words_per_turn,
                                          image_size_px=image_size_px, seed=seed + 1)
        prepare(train_data, root / "train_prepared", processor_path=model_dir, image_root=root / "train_images",
                processor=processor)
        config = TrainConfig(data=root / "train_prepared", model=model_dir, output_dir=root / "run",
                             max_steps=train_steps, precision=precision, device=device, save_every_steps=0,
                             checkpoint_at_end=False, export_final=False, log_every_steps=10**9)
        result = train(config, processor=processor)
        timed = result.metrics[1:] or result.metrics
        figures["train_tokens_per_s"] = statistics.median(m.tokens_per_s for m in timed)
        figures["train_step_s"] = statistics.median(m.step_time_s for m in timed)
        figures["train_tokens_per_step"] = statistics.mean(m.tokens for m in timed)
        figures["train_peak_mem_mb"] = max(m.peak_mem_mb for m in result.metrics)
    return figures
