"""Episode records: valid CaPtain-SFT-Data rows, written as the episode runs; a replayed
episode reproduces its receipts; images are taken from the workspace safely."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from episode_support import SOLVE, toy_backend

from captain_harness.core.episode.errors import PolicyError
from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest
from captain_harness.core.episode.policy.registry import PolicySpec
from captain_harness.core.episode.policy.replay import ReplayPolicy
from captain_harness.core.episode.prompt import PYTHON_TOOL
from captain_harness.core.episode.records import ImageStore, read_rows
from captain_harness.core.episode.runner import EpisodeConfig, run_episode

CARD_META = {
    "episode",
    "source",
    "subset",
    "origin",
    "suite",
    "task_id",
    "seed",
    "request_index",
    "turn_index",
    "packed_n",
    "total_tokens",
    "n_images",
    "host_final_success",
    "perturb_axes",
}


def events_of(outcome) -> list[dict]:
    return [json.loads(x) for x in (Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()]


def check_row_format(row: dict, root: Path, request_index: int) -> None:
    """The row format of the data card, field by field."""
    assert row["id"] == f"{row['meta']['episode']}#req-{request_index:03d}"
    assert row["tools"] == [PYTHON_TOOL]
    msgs = row["messages"]
    assert [m["role"] for m in msgs[:3]] == ["system", "user", "user"]
    assert "\n# TASK.md\n" in msgs[0]["content"]
    assert msgs[1]["content"].startswith("<environment_context>") and "<cwd>" in msgs[1]["content"]
    assert msgs[2]["content"][0]["text"].startswith("Read TASK.md and complete the robot task")
    assert msgs[-1]["role"] == "assistant"
    pending: list[str] = []
    for m in msgs[3:]:
        if m["role"] == "assistant":
            assert not pending and isinstance(m["reasoning_content"], str)
            for call in m.get("tool_calls", []):
                assert call["type"] == "function" and call["function"]["name"] == "python"
                assert isinstance(call["function"]["arguments"]["input"], str)
                pending.append(call["id"])
        elif m["role"] == "tool":
            assert m["tool_call_id"] == pending.pop(0)
            assert m["content"][0]["type"] == "text" and m["content"][0]["text"].startswith("Cell ")
    refs = [
        p["image"]
        for m in msgs
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image"
    ]
    assert row["images"] == refs and all((root / p).is_file() for p in refs)
    meta = row["meta"]
    assert set(meta) >= CARD_META and meta["source"] == "agent" and meta["request_index"] == request_index
    assert meta["turn_index"] == sum(m["role"] == "assistant" for m in msgs) - 1
    assert meta["n_images"] == len(refs) and meta["packed_n"] == 1 and isinstance(meta["total_tokens"], int)


def test_rows_reload_as_valid_rows(tmp_path: Path) -> None:
    outcome = run_episode(
        "toy/0",
        policy=ReplayPolicy.from_cells(SOLVE),
        out_dir=tmp_path,
        backend_factory=toy_backend,
        init_state=11,
    )
    assert outcome.outcome == "strict_success"
    rows = read_rows(Path(outcome.record_dir) / "rows.jsonl")
    assert len(rows) == 4
    for k, row in enumerate(rows, 1):
        check_row_format(row, tmp_path, k)
        assert row["meta"]["host_final_success"] is True and row["meta"]["seed"] == 11
    assert (
        rows[1]["messages"][:-1] == rows[2]["messages"][: len(rows[1]["messages"]) - 1]
    )  # history only grows
    from captain_training.sft import reader

    report = reader.validate_file(Path(outcome.record_dir) / "rows.jsonl", image_root=tmp_path)
    assert report.n_rows == 4 and report.n_bad_rows == 0, report.problems


def test_replayed_episode_reproduces_its_receipts(tmp_path: Path) -> None:
    first = run_episode(
        "toy/0", policy=ReplayPolicy.from_cells(SOLVE), out_dir=tmp_path / "a", backend_factory=toy_backend
    )
    again = run_episode(
        "toy/0",
        policy=PolicySpec("replay", {"record": first.record_dir}),
        out_dir=tmp_path / "b",
        backend_factory=toy_backend,
    )
    receipts = [[c["receipts"] for c in e["cells"]] for e in events_of(first)]
    assert receipts == [[c["receipts"] for c in e["cells"]] for e in events_of(again)]
    assert sum(len(r) for cells in receipts for r in cells) >= 12
    assert (again.outcome, again.requests, again.physical_actions) == (first.outcome, 4, 4)


def test_records_are_written_as_the_episode_runs(tmp_path: Path) -> None:
    class Breaks(PolicyClient):
        name = "breaks"

        def act(self, request: PolicyRequest) -> PolicyReply:
            if request.request_index == 3 and request.budget["physical_actions_used"] == 0:
                raise RuntimeError("the policy process died")
            return ReplayPolicy.from_cells([SOLVE[0], SOLVE[0]]).act(request)

    rows_seen: list[int] = []

    def on_event(event: dict) -> None:
        path = next((tmp_path / "episodes").iterdir()) / "rows.jsonl"
        rows_seen.append(len(path.read_text().splitlines()))

    outcome = run_episode(
        "toy/0", policy=Breaks(), out_dir=tmp_path, backend_factory=toy_backend, on_event=on_event
    )
    assert rows_seen == [1, 2]
    assert outcome.outcome == "infrastructure_failure" and "the policy process died" in outcome.error
    rows = read_rows(Path(outcome.record_dir) / "rows.jsonl")
    assert len(rows) == 2 and rows[0]["meta"]["host_final_success"] is False
    saved = json.loads((Path(outcome.record_dir) / "outcome.json").read_text())
    assert saved["end_reason"] == "harness_error" and saved["requests"] == 3  # the third one failed


def test_replay_refuses_files_that_are_not_rows(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text('{"messages": []}\n')
    with pytest.raises(PolicyError, match="not an episode row"):
        ReplayPolicy.from_record(tmp_path)


def test_image_store_takes_only_real_images_from_the_workspace(tmp_path: Path) -> None:
    from PIL import Image

    ws, host_secret = tmp_path / "ws", tmp_path / "secret.png"
    ws.mkdir()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(host_secret)
    Image.new("RGB", (4, 4), (0, 255, 0)).save(ws / "a.png")
    os.symlink(host_secret, ws / "link.png")
    (ws / "sub").mkdir()
    os.symlink(tmp_path, ws / "sub" / "up")
    (ws / "text.png").write_text("not an image")
    store = ImageStore(ws, tmp_path / "records", "images/episodes/e")
    assert store.attach("a.png") == ("images/episodes/e/a.png", None)
    for name in (
        "link.png",
        "sub/up/secret.png",
        "../secret.png",
        "/etc/hostname",
        "text.png",
        "missing.png",
    ):
        path, problem = store.attach(name)
        assert path is None and problem, name
    Image.new("RGB", (4, 4), (0, 0, 255)).save(ws / "a.png")  # same name, new content
    assert store.attach("a.png") == ("images/episodes/e/a_v2.png", None)
    assert store.attach("a.png") == ("images/episodes/e/a_v2.png", None)


def test_episode_bag_reads_back_with_mcap_ros2(tmp_path: Path) -> None:
    """The bag is rosbag2 MCAP with CDR messages: mcap-ros2-support (not the writer's library)
    decodes every request, cell, receipt and attached image."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    outcome = run_episode(
        "toy/0",
        policy=ReplayPolicy.from_cells(SOLVE),
        out_dir=tmp_path,
        backend_factory=toy_backend,
        config=EpisodeConfig(mcap=True),
    )
    bag = Path(outcome.record_dir) / "episode_bag"
    assert (bag / "metadata.yaml").is_file()
    (mcap_file,) = bag.glob("*.mcap")
    with open(mcap_file, "rb") as f:
        decoded = [(channel.topic, schema.name, message.log_time, msg) for schema, channel, message, msg
                   in make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages(log_time_order=False)]
    topics = [d[0] for d in decoded]
    assert topics.count("/captain/requests") == 4 and topics.count("/captain/cells") == 4
    assert {s for t, s, _, _ in decoded if t.startswith("/captain/") and "images" not in t} == {"std_msgs/msg/String"}
    requests = [json.loads(m.data) for t, _, _, m in decoded if t == "/captain/requests"]
    assert [r["request_index"] for r in requests] == [1, 2, 3, 4]
    receipts = [json.loads(m.data) for t, _, _, m in decoded if t == "/captain/receipts"]
    events = [json.loads(line) for line in (Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()]
    assert [r["receipt"] for r in receipts] == [x for e in events for c in e["cells"] for x in c.get("receipts", [])]
    images = [m for t, s, _, m in decoded if t == "/captain/images/head"]
    assert images and images[0].format == "png" and bytes(images[0].data[:4]) == b"\x89PNG"
    times = [d[2] for d in decoded]
    assert times == sorted(times) and len(set(times)) == len(times)
