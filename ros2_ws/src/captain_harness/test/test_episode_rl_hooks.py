"""RL hooks of the episode loop: a host-side hook sees the hidden snapshot before every request
and can stop the episode; every event carries what its request did (``request_record``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from episode_support import SOLVE, toy_backend

from captain_harness.core.episode.loop import LoopConfig
from captain_harness.core.episode.policy.replay import ReplayPolicy
from captain_harness.core.episode.runner import EpisodeConfig, run_episode

CELLS = [
    "x = 1 / 0",
    "robot.move_to([0.1, 0.2, 0.03])\nrobot.move_to(gripper='sideways')",
    "robot.move_to(gripper='close')\nrobot.move_to([0.3, -0.1, 0.06])\nrobot.move_to(gripper='open')",
    "print('never sent')",
]


def _events(outcome) -> list[dict]:
    return [json.loads(x) for x in (Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()]


def test_hook_sees_each_snapshot_before_its_request_and_can_stop(tmp_path: Path) -> None:
    seen: list[tuple[int, list[float]]] = []

    def hook(index: int, snapshot: dict) -> str | None:
        seen.append((index, snapshot["bowl_m"]))
        return "critic_cut" if index == 4 else None

    config = EpisodeConfig(loop=LoopConfig(record_snapshots=True))
    outcome = run_episode("toy/0", policy=ReplayPolicy.from_cells(CELLS), out_dir=tmp_path,
                          backend_factory=toy_backend, config=config, before_request=hook)
    assert outcome.end_reason == "critic_cut" and outcome.requests == 3
    # request 3 carried the bowl onto the plate: solved, never finished
    assert outcome.outcome == "missed_finish" and outcome.host_success is True
    assert [i for i, _ in seen] == [1, 2, 3, 4]
    assert seen[2][1] == [0.1, 0.2, 0.03] and seen[3][1] != [0.1, 0.2, 0.03]
    snapshots = [json.loads(x) for x in (Path(outcome.record_dir) / "snapshots.jsonl").read_text().splitlines()]
    assert [s["request_index"] for s in snapshots] == [1, 2, 3, 4]  # the stop state once, no duplicate
    record = Path(outcome.record_dir)
    text = (record / "rows.jsonl").read_text() + (record / "events.jsonl").read_text()
    assert "bowl_m" not in text


def test_request_records_count_actions_failures_errors_and_finish(tmp_path: Path) -> None:
    outcome = run_episode("toy/0", policy=ReplayPolicy.from_cells(CELLS[:3]), out_dir=tmp_path,
                          backend_factory=toy_backend)
    records = [e["request_record"] for e in _events(outcome)]
    assert records[0] == {"physical_actions": 0, "failed_actions": 0, "python_error_only": True,
                          "accepted_finish": False}
    assert records[1] == {"physical_actions": 2, "failed_actions": 1, "python_error_only": False,
                          "accepted_finish": False}
    assert records[2]["physical_actions"] == 3 and records[2]["failed_actions"] == 0
    assert not any(r["accepted_finish"] for r in records)
    solved = run_episode("toy/0", policy=ReplayPolicy.from_cells(SOLVE), out_dir=tmp_path, backend_factory=toy_backend)
    assert solved.strict_success
    records = [e["request_record"] for e in _events(solved)]
    assert [r["accepted_finish"] for r in records] == [False] * (len(records) - 1) + [True]
    assert records[-1]["physical_actions"] == 0
