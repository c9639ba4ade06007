"""Atomic training checkpoints and resume.

A checkpoint is a directory ``<out>/checkpoints/step-XXXXXXXX`` with the model and optimizer
state written by ``torch.distributed.checkpoint`` (each rank writes its own shards; the
output directory must be on a filesystem every rank sees) and ``trainer_state.json`` (step,
scheduler, data fingerprint). It is written under a hidden staging name and renamed into
place only when complete; ``<out>/checkpoints/latest`` names the newest complete checkpoint
and is itself replaced atomically. A crash while saving leaves the previous checkpoint
intact; staging directories are removed on the next save.

The final model is exported separately in Hugging Face format (``save_pretrained``) together
with the processor files, ready for vLLM or the next training stage.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from captain_training.sft.distributed import DistContext
from captain_training.sft.errors import CheckpointError

CHECKPOINTS_DIR = "checkpoints"
LATEST_FILE = "latest"
STATE_FILE = "trainer_state.json"
PREFIX = "step-"


def checkpoints_root(output_dir: Path) -> Path:
    """Directory holding the checkpoints of a run."""
    return Path(output_dir) / CHECKPOINTS_DIR


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete checkpoint of a run, or ``None``."""
    root = checkpoints_root(output_dir)
    pointer = root / LATEST_FILE
    if not pointer.is_file():
        return None
    path = root / pointer.read_text().strip()
    if not (path / STATE_FILE).is_file():
        raise CheckpointError(f"{pointer} names {path.name}, which is incomplete; remove {pointer} to start over "
                              "or point --resume at another checkpoint")
    return path


@contextlib.contextmanager
def _quiet_single_process() -> Iterator[None]:
    """Silence torch.distributed.checkpoint's notice that it runs without a process group."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def save_checkpoint(
    ctx: DistContext,
    output_dir: Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    trainer_state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write checkpoint ``step`` (every rank calls this); return its directory."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    root = checkpoints_root(output_dir)
    final = root / f"{PREFIX}{step:08d}"
    staging = root / f".staging-{PREFIX}{step:08d}"
    if ctx.is_main:
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob(".staging-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging.mkdir()
    ctx.barrier()
    model_state, optim_state = get_state_dict(model, optimizer)
    with _quiet_single_process():
        dcp.save({"model": model_state, "optimizer": optim_state}, checkpoint_id=str(staging))
    ctx.barrier()
    if ctx.is_main:
        (staging / STATE_FILE).write_text(json.dumps(trainer_state, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
        _write_atomic(root / LATEST_FILE, final.name + "\n")
        complete = sorted(p for p in root.glob(f"{PREFIX}*") if (p / STATE_FILE).is_file())
        for old in complete[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    ctx.barrier()
    return final


def load_checkpoint(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Load model and optimizer state from checkpoint ``path``; return its trainer state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    state_file = Path(path) / STATE_FILE
    if not state_file.is_file():
        raise CheckpointError(f"{path} is not a complete checkpoint (no {STATE_FILE})")
    model_state, optim_state = get_state_dict(model, optimizer)
    with _quiet_single_process():
        dcp.load({"model": model_state, "optimizer": optim_state}, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
    return json.loads(state_file.read_text())


PROCESSOR_FILE_NAMES = (
    "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json", "processor_config.json",
    "chat_template.jinja", "chat_template.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "generation_config.json", "video_preprocessor_config.json",
)


def export_model(ctx: DistContext, wrapper: torch.nn.Module, model_path: Path, out_dir: Path,
                 dtype: torch.dtype | None = None) -> Path | None:
    """Save the trained model in Hugging Face format plus the source model's processor files.

    Every rank calls this (the full state dict is gathered); rank 0 writes ``out_dir``
    through a staging directory and returns it. ``dtype`` converts floating tensors
    (e.g. ``torch.bfloat16`` for a bf16 run, whose master weights are fp32).
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(wrapper, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    out_dir = Path(out_dir)
    if not ctx.is_main:
        ctx.barrier()
        return None
    prefix = "model."
    state = {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in state.items()}
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    staging = out_dir.with_name(f".{out_dir.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    inner: Any = wrapper.model
    inner.save_pretrained(str(staging), state_dict=state)
    for name in PROCESSOR_FILE_NAMES:
        src = Path(model_path) / name
        if src.is_file() and not (staging / name).exists():
            shutil.copy2(src, staging / name)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(staging, out_dir)
    ctx.barrier()
    return out_dir
