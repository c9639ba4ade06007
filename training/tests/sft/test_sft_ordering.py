"""mix_order, sup_tokens, the schedule, and the loss at supervised positions."""

from __future__ import annotations

import math

import pytest
import torch

from captain_training.sft.ordering import mix_order, shard_position, sup_tokens
from captain_training.sft.schedule import cosine_lr_factor


def test_mix_order_hand_cases():
    # 2 ranks: rank 0 trains global rows 0, 2, 4, ...; rank 1 trains 1, 3, 5, ...
    assert mix_order(10, 2) == [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]
    # 4 ranks, 10 rows: two complete steps, rows 8 and 9 are dropped
    assert mix_order(10, 4) == [0, 4, 1, 5, 2, 6, 3, 7]
    # 2 ranks x 2 accumulation: a step is 4 rows; 7 rows -> one step
    assert mix_order(7, 2, grad_accum=2) == [0, 2, 1, 3]
    assert mix_order(5, 1) == [0, 1, 2, 3, 4]
    assert mix_order(3, 4) == []


def test_mix_order_keeps_the_relative_order_of_the_global_run():
    world, accum, n = 3, 2, 20
    order = mix_order(n, world, accum)
    per_rank = len(order) // world
    trained = []  # (micro-step, rank) -> global row, as the trainer reads it
    for micro in range(per_rank):
        for rank in range(world):
            trained.append(order[shard_position(rank, micro, per_rank)])
    assert trained == list(range(len(order)))
    with pytest.raises(ValueError):
        mix_order(4, 0)


def test_sup_tokens_hand_case():
    constant = sup_tokens([10, 0, 30, 20], world_size=2, grad_accum=1)
    assert constant.supervised_tokens == 60 and constant.n_rows == 4
    assert constant.per_row == 15.0 and constant.per_step == 30.0
    assert sup_tokens([10, 0, 30, 20], world_size=2, grad_accum=3).per_step == 90.0
    with pytest.raises(ValueError):
        sup_tokens([0, 0])


def test_cosine_schedule():
    assert cosine_lr_factor(0, 10) == 1.0
    assert cosine_lr_factor(5, 10) == pytest.approx(0.5)
    assert cosine_lr_factor(10, 10) == pytest.approx(0.0)
    assert cosine_lr_factor(0, 10, warmup_steps=4) == 0.25
    assert cosine_lr_factor(3, 10, warmup_steps=4) == 1.0
    assert cosine_lr_factor(4, 10, warmup_steps=4) == 1.0
    assert cosine_lr_factor(10, 10, min_lr_ratio=0.1) == pytest.approx(0.1)


def test_loss_at_supervised_positions_equals_the_full_logits_loss(tiny_model_dir):
    from transformers import Qwen3_5ForConditionalGeneration

    from captain_training.sft.loss import SupervisedLM, prediction_inputs

    torch.manual_seed(0)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(str(tiny_model_dir), dtype=torch.float32,
                                                            attn_implementation="eager")
    input_ids = torch.randint(0, 248000, (40,))
    weights = torch.zeros(40)
    weights[10:15] = 1.0
    weights[30:34] = 0.5
    positions, targets, w = prediction_inputs(input_ids, weights)
    assert positions.tolist() == [9, 10, 11, 12, 13, 29, 30, 31, 32]
    assert targets.tolist() == input_ids[[10, 11, 12, 13, 14, 30, 31, 32, 33]].tolist()

    with torch.no_grad():
        logits = model(input_ids=input_ids[None]).logits[0].float()
        log_probs = torch.log_softmax(logits, dim=-1)
        expected = -sum(float(weights[p]) * float(log_probs[p - 1, input_ids[p]]) for p in range(1, 40)
                        if weights[p] > 0)
        expected_nll = -sum(float(log_probs[p - 1, input_ids[p]]) for p in range(1, 40) if weights[p] > 0)
        for chunk in (4096, 4, 1):
            weighted, nll = SupervisedLM(model, loss_chunk_tokens=chunk)(input_ids[None], positions, targets, w)
            assert math.isclose(float(weighted), expected, rel_tol=1e-5)
            assert math.isclose(float(nll), expected_nll, rel_tol=1e-5)

    # chunked (recomputed) and direct computation give the same gradients
    grads = []
    for chunk in (4096, 3):
        model.zero_grad(set_to_none=True)
        weighted, _ = SupervisedLM(model, loss_chunk_tokens=chunk)(input_ids[None], positions, targets, w)
        weighted.backward()
        grads.append(model.lm_head.weight.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-6)

    # a row without supervised tokens still reaches every parameter (FSDP needs the backward)
    model.zero_grad(set_to_none=True)
    empty = torch.zeros(0, dtype=torch.long)
    weighted, nll = SupervisedLM(model)(input_ids[None], empty, empty, torch.zeros(0))
    assert float(weighted.detach()) == 0.0
    weighted.backward()
    assert model.model.language_model.layers[0].mlp.up_proj.weight.grad is not None
