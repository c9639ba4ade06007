"""``captain sft validate|prepare|train``.

Typical use with the released data (dataset root ``captain-sft-data``)::

    captain sft validate captain-sft-data/data/sft.jsonl --image-root captain-sft-data
    captain sft prepare captain-sft-data/data/sft.jsonl --model Qwen3.5-4B --image-root captain-sft-data \\
        --world 16 --out prepared/
    torchrun --nnodes 2 --nproc-per-node 8 ... -m captain_training.sft train \\
        --data prepared/ --model Qwen3.5-4B --out runs/captain-4b-sft --epochs 1.5 --gradient-checkpointing

Heavy modules (torch, transformers) are imported inside the commands.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Supervised fine-tuning on CaPtain-SFT-Data rows: validate, prepare, train.")


def _fail(exc: BaseException) -> None:
    message = str(exc)
    for note in getattr(exc, "__notes__", []):
        message += f"\n  {note}"
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


@app.command()
def validate(
    data: Annotated[Path, typer.Argument(help="JSONL row file (one JSON object per line).")],
    image_root: Annotated[Path | None, typer.Option(help="Dataset root the image paths are relative to; "
                                                         "when given, every image must exist.")] = None,
    max_problems: Annotated[int, typer.Option(help="List at most this many problems.")] = 1000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")] = False,
) -> None:
    """Check every row of a data file and report all problems at once (exit code 1 if any)."""
    from captain_training.sft.reader import validate_file

    if not data.is_file():
        _fail(FileNotFoundError(f"{data} is not a file"))
    report = validate_file(data, image_root=image_root, max_problems=max_problems)
    if as_json:
        typer.echo(json.dumps(report.to_dict()))
    else:
        for problem in report.problems:
            typer.echo(str(problem))
        if report.truncated:
            typer.echo(f"... more problems not listed (--max-problems {max_problems})")
        counts = ", ".join(f"{k}={v}" for k, v in report.counts.get("source", {}).items())
        typer.echo(f"{data}: {report.n_rows} rows, {report.n_bad_rows} with problems; {counts}; "
                   f"{report.n_assistant_turns} assistant turns, {report.n_images} images; "
                   f"{report.rows_per_s:.0f} rows/s")
    if not report.ok:
        raise typer.Exit(code=1)


@app.command()
def prepare(
    data: Annotated[Path, typer.Argument(help="JSONL row file in global training order.")],
    model: Annotated[Path, typer.Option(help="Model directory (tokenizer, chat template; a VLM also its "
                                                    "image processor).")],
    out: Annotated[Path, typer.Option(help="Prepared data directory to write.")],
    image_root: Annotated[Path | None, typer.Option(help="Dataset root the image paths are relative to.")] = None,
    world: Annotated[int, typer.Option(help="Number of training ranks W.")] = 1,
    grad_accum: Annotated[int, typer.Option(help="Micro-steps (rows per rank) per optimizer step.")] = 1,
    max_length: Annotated[int, typer.Option(help="Longest allowed row in tokens; longer rows are errors.")] = 65536,
    suite_cap: Annotated[int | None, typer.Option(help="Keep at most this many agent rows per suite.")] = None,
    qa_loss_weight: Annotated[float, typer.Option(help="Loss weight of visual-QA rows.")] = 0.5,
    hint_mask_p: Annotated[float, typer.Option(help="Text-hint mask probability used in training.")] = 0.2,
    workers: Annotated[int, typer.Option(help="Processes measuring rows.")] = 1,
    drop_too_long: Annotated[bool, typer.Option(help="Leave out (and count) rows longer than --max-length "
                                                     "instead of failing; rows are never truncated.")] = False,
) -> None:
    """Check, measure (lengths, supervised tokens), re-order for W ranks and compute the loss constant."""
    from captain_training.sft.errors import SFTError
    from captain_training.sft.prepare import prepare as run_prepare

    def progress(n_rows: int) -> None:
        typer.echo(f"  measured {n_rows} rows", err=True)

    try:
        prepared = run_prepare(data, out, processor_path=model, image_root=image_root, world_size=world,
                               grad_accum=grad_accum, max_length=max_length, suite_cap=suite_cap,
                               qa_loss_weight=qa_loss_weight, hint_mask_probability=hint_mask_p,
                               workers=workers, progress=progress, drop_too_long=drop_too_long)
    except (SFTError, FileNotFoundError) as exc:
        _fail(exc)
        return
    m = prepared.manifest
    typer.echo(f"prepared {m['n_rows']} of {m['n_source_rows']} rows for {world} rank(s) x {grad_accum} "
               f"({m['optimizer_steps_per_epoch']} steps per epoch; {m['n_dropped_incomplete_step']} rows of an "
               f"incomplete last step dropped, {m['n_dropped_too_long']} longer than --max-length dropped); "
               f"longest row {m['max_row_tokens']} tokens; "
               f"C_row={m['loss_constant']['per_row']:.2f}, C_step={m['loss_constant']['per_step']:.1f} -> {out}")


@app.command()
def train(
    data: Annotated[Path, typer.Option(help="Prepared data directory (captain sft prepare).")],
    model: Annotated[Path, typer.Option(help="Model directory to start from (any causal LM or a Qwen3.5 VLM).")],
    out: Annotated[Path, typer.Option(help="Run directory: checkpoints, metrics.jsonl, final model.")],
    image_root: Annotated[Path | None, typer.Option(help="Dataset root (default: the one given to prepare).")] = None,
    epochs: Annotated[float, typer.Option(help="Passes over the rows (1.5 in the paper).")] = 1.0,
    max_steps: Annotated[int | None, typer.Option(help="Optimizer steps of the schedule (overrides epochs).")] = None,
    stop_after_steps: Annotated[int | None, typer.Option(help="End this process after N steps "
                                                              "(checkpointed; resume later).")] = None,
    lr: Annotated[float, typer.Option(help="Peak learning rate.")] = 1e-5,
    warmup_steps: Annotated[int, typer.Option(help="Linear warm-up steps.")] = 0,
    min_lr_ratio: Annotated[float, typer.Option(help="Final LR as a fraction of the peak.")] = 0.0,
    weight_decay: Annotated[float, typer.Option(help="AdamW weight decay (matrices only).")] = 0.0,
    max_grad_norm: Annotated[float, typer.Option(help="Gradient clipping (global L2 norm).")] = 1.0,
    qa_loss_weight: Annotated[float, typer.Option(help="Loss weight of visual-QA rows.")] = 0.5,
    hint_mask_p: Annotated[float, typer.Option(help="Text-hint mask probability per history mark_point.")] = 0.2,
    seed: Annotated[int, typer.Option(help="Seed of the text-hint mask.")] = 0,
    loss_constant: Annotated[float | None, typer.Option(help="Per-row loss constant C_row "
                                                              "(default: from prepare).")] = None,
    max_length: Annotated[int | None, typer.Option(help="Longest allowed row (default: from prepare).")] = None,
    precision: Annotated[str, typer.Option(help="bf16 (fp32 master weights) or fp32.")] = "bf16",
    strategy: Annotated[str, typer.Option(help="auto, single or fsdp2.")] = "auto",
    device: Annotated[str, typer.Option(help="auto, cuda or cpu.")] = "auto",
    attn_implementation: Annotated[str | None, typer.Option(help="transformers attention backend.")] = None,
    gradient_checkpointing: Annotated[bool, typer.Option(help="Recompute activations in backward.")] = False,
    save_every: Annotated[int, typer.Option(help="Checkpoint every N optimizer steps (0: at the end).")] = 200,
    keep_checkpoints: Annotated[int, typer.Option(help="Complete checkpoints to keep.")] = 2,
    log_every: Annotated[int, typer.Option(help="Progress line every N steps.")] = 1,
    resume: Annotated[str, typer.Option(help="auto, never, or a checkpoint directory.")] = "auto",
    export_final: Annotated[bool, typer.Option(help="Write <out>/final when the schedule ends.")] = True,
) -> None:
    """Fine-tune the language model (vision tower frozen); single device or FSDP2 under torchrun."""
    import os

    from captain_training.sft.errors import SFTError
    from captain_training.sft.trainer import TrainConfig
    from captain_training.sft.trainer import train as run_train

    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format="%(asctime)s %(message)s", stream=sys.stdout)
    config = TrainConfig(
        data=data, model=model, output_dir=out, image_root=image_root, epochs=epochs, max_steps=max_steps,
        stop_after_steps=stop_after_steps, learning_rate=lr, warmup_steps=warmup_steps, min_lr_ratio=min_lr_ratio,
        weight_decay=weight_decay, max_grad_norm=max_grad_norm, qa_loss_weight=qa_loss_weight,
        hint_mask_probability=hint_mask_p, seed=seed, loss_constant=loss_constant, max_length=max_length,
        precision=precision, strategy=strategy, device=device, attn_implementation=attn_implementation,
        gradient_checkpointing=gradient_checkpointing, save_every_steps=save_every,
        keep_checkpoints=keep_checkpoints, log_every_steps=log_every, resume=resume, export_final=export_final)
    try:
        result = run_train(config)
    except (SFTError, FileNotFoundError) as exc:
        _fail(exc)
        return
    if rank == 0:
        typer.echo(f"done: {result.steps_done}/{result.total_steps} steps; last checkpoint "
                   f"{result.last_checkpoint}; final model {result.final_model}")
