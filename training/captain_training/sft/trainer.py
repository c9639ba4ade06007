"""``captain sft train``: full fine-tuning of a language model on prepared rows.

The model is any Hugging Face causal LM or a Qwen3.5 VLM; its family comes from the model
directory's config (``captain_training.models.family``), which also picks the processor that
renders rows (text-only models see each image as the template's placeholder text).

Per optimizer step every rank trains ``grad_accum`` rows of its shard, one row per
micro-step (no padding, no packing beyond what the rows already are). The vision tower is
frozen (VLM only); every language-model weight (embeddings, decoder layers, output layer) is trained
with AdamW under a warm-up + cosine schedule (peak 1e-5 in the paper) and gradient clipping
at 1.0. Logits are computed only at supervised positions (``loss.py``); the loss is
``sum(weight * token NLL) / C`` with the constant ``C`` from ``captain sft prepare``.

Runs on one device (CPU or GPU, ``--strategy single``) or sharded with FSDP2 under torchrun
(``--strategy fsdp2``, ``distributed.py``). ``--precision bf16`` keeps fp32 master weights and
computes in bf16. Checkpoints are atomic and a run resumes exactly where it stopped
(``checkpoint.py``); the row order and the text-hint mask depend only on the step, so a
resumed run sees the same rows and masks as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from captain_training.sft.checkpoint import export_model, latest_checkpoint, load_checkpoint, save_checkpoint
from captain_training.sft.distributed import PRECISIONS, DistContext, apply_fsdp2, setup_distributed
from captain_training.sft.errors import CheckpointError, ConfigError, PreparedDataError, SFTError
from captain_training.sft.hint_mask import DEFAULT_HINT_MASK_PROBABILITY
from captain_training.sft.loss import DEFAULT_LOSS_CHUNK_TOKENS, SupervisedLM, row_loss
from captain_training.sft.ordering import shard_position
from captain_training.sft.prepare import PreparedData
from captain_training.sft.reader import read_row_at
from captain_training.sft.render import RowRenderer
from captain_training.sft.schedule import cosine_lr_factor
from captain_training.sft.supervision import DEFAULT_QA_LOSS_WEIGHT, SupervisionPolicy

LOG = logging.getLogger("captain.sft")
METRICS_FILE = "metrics.jsonl"
FINAL_DIR = "final"


@dataclass
class TrainConfig:
    """Options of an SFT run (the CLI maps one flag to each field).

    Attributes:
        data: prepared data directory (``captain sft prepare``).
        model: model directory to start from (weights, tokenizer, chat template; a Qwen3.5 VLM also
            its image processor), e.g. from ``captain model build``.
        output_dir: run directory (checkpoints, metrics, final model).
        image_root: directory the rows' image paths are relative to (default: the one given to prepare).
        epochs: passes over the prepared rows (fractions allowed); ignored when ``max_steps`` is set.
        max_steps: optimizer steps of the schedule.
        stop_after_steps: end this process after this many optimizer steps (checkpointed), e.g.
            to fit a job time limit; a later run resumes.
        learning_rate: peak learning rate.
        warmup_steps: linear warm-up steps.
        min_lr_ratio: final learning rate as a fraction of the peak.
        weight_decay: AdamW weight decay (matrices only; norms and biases never decay).
        adam_beta1, adam_beta2, adam_eps: AdamW settings.
        max_grad_norm: gradient clipping threshold (global L2 norm).
        qa_loss_weight: loss weight of visual-QA rows.
        hint_mask_probability: probability of masking each history ``mark_point`` call.
        seed: seed of the text-hint mask.
        loss_constant: per-row loss constant ``C_row``; default from the prepared manifest.
        max_length: longest allowed row; default from the prepared manifest.
        precision: ``bf16`` (fp32 master weights, bf16 compute) or ``fp32``.
        strategy: ``auto`` (fsdp2 when torchrun starts several ranks), ``single`` or ``fsdp2``.
        device: ``auto``, ``cuda`` or ``cpu``.
        attn_implementation: transformers attention backend (default: ``sdpa``, PyTorch's fused kernel).
        gradient_checkpointing: recompute decoder activations in backward (needed for long rows).
        loss_chunk_tokens: supervised positions per output-layer chunk.
        save_every_steps: checkpoint period in optimizer steps (0: only at the end).
        checkpoint_at_end: also checkpoint when this process stops (schedule end or ``stop_after_steps``).
        keep_checkpoints: complete checkpoints to keep.
        log_every_steps: progress line period.
        resume: ``auto`` (latest checkpoint if any), ``never``, or a checkpoint directory.
        export_final: write ``<output_dir>/final`` in Hugging Face format when the schedule ends.
    """

    data: Path
    model: Path
    output_dir: Path
    image_root: Path | None = None
    epochs: float = 1.0
    max_steps: int | None = None
    stop_after_steps: int | None = None
    learning_rate: float = 1e-5
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0
    qa_loss_weight: float = DEFAULT_QA_LOSS_WEIGHT
    hint_mask_probability: float = DEFAULT_HINT_MASK_PROBABILITY
    seed: int = 0
    loss_constant: float | None = None
    max_length: int | None = None
    precision: str = "bf16"
    strategy: str = "auto"
    device: str = "auto"
    attn_implementation: str | None = None
    gradient_checkpointing: bool = False
    loss_chunk_tokens: int = DEFAULT_LOSS_CHUNK_TOKENS
    save_every_steps: int = 200
    checkpoint_at_end: bool = True
    keep_checkpoints: int = 2
    log_every_steps: int = 1
    resume: str = "auto"
    export_final: bool = True

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable form (paths as strings)."""
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}


@dataclass
class StepMetrics:
    """What one optimizer step reports (summed over ranks).

    Attributes:
        step: optimizer steps completed.
        loss: ``sum(weight * NLL) / C_step``, the optimized objective.
        nll_per_token: mean NLL over supervised tokens.
    """

    step: int
    epoch: float
    loss: float
    nll_per_token: float
    learning_rate: float
    grad_norm: float
    supervised_tokens: int
    tokens: int
    rows: int
    hint_masked_calls: int
    step_time_s: float
    tokens_per_s: float
    rows_per_s: float
    peak_mem_mb: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass
class TrainResult:
    """Outcome of :func:`train`.

    Attributes:
        steps_done: optimizer steps completed (including steps of resumed runs).
        total_steps: steps of the schedule.
        resumed_from: checkpoint the run started from, if any.
        metrics: per-step metrics of this process's steps.
        last_checkpoint: newest checkpoint written.
        final_model: exported model directory (when the schedule completed).
    """

    steps_done: int
    total_steps: int
    resumed_from: Path | None = None
    metrics: list[StepMetrics] = field(default_factory=list)
    last_checkpoint: Path | None = None
    final_model: Path | None = None


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (decay if param.ndim >= 2 and "norm" not in name else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=config.learning_rate,
                             betas=(config.adam_beta1, config.adam_beta2), eps=config.adam_eps)


def _load_model(config: TrainConfig, ctx: DistContext) -> Any:
    from captain_training.models.family import freeze_for_sft, load_model

    model = load_model(config.model, dtype=torch.float32, attn_implementation=config.attn_implementation)
    model.config.use_cache = False
    freeze_for_sft(model)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model


def _check_config(config: TrainConfig, data: PreparedData, ctx: DistContext) -> None:
    if config.precision not in PRECISIONS:
        raise ConfigError(f"precision {config.precision!r} is not one of: {', '.join(PRECISIONS)}")
    if data.world_size != ctx.world_size:
        raise PreparedDataError(
            f"{data.path} was prepared for {data.world_size} rank(s) but this run has {ctx.world_size}; run "
            f"`captain sft prepare --world {ctx.world_size}` for this layout")
    if config.max_steps is None and config.epochs <= 0:
        raise ConfigError("epochs must be > 0 (or give max_steps)")
    if not 0.0 <= config.hint_mask_probability <= 1.0:
        raise ConfigError(f"hint_mask_probability must be in [0, 1], got {config.hint_mask_probability}")
    if config.learning_rate <= 0 or config.max_grad_norm <= 0:
        raise ConfigError("learning_rate and max_grad_norm must be > 0")


def _resume_point(config: TrainConfig) -> Path | None:
    if config.resume == "never":
        if latest_checkpoint(config.output_dir) is not None:
            raise CheckpointError(f"{config.output_dir} already has checkpoints; use --resume auto to continue "
                                  "or choose a new --out")
        return None
    if config.resume == "auto":
        return latest_checkpoint(config.output_dir)
    path = Path(config.resume)
    if not path.is_dir():
        raise CheckpointError(f"--resume {path} is not a checkpoint directory (or use auto / never)")
    return path


def _trim_metrics(path: Path, last_step: int) -> None:
    """Drop metric lines of steps after ``last_step`` (steps a crashed run did past its checkpoint)."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= last_step]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    tmp.replace(path)


def train(config: TrainConfig, *, on_step: Callable[[StepMetrics], None] | None = None,
          processor: Any = None) -> TrainResult:
    """Run (or resume) an SFT run described by ``config``; see the module docstring.

    Args:
        config: the run.
        on_step: called with the metrics of every optimizer step (on every rank).
        processor: the already loaded processor of ``config.model`` (loaded from it when omitted).
    """
    ctx = setup_distributed(config.strategy, config.device)
    try:
        return _train(config, ctx, on_step, processor)
    finally:
        ctx.close()


def _train(config: TrainConfig, ctx: DistContext, on_step: Callable[[StepMetrics], None] | None,
           processor: Any) -> TrainResult:
    from captain_training.models.family import load_processor

    data = PreparedData.load(config.data)
    _check_config(config, data, ctx)
    accum = data.grad_accum
    per_rank = data.rows_per_rank
    steps_per_epoch = per_rank // accum
    total_steps = config.max_steps if config.max_steps is not None else int(config.epochs * steps_per_epoch)
    if total_steps < 1:
        raise ConfigError(f"the schedule has no step ({config.epochs} epochs x {steps_per_epoch} steps per epoch)")
    c_row = config.loss_constant if config.loss_constant is not None else data.loss_constant.per_row
    c_step = c_row * ctx.world_size * accum
    max_length = config.max_length or int(data.manifest["max_length"])
    image_root = config.image_root or data.manifest.get("image_root")

    torch.manual_seed(config.seed)
    if processor is None:
        processor = load_processor(config.model)
    renderer = RowRenderer(processor, image_root=image_root, max_length=max_length,
                           policy=SupervisionPolicy(qa_loss_weight=config.qa_loss_weight),
                           hint_mask_probability=config.hint_mask_probability, seed=config.seed)
    model = _load_model(config, ctx)
    wrapper: torch.nn.Module = SupervisedLM(model, loss_chunk_tokens=config.loss_chunk_tokens)
    if ctx.distributed:
        wrapper = apply_fsdp2(wrapper, ctx, config.precision)
    else:
        wrapper = wrapper.to(ctx.device)
    trainable = [p for p in wrapper.parameters() if p.requires_grad]
    optimizer = _optimizer(wrapper, config)

    def factor(step: int) -> float:
        return cosine_lr_factor(step, total_steps, config.warmup_steps, config.min_lr_ratio)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    result = TrainResult(steps_done=0, total_steps=total_steps)
    start_step = 0
    resume_from = _resume_point(config)
    if resume_from is not None:
        state = load_checkpoint(resume_from, wrapper, optimizer)
        if state.get("data_fingerprint") != data.fingerprint:
            raise CheckpointError(f"{resume_from} was trained on other prepared data "
                                  f"({state.get('data_fingerprint')} != {data.fingerprint}); use a new --out")
        scheduler.load_state_dict(state["scheduler"])
        start_step = int(state["step"])
        result.resumed_from = resume_from
        if ctx.is_main:
            LOG.info("resumed from %s at step %d", resume_from, start_step)
    result.steps_done = start_step

    output_dir = Path(config.output_dir)
    if ctx.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        _trim_metrics(output_dir / METRICS_FILE, start_step)
        (output_dir / "run_config.json").write_text(json.dumps(
            {"config": config.to_json(), "world_size": ctx.world_size, "grad_accum": accum,
             "total_steps": total_steps, "loss_constant_per_row": c_row, "loss_constant_per_step": c_step,
             "data_fingerprint": data.fingerprint}, indent=2) + "\n")
        LOG.info("training %s: %d steps (%d per epoch), %d rank(s) x %d row(s) per step, C_step=%.1f",
                 config.model, total_steps, steps_per_epoch, ctx.world_size, accum, c_step)

    autocast = (torch.autocast(device_type=ctx.device.type, dtype=torch.bfloat16)
                if config.precision == "bf16" and not ctx.distributed else contextlib.nullcontext())
    loss_scale = 1.0 / (c_row * accum)
    stop_step = total_steps if config.stop_after_steps is None else min(total_steps,
                                                                        start_step + config.stop_after_steps)
    with contextlib.ExitStack() as files:
        rows_handle = files.enter_context(open(data.rows_path, "rb"))
        metrics_handle = files.enter_context(open(output_dir / METRICS_FILE, "a")) if ctx.is_main else None
        for step in range(start_step, stop_step):
            started = time.perf_counter()
            sums = [0.0] * 6  # weighted nll, nll, supervised tokens, tokens, rows, hint-masked calls
            for micro in range(accum):
                micro_step = step * accum + micro
                position = shard_position(ctx.rank, micro_step, per_rank)
                epoch = micro_step // per_rank
                try:
                    record = read_row_at(rows_handle, int(data.offsets[position]), position + 1,
                                         source=str(data.rows_path))
                    rendered = renderer.render(record, epoch=epoch)
                except SFTError as exc:
                    exc.add_note(f"prepared row {position + 1} = source line {int(data.source_lines[position])} "
                                 f"of {data.manifest['source']}")
                    raise
                if ctx.distributed:
                    wrapper.set_requires_gradient_sync(micro == accum - 1)
                with autocast:
                    loss = row_loss(wrapper, rendered, ctx.device)
                (loss.weighted_nll_sum * loss_scale).backward()
                weighted = float(loss.weighted_nll_sum.detach())
                if not math.isfinite(weighted):
                    raise SFTError(f"non-finite loss {weighted} on prepared row {position + 1} "
                                   f"(source line {int(data.source_lines[position])}, id {rendered.row_id!r})")
                sums[0] += weighted
                sums[1] += float(loss.nll_sum)
                sums[2] += loss.n_supervised
                sums[3] += rendered.n_tokens
                sums[4] += 1
                sums[5] += rendered.n_hint_masked
            grad_norm = torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm)
            if hasattr(grad_norm, "full_tensor"):
                grad_norm = grad_norm.full_tensor()
            learning_rate = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            totals = ctx.sum(sums)
            elapsed = time.perf_counter() - started
            peak = ctx.max([_peak_memory_mb(ctx.device)])[0]
            metrics = StepMetrics(
                step=step + 1, epoch=(step + 1) / steps_per_epoch, loss=totals[0] / c_step,
                nll_per_token=totals[1] / totals[2] if totals[2] else 0.0, learning_rate=learning_rate,
                grad_norm=float(grad_norm), supervised_tokens=int(totals[2]), tokens=int(totals[3]),
                rows=int(totals[4]), hint_masked_calls=int(totals[5]), step_time_s=elapsed,
                tokens_per_s=totals[3] / elapsed, rows_per_s=totals[4] / elapsed, peak_mem_mb=peak)
            result.metrics.append(metrics)
            result.steps_done = step + 1
            if metrics_handle is not None:
                metrics_handle.write(json.dumps(metrics.to_dict()) + "\n")
                metrics_handle.flush()
            if ctx.is_main and (step + 1) % max(1, config.log_every_steps) == 0:
                remaining = (total_steps - step - 1) * elapsed
                LOG.info("step %d/%d  loss %.4f  nll/tok %.4f  lr %.3g  |g| %.3f  %d tok (%d sup)  %.0f tok/s  "
                         "%.2f s/step  peak %.0f MB  eta %.0f s", step + 1, total_steps, metrics.loss,
                         metrics.nll_per_token, learning_rate, metrics.grad_norm, metrics.tokens,
                         metrics.supervised_tokens, metrics.tokens_per_s, elapsed, peak, remaining)
            if on_step is not None:
                on_step(metrics)
            done = step + 1
            periodic = config.save_every_steps > 0 and done % config.save_every_steps == 0
            if periodic or (done == stop_step and config.checkpoint_at_end):
                state = {"step": done, "total_steps": total_steps, "scheduler": scheduler.state_dict(),
                         "data_fingerprint": data.fingerprint, "world_size": ctx.world_size,
                         "loss": metrics.loss}
                result.last_checkpoint = save_checkpoint(ctx, output_dir, done, wrapper, optimizer, state,
                                                         keep=config.keep_checkpoints)
    if result.steps_done >= total_steps and config.export_final:
        dtype = torch.bfloat16 if config.precision == "bf16" else None
        result.final_model = export_model(ctx, wrapper, config.model, output_dir / FINAL_DIR, dtype=dtype)
        if ctx.is_main:
            LOG.info("exported %s", result.final_model)
    return result
