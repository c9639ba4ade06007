"""captain datagen: harness episode records -> rows, and their masks token by token."""

from __future__ import annotations

import copy
import json

import pytest
from sft_rows import PYTHON_TOOL, agent_turn, check_mask, expected_agent_reply, image, tool, user, write_png

from captain_training.datagen.build import generate_rows
from captain_training.sft.errors import EpisodeRecordError
from captain_training.sft.reader import iter_rows, validate_file
from captain_training.sft.render import RowRenderer

EPISODE = "libero_goal_3_seed-7-a1b2c3"
IMG = f"images/episodes/{EPISODE}"
REPLIES = [
    ("Observe the scene.", "obs = robot.observe()\nimage(obs['value']['images'])"),
    ("Mark the bowl.", "b = robot.mark_point(obs['value']['observation_handle'], 'agentview', 0.44, 0.61)"),
    ("Retry the grasp.", "r = robot.move_to(gripper='close')"),
    ("Lift and check.", "r = robot.move_to([0.4, 0.1, 0.3], q, mode='manipulation')"),
    ("Finish.", "robot.finish()"),
]


def episode_records(success: bool = True) -> list[dict]:
    """Five requests; request 2 is unsupervised; before request 3 the harness dropped old images."""
    base = [{"role": "system", "content": "You are a coding agent."},
            user(f"<environment_context>\n<cwd>/data/captain/episodes/{EPISODE}/workspace</cwd>\n"
                 "</environment_context>"),
            user("Read TASK.md and complete the robot task.", image(f"{IMG}/obs_000_head.png"),
                 image(f"{IMG}/obs_000_wrist.png"))]
    outputs = [tool("Cell 1 completed in 0.5 s\nOutput:\n", image(f"{IMG}/obs_001_head.png"), call_id="c0"),
               tool("Cell 2 completed in 0.2 s\nOutput:\nmark_point: ok; detection_id=d1", call_id="c1"),
               tool("Cell 3 completed in 1.1 s\nOutput:\nmove_to: ok", call_id="c2"),
               tool("Cell 4 completed in 2.0 s\nOutput:\nmove_to: ok", call_id="c3")]
    records = []
    history = list(base)
    for k, (reasoning, code) in enumerate(REPLIES):
        if k == 3:  # images older than the newest one are replaced by a notice
            history = copy.deepcopy(history)
            history[2]["content"][1:] = [{"type": "text", "text": "[image omitted: obs_000_head.png]"},
                                         {"type": "text", "text": "[image omitted: obs_000_wrist.png]"}]
        messages = [*history, agent_turn(reasoning, code, call_id=f"c{k}")]
        meta = {"episode": EPISODE, "suite": "libero_goal", "task_id": 3, "seed": 7, "request_index": k,
                "host_final_success": success, "perturb_axes": ["robot_init"]}
        if k == 2:
            meta["nosup_reason"] = "recovery loop"
        refs = [p["image"] for m in messages if isinstance(m.get("content"), list) for p in m["content"]
                if p.get("type") == "image"]
        records.append({"images": refs, "tools": [PYTHON_TOOL], "messages": messages, "meta": meta})
        if k < len(outputs):
            history = [*messages, outputs[k]]
    return records


def write_episode(directory, name: str, records: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / name, "w") as handle:
        for record in reversed(records):  # order in the file does not matter
            handle.write(json.dumps(record) + "\n")


@pytest.fixture()
def episodes(tmp_path):
    for name in ("obs_000_head.png", "obs_000_wrist.png", "obs_001_head.png"):
        write_png(tmp_path / IMG / name, 32, 32)
    write_episode(tmp_path / "episodes", f"{EPISODE}.jsonl", episode_records())
    write_episode(tmp_path / "episodes" / "failed", "other.jsonl",
                  [{**r, "meta": {**r["meta"], "episode": "failed-ep"}} for r in episode_records(success=False)])
    return tmp_path


def test_per_request_rows(episodes, processor, tokenizer):
    result = generate_rows(episodes / "episodes", episodes / "rows.jsonl", mode="per-request")
    assert (result.n_episodes, result.n_episodes_skipped_unsuccessful, result.n_rows) == (2, 1, 5)
    assert result.n_unsupervised_rows == 1 and result.n_supervised_turns == 4
    assert validate_file(episodes / "rows.jsonl", image_root=episodes).ok
    records = list(iter_rows(episodes / "rows.jsonl"))
    assert [r.row["meta"]["turn_index"] for r in records] == [0, 1, 2, 3, 4]
    assert [r.row_id for r in records] == [f"{EPISODE}#req-{k:03d}" for k in range(5)]
    assert records[2].row["meta"]["nosup_reason"] == "recovery loop"
    assert records[0].row["meta"]["suite"] == "libero_goal" and records[0].row["meta"]["source"] == "agent"
    assert records[1].row["images"] == [f"{IMG}/obs_000_head.png", f"{IMG}/obs_000_wrist.png",
                                        f"{IMG}/obs_001_head.png"]
    assert records[3].row["images"] == [f"{IMG}/obs_001_head.png"]
    renderer = RowRenderer(processor, image_root=episodes, hint_mask_probability=0.0)
    for k, record in enumerate(records):
        rendered = renderer.render(record)
        if k == 2:
            assert rendered.n_supervised == 0
        else:
            check_mask(rendered, tokenizer, [expected_agent_reply(*REPLIES[k])], 1.0)


def test_prefix_packed_rows(episodes, processor, tokenizer):
    generate_rows(episodes / "episodes", episodes / "packed.jsonl", mode="packed")
    records = list(iter_rows(episodes / "packed.jsonl"))
    # the image omission before request 3 breaks the prefix chain: two packs
    metas = [r.row["meta"] for r in records]
    assert [(m["packed_n"], m["supervise_turns"]) for m in metas] == [(3, [0, 1]), (2, [3, 4])]
    assert [r.row_id for r in records] == [f"{EPISODE}#req-000-002", f"{EPISODE}#req-003-004"]
    renderer = RowRenderer(processor, image_root=episodes, hint_mask_probability=0.0)
    check_mask(renderer.render(records[0]), tokenizer,
               [expected_agent_reply(*REPLIES[0]), expected_agent_reply(*REPLIES[1])], 1.0)
    check_mask(renderer.render(records[1]), tokenizer,
               [expected_agent_reply(*REPLIES[3]), expected_agent_reply(*REPLIES[4])], 1.0)

    # every packed reply sees exactly the tokens its own request saw
    generate_rows(episodes / "episodes", episodes / "single.jsonl", mode="per-request")
    singles = list(iter_rows(episodes / "single.jsonl"))
    packed_ids = renderer.render(records[0]).input_ids.tolist()
    for k in (0, 1):
        own = renderer.render(singles[k])
        assert packed_ids[:own.n_tokens] == own.input_ids.tolist()


def test_pack_size_limit_and_all_unsupervised_pack(episodes):
    generate_rows(episodes / "episodes", episodes / "p2.jsonl", mode="packed", max_packed=2)
    metas = [r.row["meta"] for r in iter_rows(episodes / "p2.jsonl")]
    assert [m["packed_n"] for m in metas] == [2, 1, 2]
    assert metas[0]["supervise_turns"] == [0, 1]
    assert metas[1]["nosup_reason"] == "recovery loop" and "supervise_turns" not in metas[1]
    assert metas[2]["supervise_turns"] == [3, 4]


def test_unsuccessful_episodes_on_request(episodes):
    result = generate_rows(episodes / "episodes", episodes / "all.jsonl", include_unsuccessful=True)
    assert result.n_rows == 10 and result.n_episodes_skipped_unsuccessful == 0


def test_harness_records_layout(tmp_path):
    """The harness writes episodes/<episode>/rows.jsonl next to events.jsonl; only rows.jsonl are records."""
    folder = tmp_path / "records" / "episodes" / EPISODE
    write_episode(folder, "rows.jsonl", episode_records())
    (folder / "events.jsonl").write_text(json.dumps({"request_index": 0, "code": "x = 1"}) + "\n")
    result = generate_rows(tmp_path / "records", tmp_path / "rows.jsonl", mode="packed")
    assert result.n_episodes == 1 and result.n_rows == 2


def test_malformed_records_name_file_and_line(tmp_path):
    records = episode_records()
    records[1]["messages"] = records[1]["messages"][:-1]  # no reply
    write_episode(tmp_path / "eps", "e.jsonl", records)
    with pytest.raises(EpisodeRecordError, match=r"e.jsonl:\d+: messages must end with the model's reply"):
        generate_rows(tmp_path / "eps", tmp_path / "rows.jsonl")
    with pytest.raises(EpisodeRecordError, match="mode 'zip' is not one of: per-request, packed"):
        from captain_training.datagen.build import episode_rows
        from captain_training.datagen.records import read_episode

        write_episode(tmp_path / "ok", "e.jsonl", episode_records())
        episode_rows(read_episode(tmp_path / "ok" / "e.jsonl"), mode="zip")
