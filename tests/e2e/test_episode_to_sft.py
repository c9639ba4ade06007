"""Our own data trains like the released data: a harness episode (real mock driver, real
motion primitives, sandboxed session) is recorded, turned into rows by `captain datagen`,
validated, prepared with the offline Qwen3.5 processor and trained on for a few steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from captain_bringup.cli.main import app

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CELLS = [
    "q = [0, 2**-0.5, 2**-0.5, 0]\n"
    "def go(p, q, **kw):\n"
    "    r = robot.preview_motion('move_to', {'position': list(p), 'quaternion': q, **kw})\n"
    "    return robot.move_to(p, q, **kw) if r['success'] else r\n"
    "print(go([0.45, 0.05, 0.30], q, speed=0.2)['success'])",
    "s = robot.get_robot_state()\nprint(s['value']['end_effector_position_m'])",
    "robot.finish()",
]


def _invoke(args: list[str]) -> str:
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_recorded_episode_becomes_trainable_rows(tmp_path: Path) -> None:
    from captain_harness.core.episode.policy.replay import ReplayPolicy
    from captain_harness.core.episode.runner import run_episode
    from captain_training.qwen.tiny_model import cached_tiny_model_dir
    from captain_training.sft.reader import validate_file

    episodes = tmp_path / "episodes"
    outcome = run_episode("mock/empty", policy=ReplayPolicy.from_cells(CELLS), out_dir=episodes)
    n = outcome.requests
    assert n >= len(CELLS)  # the replay ends with a reply without a tool call

    rows_path = tmp_path / "rows.jsonl"
    out = _invoke(["datagen", str(episodes), "--out", str(rows_path), "--include-unsuccessful"])
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["rows"] == n and summary["episodes"] == 1, summary
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    # Each per-request row supervises exactly its own last assistant turn, whose code is ours.
    for k, row in enumerate(rows[: len(CELLS)]):
        assistants = [m for m in row["messages"] if m["role"] == "assistant"]
        assert row["meta"]["turn_index"] == len(assistants) - 1 == k
        assert assistants[-1]["tool_calls"][0]["function"]["arguments"]["input"] == CELLS[k]
    tool_text = json.dumps(rows[-1]["messages"])
    assert "move_to: ok; stopped_reason=target_reached" in tool_text

    report = validate_file(rows_path, image_root=episodes)
    assert report.n_rows == n and report.n_bad_rows == 0, report.problems

    model = cached_tiny_model_dir()
    prepared = tmp_path / "prepared"
    _invoke(["sft", "prepare", str(rows_path), "--model", str(model), "--out", str(prepared),
             "--image-root", str(episodes)])
    run_dir = tmp_path / "run"
    _invoke(["sft", "train", "--data", str(prepared), "--model", str(model), "--out", str(run_dir),
             "--max-steps", "2", "--device", "cpu", "--precision", "fp32"])
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [m["loss"] for m in metrics if "loss" in m]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
