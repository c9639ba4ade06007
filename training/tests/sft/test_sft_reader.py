"""Streaming reader and whole-file validation of CaPtain-SFT-Data rows."""

from __future__ import annotations

import json

import pytest
from sft_rows import PYTHON_TOOL, agent_turn, image, tool, user, write_png, write_rows

from captain_training.sft.errors import RowFormatError
from captain_training.sft.reader import iter_rows, line_offsets, read_row_at, validate_file


def good_row(k: int = 0, images: tuple[str, ...] = ()) -> dict:
    task = user("Task.", *[image(ref) for ref in images]) if images else user("Task.")
    return {"id": f"ep#req-{k:03d}", "images": list(images), "tools": [PYTHON_TOOL],
            "messages": [{"role": "system", "content": "sys"}, task, agent_turn("r", f"x = {k}")],
            "meta": {"source": "agent", "turn_index": 0, "subset": "hard_batch1"}}


def test_rows_stream_with_line_numbers_and_offsets(tmp_path):
    path = write_rows(tmp_path / "rows.jsonl", [good_row(k) for k in range(5)])
    records = list(iter_rows(path))
    assert [r.line_number for r in records] == [1, 2, 3, 4, 5]
    assert [r.byte_offset for r in records] == line_offsets(path)
    with open(path, "rb") as handle:
        again = read_row_at(handle, records[3].byte_offset, 4)
    assert again.row == records[3].row and again.row_id == "ep#req-003"
    tail = list(iter_rows(path, start_offset=records[2].byte_offset, start_line=3, limit=2))
    assert [r.row["id"] for r in tail] == ["ep#req-002", "ep#req-003"]


def test_reading_is_lazy_and_a_bad_row_names_its_line(tmp_path):
    rows = [good_row(0), good_row(1), "{not json", good_row(3)]
    path = write_rows(tmp_path / "rows.jsonl", rows)
    iterator = iter_rows(path)
    assert next(iterator).line_number == 1
    assert next(iterator).line_number == 2  # rows before the bad one are delivered
    with pytest.raises(RowFormatError) as err:
        next(iterator)
    assert err.value.line_number == 3 and "not valid JSON" in str(err.value) and "rows.jsonl:3" in str(err.value)


def test_content_may_be_a_string_or_a_list_of_parts(tmp_path):
    row = good_row()
    row["messages"][1] = {"role": "user", "content": [{"type": "text", "text": "Task."}]}
    row["messages"].append({"role": "tool", "tool_call_id": "call_0", "content": "Cell 1 completed."})
    row["messages"].append(agent_turn("again", "y = 1"))
    row["meta"]["turn_index"] = 1
    (record,) = list(iter_rows(write_rows(tmp_path / "rows.jsonl", [row])))
    assert record.row["messages"][3]["content"] == "Cell 1 completed."


def test_validate_reports_every_problem_of_the_file_at_once(tmp_path):
    write_png(tmp_path / "img" / "a.png", 32, 32)
    bad_role = good_row(1)
    bad_role["messages"][1]["role"] = "human"
    bad_images = good_row(2, images=("img/a.png",))
    bad_images["images"] = []
    missing_image = good_row(3, images=("img/missing.png",))
    undeclared = good_row(4)
    undeclared["messages"][2]["tool_calls"][0]["function"]["name"] = "bash"
    no_source = good_row(5)
    del no_source["meta"]["source"]
    rows = [good_row(0, images=("img/a.png",)), bad_role, bad_images, missing_image, undeclared, no_source,
            "", '["a list"]', good_row(8)]
    report = validate_file(write_rows(tmp_path / "rows.jsonl", rows), image_root=tmp_path)
    assert not report.ok
    assert report.n_rows == 9 and report.n_bad_rows == 7
    by_line = {}
    for problem in report.problems:
        by_line.setdefault(problem.line_number, []).append(problem.message)
    assert sorted(by_line) == [2, 3, 4, 5, 6, 7, 8]
    assert any("role 'human' is not one of: system, user, assistant, tool" in m for m in by_line[2])
    assert any("images (0) must equal the image parts" in m for m in by_line[3])
    assert any("img/missing.png" in m and "not found" in m for m in by_line[4])
    assert any("calls 'bash', which the row's tools do not declare (declared: python)" in m for m in by_line[5])
    assert any("meta.source None is not one of: agent, qapack" in m for m in by_line[6])
    assert any("blank line" in m for m in by_line[7])
    assert any("must be a JSON object" in m for m in by_line[8])
    assert report.counts["source"] == {"agent": 2}
    summary = report.to_dict()
    assert summary["n_bad_rows"] == 7 and len(summary["problems"]) == len(report.problems)
    json.dumps(summary)


def test_validate_a_clean_file(tmp_path):
    path = write_rows(tmp_path / "rows.jsonl", [good_row(k) for k in range(3)])
    report = validate_file(path)
    assert report.ok and report.n_rows == 3 and report.problems == []
    assert report.counts["supervision"] == {"per_request": 3}


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r: r["messages"].append({"role": "system", "content": "late"}), "may only be the first message"),
    (lambda r: r["messages"][2].update(content=[{"type": "image", "image": "a.png"}]),
     "images are allowed in user and tool messages only"),
    (lambda r: r["messages"][2]["tool_calls"][0]["function"].update(arguments={}),
     "lacks required argument(s) input"),
    (lambda r: r["messages"][2]["tool_calls"][0]["function"].update(arguments="{bad"), "not JSON"),
    (lambda r: r.update(messages=[r["messages"][0], r["messages"][2]]), "no user query"),
    (lambda r: r.update(messages=r["messages"][:2]), "no assistant turn"),
    (lambda r: r["messages"][1].update(content=[{"type": "audio"}]), "type 'audio' is not one of: text, image"),
])
def test_structural_problems_say_what_to_change(mutate, fragment):
    from captain_training.sft.rows import row_problems

    row = good_row()
    mutate(row)
    problems = row_problems(row)
    assert any(fragment in p for p in problems), problems


def test_tool_messages_are_context_and_tool_response_users_are_not_queries():
    from captain_training.sft.rows import row_problems

    row = good_row()
    row["messages"][1] = user("<tool_response>\nold\n</tool_response>")
    assert any("no user query" in p for p in row_problems(row))
    row["messages"].insert(2, tool("out"))
    row["messages"][1] = user("real task")
    assert row_problems(row) == []
