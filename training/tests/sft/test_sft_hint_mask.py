"""The text-hint mask changes only earlier mark_point coordinates in the history."""

from __future__ import annotations

import json
import random
import re

import numpy as np
from sft_rows import PYTHON_TOOL, agent_turn, tool, user

from captain_training.sft.hint_mask import (
    MASK_TEXT,
    apply_text_hint_mask,
    mark_point_coordinate_spans,
    mask_code,
    row_rng,
)
from captain_training.sft.reader import RowRecord, parse_line
from captain_training.sft.render import RowRenderer

CODE = (
    "obs = robot.observe()\n"
    "h = obs['value']['observation_handle']\n"
    "bowl = robot.mark_point(h, 'agentview', .75, 0.421, label='bowl')\n"
    "plate = robot.mark_point(obs[\"value\"][\"observation_handle\"], \"robot0_eye_in_hand\", u=0.53, v=-0.58)\n"
    "other = robot.mark_point(h, 'agentview', u_var, v_var)\n"
    "move = robot.move_to([0.5, 0.1, 0.2], [0, 0.7071, 0.7071, 0], speed=0.035)\n"
    "# ünïcode comment before another call: mark_point(h, 'agentview', 0.1, 0.2)\n"
    "again = robot.mark_point(h, 'agentview', 0.12, 0.34)\n"
)


def test_coordinates_are_found_by_the_parser():
    spans = mark_point_coordinate_spans(CODE)
    found = [[CODE[a:b] for a, b in call] for call in spans]
    # variables are not coordinates to copy; the comment is not code; other numbers are untouched
    assert found == [[".75", "0.421"], ["0.53", "-0.58"], ["0.12", "0.34"]]


def test_unparsable_code_falls_back_to_the_literal_form():
    code = "p = robot.mark_point(obs['value']['observation_handle'], 'agentview', 0.61, 0.33, label='mug')\nif ("
    found = [[code[a:b] for a, b in call] for call in mark_point_coordinate_spans(code)]
    assert found == [["0.61", "0.33"]]


def test_masking_replaces_only_the_coordinates():
    masked, n = mask_code(CODE, random.Random(0), probability=1.0)
    assert n == 3
    assert masked.count(MASK_TEXT) == 6
    # putting the original literals back restores the code exactly
    originals = iter([".75", "0.421", "0.53", "-0.58", "0.12", "0.34"])
    assert re.sub(re.escape(MASK_TEXT), lambda _: next(originals), masked) == CODE
    assert mask_code(CODE, random.Random(0), probability=0.0) == (CODE, 0)


def history_row(n_turns: int = 4, supervise: list[int] | None = None) -> dict:
    messages = [{"role": "system", "content": "sys"}, user("Task.")]
    for k in range(n_turns):
        code = (f"p{k} = robot.mark_point(h, 'agentview', 0.{k + 1}1, 0.{k + 2}2)\n"
                f"robot.move_to([0.{k}, 0.2, 0.3], q, speed=0.05)")
        messages.append(agent_turn(f"turn {k}", code, call_id=f"c{k}"))
        messages.append(tool(f"Cell {k + 1} completed.\nmark_point: ok; detection_id=d{k}", call_id=f"c{k}"))
    messages.pop()
    meta = {"source": "agent", "supervise_turns": supervise} if supervise else {"source": "agent",
                                                                                 "turn_index": n_turns - 1}
    return {"tools": [PYTHON_TOOL], "messages": messages, "meta": meta}


def codes(messages: list[dict]) -> list[str]:
    return [m["tool_calls"][0]["function"]["arguments"]["input"] for m in messages if m["role"] == "assistant"]


def test_history_is_masked_and_supervised_turns_are_not():
    row = history_row(supervise=[1, 3])
    before = json.dumps(row["messages"])
    masked, n = apply_text_hint_mask(row["messages"], (1, 3), random.Random(1), probability=1.0)
    assert json.dumps(row["messages"]) == before  # input untouched
    old, new = codes(row["messages"]), codes(masked)
    assert n == 2
    assert new[1] == old[1] and new[3] == old[3]  # targets unchanged
    for k in (0, 2):  # history turns
        assert new[k] == old[k].replace(f"0.{k + 1}1, 0.{k + 2}2", f"{MASK_TEXT}, {MASK_TEXT}")
    # nothing but assistant tool-call sources changed
    for a, b in zip(row["messages"], masked, strict=True):
        if a["role"] != "assistant":
            assert a == b
        else:
            assert {k: v for k, v in a.items() if k != "tool_calls"} == {k: v for k, v in b.items()
                                                                          if k != "tool_calls"}


def test_mask_is_seeded_and_has_the_requested_rate():
    row = history_row(n_turns=41)
    rng_a, rng_b = row_rng(7, 0, "12:row"), row_rng(7, 0, "12:row")
    first, n_first = apply_text_hint_mask(row["messages"], (40,), rng_a, 0.2)
    second, n_second = apply_text_hint_mask(row["messages"], (40,), rng_b, 0.2)
    assert first == second and n_first == n_second
    other, _ = apply_text_hint_mask(row["messages"], (40,), row_rng(7, 1, "12:row"), 0.2)
    assert other != first  # a new epoch draws a new mask
    counts = [apply_text_hint_mask(row["messages"], (40,), row_rng(s, 0, "r"), 0.2)[1] for s in range(40)]
    rate = sum(counts) / (40 * 40)
    assert 0.15 < rate < 0.25


def test_rendered_supervised_tokens_are_identical_with_and_without_the_mask(processor):
    row = history_row(supervise=[2, 3])
    record = RowRecord(3, 0, parse_line(json.dumps(row).encode(), 3))
    plain = RowRenderer(processor, hint_mask_probability=0.0).render(record)
    masked = RowRenderer(processor, hint_mask_probability=1.0).render(record)
    assert masked.n_hint_masked == 2 and plain.n_hint_masked == 0

    def supervised(rendered):
        weights = rendered.token_weights.numpy()
        return rendered.input_ids.numpy()[weights > 0].tolist(), weights[weights > 0].tolist()

    assert supervised(plain) == supervised(masked)
    text = processor.tokenizer.decode(masked.input_ids.tolist())
    assert text.count(MASK_TEXT) == 4
    # everything from the first supervised token on is identical; only the earlier history differs
    first_plain = int(np.flatnonzero(plain.token_weights.numpy() > 0)[0])
    first_masked = int(np.flatnonzero(masked.token_weights.numpy() > 0)[0])
    assert np.array_equal(plain.input_ids.numpy()[first_plain:], masked.input_ids.numpy()[first_masked:])
    assert not np.array_equal(plain.input_ids.numpy()[:first_plain], masked.input_ids.numpy()[:first_masked])
