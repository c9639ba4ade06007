"""SFT median physical-action counts, read from rows the harness recorded (real episodes on the
mock driver with the motion primitives), through `captain rl medians`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from captain_harness.core.episode.policy.replay import ReplayPolicy
from captain_harness.core.episode.runner import run_episode
from captain_training.rl.cli import app
from captain_training.rl.sft_medians import episode_action_counts, physical_receipts

DOWN = "[0, 2**-0.5, 2**-0.5, 0]"


def _episode(out: Path, moves: int) -> tuple[Path, int]:
    cells = [f"robot.move_to([0.4, {0.02 * k:.2f}, 0.3], {DOWN}, speed=0.2)['success']" for k in range(moves)]
    cells.insert(1, "robot.get_robot_state()['success']")
    cells.append("robot.hold(duration_s=0.05)\nrobot.move_to(gripper='close')['executed']")
    cells.append("print('done')")
    outcome = run_episode("mock/empty", policy=ReplayPolicy.from_cells(cells), out_dir=out)
    return Path(outcome.record_dir) / "rows.jsonl", outcome.physical_actions


@pytest.mark.sim
def test_medians_count_each_physical_receipt_once(tmp_path: Path) -> None:
    files, truth = [], []
    for k, moves in enumerate((1, 2, 4)):
        rows, actions = _episode(tmp_path / f"e{k}", moves)
        files.append(rows)
        truth.append(actions)
    assert truth == [3, 4, 6]  # moves + hold + the jaw command, as the harness's budget counted them
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    for row in rows:
        row["meta"]["host_final_success"] = True
    counts = episode_action_counts(rows)
    assert sorted(n for _, n in counts.values()) == truth
    assert {task for task, _ in counts.values()} == {"mock/empty"}

    merged = tmp_path / "sft.jsonl"
    merged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(app, ["medians", "--data", str(merged), "--out", str(tmp_path / "m.yaml")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["sft_median_actions"] == {"mock/empty": 4.0}
    assert yaml.safe_load((tmp_path / "m.yaml").read_text()) == {"rollout": {"sft_median_actions": {"mock/empty": 4.0}}}


def test_receipt_lines_and_bad_input() -> None:
    text = ("Cell 3 completed in 1.0 s\nOutput:\nmove_to: ok; stopped_reason=target_reached\n"
            "observe: ok; observation_handle=obs_1\nmove_to: FAILED controller_rejected; emergency_limit\n"
            "hold: ok\nprint('move_to: ok') inside output\n")
    assert physical_receipts(text) == 3
    result = CliRunner().invoke(app, ["medians", "--data", "/nonexistent.jsonl"])
    assert result.exit_code == 2 and "no such file" in result.output
