"""``captain bench learning``: does the project's SFT pipeline teach a real pretrained model the harness?

On the tabletop pick-and-place tasks (``cube_on_plate``, ``stack_cubes``) the image-free
teacher (``datagen/segment_teacher.py``) records episodes on training layouts (official
tabletop states ``train_states``) and on held-out layouts (``heldout_states``); ``captain
datagen`` turns them into packed rows; ``captain sft`` trains SmolLM2-135M (``captain model build
smollm2-135m``) on the training rows. Reported (last line, JSON):

* ``loss_before`` / ``loss_after``: mean NLL per supervised token of the held-out rows, base
  model vs the SFT model (nats);
* ``valid_tool_call_rate_before`` / ``_after``: of the held-out requests' prompts, the share
  whose greedy completion (``max_new_tokens``) the harness's own parser turns into at least one
  python tool call that compiles;
* full mode only: ``host_success_base`` / ``host_success_sft`` and the paired comparison
  (exact McNemar p-value, task-cluster bootstrap CI) of ``captain eval run`` on the held-out
  states, each model served by ``captain serve``'s server.

Both modes train on rows whose system message is compacted to the task and its success
standard (``datagen/compact.py``: ~390 SmolLM2 tokens instead of ~5,800) and evaluate with the
same message (``captain eval run --task-md-sections``), so the evaluated prompts are the
trained ones.

``--quick`` (meant for < 10 min on an idle 2-core CPU; the figures ``load_avg_1m_*`` say how
busy the machine was) keeps each episode's first two requests (``first_requests``: the
locate and grasp cells, ~1.8k tokens a row), trains 4 steps (peak learning rate 3e-4),
greedy-decodes the two held-out first requests (at most 320 tokens each, stopping when the first
tool call closes) and skips the episode evaluation.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

TASKS = ("tabletop/cube_on_plate", "tabletop/stack_cubes")
TEACHER = "captain_training.datagen.segment_teacher:make_segment_teacher"
#: TASK.md sections of the compacted system message (training rows and evaluation alike).
KEEP_SECTIONS = ("Task", "Success standard")


def _episodes(tasks: tuple[str, ...], states: list[int], out: Path, workers: int) -> dict[str, Any]:
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.runner import EpisodeConfig, rollout

    summary = rollout(list(tasks), states, policy=PolicySpec(TEACHER, {}), out_dir=out,
                      backend_factory="captain_training.rl.backends:official_backend", workers=workers,
                      config=EpisodeConfig(subset="learning"))
    return {k: v for k, v in summary.items() if k != "outcomes"}


def _rows(episodes: Path, out: Path, first_k: int | None) -> list[dict[str, Any]]:
    """Packed rows of the episodes, system message compacted, cut after ``first_k`` requests."""
    from captain_training.datagen.build import generate_rows
    from captain_training.datagen.compact import compact_row, first_requests

    raw = out.with_suffix(".raw.jsonl")
    generate_rows(episodes, raw, mode="packed", max_packed=8)
    rows = [compact_row(json.loads(line)) for line in raw.read_text().splitlines() if line.strip()]
    if first_k is not None:
        rows = [first_requests(r, first_k) for r in rows]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def heldout_nll(model: Any, renderer: Any, rows: list[dict[str, Any]]) -> float:
    """Mean NLL per supervised token of ``rows`` under ``model`` (nats; no gradients)."""
    import torch

    from captain_training.sft.loss import SupervisedLM, row_loss
    from captain_training.sft.reader import RowRecord

    wrapper = SupervisedLM(model).eval()
    nll, count = 0.0, 0
    with torch.no_grad():
        for i, row in enumerate(rows):
            loss = row_loss(wrapper, renderer.render(RowRecord(i + 1, 0, row)), torch.device("cpu"))
            nll += float(loss.nll_sum)
            count += loss.n_supervised
    return nll / max(count, 1)


def request_prompts(rows: list[dict[str, Any]], limit: int) -> list[tuple[list[dict[str, Any]], list[Any]]]:
    """(messages before an assistant turn, tools) of ``limit`` supervised requests of the rows:
    every row's first supervised request, then every row's second, and so on."""
    from captain_training.sft.supervision import select_supervision

    per_row = []
    for row in rows:
        starts = [k for k, m in enumerate(row["messages"]) if m.get("role") == "assistant"]
        turns = select_supervision(row).turns
        per_row.append([(row["messages"][:starts[t]], row.get("tools")) for t in turns if t < len(starts)])
    prompts = []
    for depth in range(max((len(p) for p in per_row), default=0)):
        for row_prompts in per_row:
            if depth < len(row_prompts) and len(prompts) < limit:
                prompts.append(row_prompts[depth])
    return prompts


def valid_tool_call_rate(model: Any, processor: Any, prompts: list[tuple[list, list]], max_new_tokens: int) -> float:
    """Share of prompts whose greedy completion holds >= 1 python tool call that parses and compiles.

    Decoding stops at ``<|im_end|>``, at the first ``</tool_call>`` (the first call decides) or
    after ``max_new_tokens``; a call cut by the token limit does not parse and counts as invalid.
    """
    import torch

    from captain_harness.core.episode.policy.openai_client import parse_completion

    tokenizer = processor.tokenizer
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    valid = 0
    for messages, tools in prompts:
        text = processor.apply_chat_template(messages, tools=tools, add_generation_prompt=True)
        ids = processor(text=[text])["input_ids"]
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                 do_sample=False, eos_token_id=stop, pad_token_id=stop,
                                 stop_strings=["</tool_call>"], tokenizer=tokenizer)
        completion = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        reply = parse_completion({"choices": [{"message": {"content": completion}, "finish_reason": "stop"}]})
        good = bool(reply.tool_calls) and all(not c.error for c in reply.tool_calls)
        for call in reply.tool_calls if good else ():
            try:
                compile(call.code, "<cell>", "exec")
            except SyntaxError:
                good = False
        valid += int(good)
    return valid / max(len(prompts), 1)


def _evaluate(model_dir: Path, name: str, states: str, out: Path, records: Path, max_tokens: int,
              max_requests: int) -> Path:
    from captain_training.eval.runner import EvalSpec, run_evaluation
    from captain_training.models.serve import endpoint_config
    from captain_training.rl.endpoint import LocalPolicyServer

    config = endpoint_config(model_dir, port=0, served_model_name=name, max_new_tokens=max_tokens)
    with LocalPolicyServer(config) as server:
        spec = EvalSpec(suite="tabletop", tasks=",".join(t.split("/")[1] for t in TASKS), states=states,
                        policy="openai", policy_options={"base_url": server.base_url, "model": name,
                                                         "max_tokens": max_tokens, "temperature": 0.0},
                        records=str(records), workers=1, max_requests=max_requests,
                        task_md_sections=KEEP_SECTIONS)
        run_evaluation(spec, out)
    return out


def run(
    quick: bool = False,
    model: str = "smollm2-135m",
    train_states: str | None = None,
    heldout_states: str | None = None,
    steps: int | None = None,
    learning_rate: float | None = None,
    max_new_tokens: int | None = None,
    prompts: int | None = None,
    first_k: int | None = None,
    eval_max_tokens: int = 400,
    eval_max_requests: int = 12,
    workers: int = 1,
    threads: int | None = None,
    out: str | None = None,
) -> dict[str, Any]:
    """Run the learning check (see the module docstring); figures carry units in their names.

    Args:
        quick: short rows, few steps, no episode evaluation (meant for < 10 min on 2 idle cores).
        model: a ``captain model build`` name or a model directory.
        train_states / heldout_states: tabletop layouts (``a-b`` or ``a,b``) for training and held-out
            episodes (defaults: quick 0-1 / 100; full 0-11 / 100-109), both tasks.
        steps: optimizer steps (one packed row each; default: quick 4, full 2 epochs).
        learning_rate: peak learning rate (no warm-up, cosine to 10 %; default: quick 3e-4, full 1e-4).
        max_new_tokens: greedy tokens per held-out prompt for the tool-call rate (at most; decoding
            stops when the first tool call closes; default: quick 320, full 400). The teacher's
            replies take ~260 (first request) to ~380 tokens.
        prompts: held-out prompts for the tool-call rate, first requests first (default: quick 2,
            full 12).
        first_k: keep each episode's first ``first_k`` requests in its row (default: quick 2,
            full all of them).
        eval_max_tokens / eval_max_requests: full mode's ``captain eval run`` episodes: tokens per
            reply, requests per episode.
        workers: episode processes.
        threads: PyTorch CPU threads of this process (None: PyTorch's default, one per core); on
            a machine busy with other work, 1 thread avoids threads waiting on each other.
        out: keep everything under this directory (default: a temporary one).
    """
    from captain_harness.core.episode.runner import parse_range
    from captain_training.models.build import MODELS, cached_model_dir
    from captain_training.models.family import load_model, load_processor
    from captain_training.sft.prepare import prepare
    from captain_training.sft.reader import RowRecord
    from captain_training.sft.render import RowRenderer
    from captain_training.sft.trainer import TrainConfig, train

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    train_list = parse_range(train_states or ("0-1" if quick else "0-11"))
    heldout_text = heldout_states or ("100" if quick else "100-109")
    heldout_list = parse_range(heldout_text)
    if set(train_list) & set(heldout_list):
        raise ValueError(f"train states {train_list} and held-out states {heldout_list} overlap")
    n_prompts = prompts if prompts is not None else (2 if quick else 12)
    lr = learning_rate if learning_rate is not None else (3e-4 if quick else 1e-4)
    n_new = max_new_tokens if max_new_tokens is not None else (320 if quick else 400)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    figures: dict[str, Any] = {"mode": "quick" if quick else "full", "cpus": os.cpu_count(), "threads": threads,
                               "load_avg_1m_start": round(load_start, 2)}
    k = first_k if first_k is not None else (2 if quick else None)
    model_dir = cached_model_dir(model) if model in MODELS else Path(model)
    tmp = tempfile.TemporaryDirectory(prefix="captain-learning-") if out is None else None
    root = Path(tmp.name if tmp is not None else out)
    root.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        train_summary = _episodes(TASKS, train_list, root / "episodes_train", workers)
        held_summary = _episodes(TASKS, heldout_list, root / "episodes_heldout", workers)
        figures["teacher_train_episodes"] = train_summary.get("episodes")
        figures["teacher_host_success_train"] = train_summary.get("host_success")
        figures["teacher_host_success_heldout"] = held_summary.get("host_success")
        figures["episodes_s"] = round(time.perf_counter() - t0, 1)
        train_rows = _rows(root / "episodes_train", root / "train.jsonl", k)
        held_rows = _rows(root / "episodes_heldout", root / "heldout.jsonl", k)
        if not train_rows or not held_rows:
            raise RuntimeError(f"the teacher produced {len(train_rows)} training and {len(held_rows)} held-out rows "
                               "(only successful episodes become rows)")
        processor = load_processor(model_dir)
        prepared = prepare(root / "train.jsonl", root / "prepared", processor_path=model_dir, max_length=8192,
                           processor=processor, hint_mask_probability=0.0)
        figures["train_rows"] = prepared.manifest["n_rows"]
        figures["train_tokens_per_row"] = round(prepared.manifest["total_tokens"] / prepared.manifest["n_rows"])
        figures["train_supervised_tokens"] = prepared.manifest["supervised_tokens"]
        renderer = RowRenderer(processor, max_length=8192, hint_mask_probability=0.0)
        held_prompts = request_prompts(held_rows, n_prompts)
        figures["heldout_rows"] = len(held_rows)
        figures["heldout_supervised_tokens"] = sum(renderer.render(RowRecord(i + 1, 0, r)).n_supervised
                                                   for i, r in enumerate(held_rows))

        t0 = time.perf_counter()
        base = load_model(model_dir).eval()
        figures["loss_before"] = round(heldout_nll(base, renderer, held_rows), 4)
        if not quick:
            figures["valid_tool_call_rate_before"] = valid_tool_call_rate(base, processor, held_prompts, n_new)
        del base
        figures["eval_before_s"] = round(time.perf_counter() - t0, 1)

        n_steps = steps if steps is not None else (4 if quick else 2 * prepared.manifest["n_rows"])
        t0 = time.perf_counter()
        config = TrainConfig(data=prepared.path, model=model_dir, output_dir=root / "sft", max_steps=n_steps,
                             learning_rate=lr, min_lr_ratio=0.1, precision="fp32", device="cpu",
                             strategy="single", hint_mask_probability=0.0, save_every_steps=0,
                             checkpoint_at_end=False, resume="never", log_every_steps=1)
        result = train(config, processor=processor)
        figures["sft_steps"] = result.steps_done
        figures["sft_learning_rate"] = lr
        figures["sft_s"] = round(time.perf_counter() - t0, 1)
        figures["sft_train_nll_first_step"] = round(result.metrics[0].nll_per_token, 4)
        figures["sft_train_nll_last_step"] = round(result.metrics[-1].nll_per_token, 4)
        figures["sft_tokens_per_s"] = round(sum(m.tokens for m in result.metrics)
                                            / sum(m.step_time_s for m in result.metrics), 1)

        t0 = time.perf_counter()
        tuned = load_model(result.final_model).eval()
        figures["loss_after"] = round(heldout_nll(tuned, renderer, held_rows), 4)
        figures["heldout_nll_after_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        figures["valid_tool_call_rate_after"] = valid_tool_call_rate(tuned, processor, held_prompts, n_new)
        figures["heldout_prompts"] = len(held_prompts)
        del tuned
        figures["valid_tool_call_s"] = round(time.perf_counter() - t0, 1)

        if not quick:
            from captain_training.eval.results import read_results
            from captain_training.eval.stats import compare_paired

            t0 = time.perf_counter()
            base_res = _evaluate(model_dir, "base", heldout_text, root / "eval_base.jsonl", root / "eval_base",
                                 eval_max_tokens, eval_max_requests)
            figures["episodes_base_s"] = round(time.perf_counter() - t0, 1)
            t0 = time.perf_counter()
            sft_res = _evaluate(result.final_model, "sft", heldout_text, root / "eval_sft.jsonl", root / "eval_sft",
                                eval_max_tokens, eval_max_requests)
            figures["episodes_sft_s"] = round(time.perf_counter() - t0, 1)
            for metric in ("host_success", "strict_success"):
                c = compare_paired(read_results(base_res), read_results(sft_res), metric, n_boot=10_000, seed=0)
                figures[f"{metric}_base"] = c.rate_a
                figures[f"{metric}_sft"] = c.rate_b
                figures[f"{metric}_mcnemar_p"] = c.p_value
                figures[f"{metric}_diff_ci"] = [c.ci_low, c.ci_high]
                figures[f"{metric}_pairs"] = c.n_pairs
    finally:
        if tmp is not None:
            tmp.cleanup()
    figures["total_s"] = round(time.perf_counter() - started, 1)
    figures["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    if not math.isfinite(figures.get("loss_after", float("nan"))):
        raise RuntimeError(f"non-finite held-out loss: {figures}")
    return figures
