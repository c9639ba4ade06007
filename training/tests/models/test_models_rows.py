"""Rows for small contexts (compact system message, drop-with-count) and the image-free teacher's cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sft_rows import PYTHON_TOOL, agent_turn, tool, user, write_rows

from captain_training.datagen.compact import compact_row, compact_system_text, first_requests
from captain_training.datagen.segment_teacher import look_cell, parse_instruction, plan
from captain_training.models.family import load_processor
from captain_training.sft.errors import PreparedDataError
from captain_training.sft.prepare import prepare

SYSTEM = ("You are a robot agent.\n\n# TASK.md\n\n## Task\n\nput the red cube on the plate\n\n"
          "## Success standard\n\n- `On(red_cube, plate)`: xy_distance_m <= 0.02\n\n"
          "## API reference\n\n" + "robot.observe() -> dict: a long description.\n" * 200)


def row(words: int = 5) -> dict:
    return {"id": "ep#req-000-001", "images": [], "tools": [PYTHON_TOOL],
            "messages": [{"role": "system", "content": SYSTEM}, user("Read TASK.md. " + "go " * words),
                         agent_turn("Look.", "obs = robot.observe()", call_id="c0"), tool("Cell 1 ok", call_id="c0"),
                         agent_turn("Done.", "robot.finish()", call_id="c1")],
            "meta": {"source": "agent", "supervise_turns": [0, 1]}}


def test_compact_keeps_task_and_standard_and_every_other_message() -> None:
    text = compact_system_text(SYSTEM)
    assert "## Task" in text and "## Success standard" in text and "API reference" not in text
    assert text.startswith("You are a robot agent.")
    original = row()
    compacted = compact_row(original)
    assert compacted["messages"][1:] == original["messages"][1:]
    assert compacted["meta"]["compact_system"] == ["Task", "Success standard"]
    assert original["messages"][0]["content"] == SYSTEM
    with pytest.raises(ValueError, match="Budgets"):
        compact_system_text(SYSTEM, ("Task", "Budgets"))


def test_first_requests_keeps_whole_turns_and_their_supervision() -> None:
    original = row()
    original["messages"].insert(4, agent_turn("Grasp.", "robot.move_to([0.5, 0, 0.1])", call_id="c2"))
    original["messages"].insert(5, tool("Cell 2 ok", call_id="c2"))
    original["meta"].update(supervise_turns=[0, 2], packed_n=3)
    cut = first_requests(original, 2)
    assert cut["messages"] == original["messages"][:5] and cut["messages"][-1]["role"] == "assistant"
    assert cut["meta"]["supervise_turns"] == [0] and cut["meta"]["packed_n"] == 2
    assert cut["meta"]["first_requests"] == 2 and original["meta"]["supervise_turns"] == [0, 2]
    assert first_requests(original, 5) == original
    only_late = {**original, "meta": {**original["meta"], "supervise_turns": [2]}}
    assert first_requests(only_late, 1)["meta"]["nosup_reason"].startswith("no supervised turn")
    with pytest.raises(ValueError, match="k >= 1"):
        first_requests(original, 0)


def test_too_long_rows_are_an_error_or_dropped_with_a_count(tmp_path: Path, tiny_smollm2_dir: Path) -> None:
    processor = load_processor(tiny_smollm2_dir)
    source = write_rows(tmp_path / "rows.jsonl", [row(), row(), row(3000)])
    with pytest.raises(PreparedDataError, match="never truncated"):
        prepare(source, tmp_path / "p1", processor_path=tiny_smollm2_dir, max_length=4000, processor=processor)
    data = prepare(source, tmp_path / "p2", processor_path=tiny_smollm2_dir, max_length=4000, processor=processor,
                   drop_too_long=True)
    assert data.manifest["n_dropped_too_long"] == 1 and data.manifest["n_rows"] == 2
    assert data.manifest["max_row_tokens"] <= 4000
    assert json.loads((tmp_path / "p2" / "rows.jsonl").read_text().splitlines()[0])["id"] == "ep#req-000-001"


def test_segment_teacher_cells_use_labels_and_compile() -> None:
    assert parse_instruction("put the red cube on the blue cube") == ("red cube", "blue cube")
    assert parse_instruction("pick up the red cube") == ("red cube", None)
    with pytest.raises(ValueError, match="put the X on the Y"):
        parse_instruction("open the drawer")
    cell = look_cell("red cube", "plate")
    assert 'robot.segment(h, "agentview", "red cube")' in cell and 'robot.segment(h, "agentview", "plate")' in cell
    for _, code in plan("red cube", "plate") + plan("red cube", None):
        compile(code, "<cell>", "exec")
        assert "mark_point" not in code
