"""Supervision masks, token by token, on hand-written rows covering every meta case."""

from __future__ import annotations

import numpy as np
import pytest
from sft_rows import (
    PYTHON_TOOL,
    agent_turn,
    check_mask,
    expected_agent_reply,
    image,
    tool,
    user,
    write_png,
)

from captain_training.sft.errors import RowFormatError, RowTooLongError
from captain_training.sft.reader import RowRecord, parse_line
from captain_training.sft.render import RowRenderer

SYSTEM = {"role": "system", "content": "You control a robot arm by writing Python."}
TASK = user("Read TASK.md and put the bowl on the plate.")
TURNS = [
    ("Look first.", "obs = robot.observe()\nprint(obs['success'])"),
    ("Mark the bowl.", "b = robot.mark_point(obs['value']['observation_handle'], 'agentview', .41, .62)"),
    ("Grasp it.", "r = robot.move_to(gripper='close')\nprint(r['message'])"),
]


def agent_row(meta: dict, n_turns: int = 3) -> dict:
    messages = [SYSTEM, TASK]
    for k, (reasoning, code) in enumerate(TURNS[:n_turns]):
        messages.append(agent_turn(reasoning, code, call_id=f"call_{k}"))
        if k < n_turns - 1:
            messages.append(tool(f"Cell {k + 1} completed in 0.4 s\nOutput:\nTrue", call_id=f"call_{k}"))
    return {"id": "ep#req-003", "images": [], "tools": [PYTHON_TOOL], "messages": messages,
            "meta": {"source": "agent", **meta}}


def record(row: dict, line: int = 1) -> RowRecord:
    import json

    return RowRecord(line, 0, parse_line(json.dumps(row).encode(), line))


@pytest.fixture()
def renderer(processor):
    return RowRenderer(processor, hint_mask_probability=0.0)


def test_per_request_row_supervises_only_the_last_turn(renderer, tokenizer):
    rendered = renderer.render(record(agent_row({"turn_index": 2})))
    check_mask(rendered, tokenizer, [expected_agent_reply(*TURNS[2])], 1.0)


def test_prefix_packed_row_supervises_the_listed_turns(renderer, tokenizer):
    rendered = renderer.render(record(agent_row({"supervise_turns": [0, 2], "packed_n": 2})))
    check_mask(rendered, tokenizer, [expected_agent_reply(*TURNS[0]), expected_agent_reply(*TURNS[2])], 1.0)


def test_loss_weight_scales_every_supervised_token(renderer, tokenizer):
    rendered = renderer.render(record(agent_row({"supervise_turns": [1, 2], "loss_weight": 2.0})))
    check_mask(rendered, tokenizer, [expected_agent_reply(*TURNS[1]), expected_agent_reply(*TURNS[2])], 2.0)


def test_unsupervised_row_has_no_loss(renderer):
    rendered = renderer.render(record(agent_row({"turn_index": 2, "nosup_reason": "repeated failures"})))
    assert rendered.n_supervised == 0
    assert not rendered.supervision.supervised
    assert rendered.n_tokens > 50


def test_visual_qa_pack_supervises_every_answer_at_half_weight(renderer, tokenizer, tmp_path):
    write_png(tmp_path / "q.png", 32, 32)
    row = {"id": "qapack:general:7", "images": ["q.png"],
           "messages": [user(image("q.png"), "What is on the table?"),
                        {"role": "assistant", "content": "A red bowl."},
                        user("How many plates?"),
                        {"role": "assistant", "content": "Two."}],
           "meta": {"source": "qapack", "subset": "visual_qa"}}
    renderer.image_root = tmp_path
    rendered = renderer.render(record(row))
    # Only answers after the last user query get a think block (the Qwen3.5 template rule).
    check_mask(rendered, tokenizer, ["A red bowl.<|im_end|>", "<think>\n\n</think>\n\nTwo.<|im_end|>"], 0.5)
    rendered = renderer.render(record({**row, "meta": {"source": "qapack", "loss_weight": 3.0}}))
    check_mask(rendered, tokenizer, ["A red bowl.<|im_end|>", "<think>\n\n</think>\n\nTwo.<|im_end|>"], 1.5)


def test_qa_loss_weight_is_a_policy_setting(processor, tokenizer):
    from captain_training.sft.supervision import SupervisionPolicy

    row = {"messages": [user("Q?"), {"role": "assistant", "content": "A."}], "meta": {"source": "qapack"}}
    rendered = RowRenderer(processor, policy=SupervisionPolicy(qa_loss_weight=0.25)).render(record(row))
    check_mask(rendered, tokenizer, ["<think>\n\n</think>\n\nA.<|im_end|>"], 0.25)


def test_visible_text_and_several_calls_are_inside_the_span(renderer, tokenizer):
    turn = agent_turn("Two cells.", "a = 1", content="Running two cells.")
    turn["tool_calls"].append({"id": "call_b", "type": "function",
                               "function": {"name": "python", "arguments": '{"input": "b = 2"}'}})
    row = {"tools": [PYTHON_TOOL], "messages": [SYSTEM, TASK, turn], "meta": {"source": "agent", "turn_index": 0}}
    rendered = renderer.render(record(row))
    expected = ("<think>\nTwo cells.\n</think>\n\nRunning two cells.\n\n<tool_call>\n<function=python>\n"
                "<parameter=input>\na = 1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=python>\n"
                "<parameter=input>\nb = 2\n</parameter>\n</function>\n</tool_call><|im_end|>")
    check_mask(rendered, tokenizer, [expected], 1.0)


def test_final_reply_without_tool_call(renderer, tokenizer):
    row = agent_row({"turn_index": 1}, n_turns=1)
    row["messages"] += [tool("Cell 1 completed in 0.1 s\nOutput:\nfinish: ok"),
                        {"role": "assistant", "content": "Done.", "reasoning_content": "The task is complete."}]
    rendered = renderer.render(record(row))
    check_mask(rendered, tokenizer, ["<think>\nThe task is complete.\n</think>\n\nDone.<|im_end|>"], 1.0)


def test_images_are_bound_in_order_of_appearance(renderer, tmp_path):
    # 32x32 -> 1 image token, 64x96 -> 6 tokens, 64x64 -> 4 tokens (tiny processor: 16 px patches, 2x2 merge)
    write_png(tmp_path / "a.png", 32, 32)
    write_png(tmp_path / "b.png", 96, 64, seed=1)
    write_png(tmp_path / "c.png", 64, 64, seed=2)
    row = agent_row({"turn_index": 1}, n_turns=2)
    row["messages"][1] = user("Task.", image("a.png"), image("b.png"))
    row["messages"][3] = tool("Cell 1 completed.", image("c.png"))
    row["images"] = ["a.png", "b.png", "c.png"]
    renderer.image_root = tmp_path
    rendered = renderer.render(record(row))
    ids = rendered.input_ids.numpy()
    from captain_training.qwen.special_tokens import IMAGE_PAD_ID, VISION_END_ID, VISION_START_ID

    starts = np.flatnonzero(ids == VISION_START_ID)
    ends = np.flatnonzero(ids == VISION_END_ID)
    runs = [int(np.sum(ids[s + 1:e] == IMAGE_PAD_ID)) for s, e in zip(starts, ends, strict=True)]
    assert runs == [1, 6, 4]
    assert rendered.image_grid_thw.tolist() == [[1, 2, 2], [1, 4, 6], [1, 4, 4]]
    assert rendered.mm_token_type_ids.numpy()[ids == IMAGE_PAD_ID].min() == 1
    assert int(rendered.mm_token_type_ids.sum()) == 11
    # the image of the tool turn sits inside the tool response, before the supervised reply
    assert starts[2] < np.flatnonzero(rendered.token_weights.numpy() > 0)[0]


def test_measure_matches_the_full_rendering(renderer, tmp_path):
    write_png(tmp_path / "a.png", 96, 64)
    write_png(tmp_path / "b.png", 64, 64)
    row = agent_row({"supervise_turns": [1, 2]})
    row["messages"][1] = user("Task.", image("a.png"))
    row["messages"][3] = tool("Cell 1.", image("b.png"))
    row["images"] = ["a.png", "b.png"]
    renderer.image_root = tmp_path
    rendered = renderer.render(record(row))
    measure = renderer.measure(record(row))
    assert measure.n_tokens == rendered.n_tokens
    assert measure.n_supervised == rendered.n_supervised


def test_over_long_row_stops_with_an_error(processor):
    row = agent_row({"turn_index": 2})
    full = RowRenderer(processor).render(record(row, line=17)).n_tokens
    with pytest.raises(RowTooLongError) as err:
        RowRenderer(processor, max_length=full - 1).render(record(row, line=17))
    assert err.value.line_number == 17 and err.value.n_tokens == full
    assert "never truncated" in str(err.value) and "line 17" in str(err.value)
    assert RowRenderer(processor, max_length=full).render(record(row)).n_tokens == full


@pytest.mark.parametrize(("meta", "fragment"), [
    ({}, "agent rows need meta.turn_index"),
    ({"turn_index": 1}, "must be the ordinal of the last assistant turn, 2"),
    ({"supervise_turns": [1, 3]}, "[3] name no assistant turn"),
    ({"supervise_turns": [2, 1]}, "strictly increasing"),
    ({"turn_index": 2, "loss_weight": -1}, "loss_weight must be a finite number >= 0"),
])
def test_meta_that_selects_no_valid_turn_is_rejected(meta, fragment):
    with pytest.raises(RowFormatError) as err:
        record(agent_row(meta), line=5)
    assert fragment in str(err.value) and err.value.line_number == 5
