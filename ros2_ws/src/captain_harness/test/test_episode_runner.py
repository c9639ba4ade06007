"""Running episodes: the real mock driver with the motion primitives, host-only context for
privileged policies, parallel rollouts and the `run` / `rollout` commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from episode_support import SOLVE, toy_backend

from captain_harness.core.episode import cli
from captain_harness.core.episode.loop import LoopConfig
from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest
from captain_harness.core.episode.policy.registry import PolicySpec
from captain_harness.core.episode.policy.replay import ReplayPolicy
from captain_harness.core.episode.runner import EpisodeConfig, parse_range, rollout, run_episode, suite_tasks

SUMMARY_KEYS = {"episodes", "host_success", "strict_success", "false_finish", "harness_s_per_request_median",
                "episodes_per_hour_per_core"}


@pytest.mark.sim
def test_episode_on_the_mock_driver_with_the_motion_primitives(tmp_path: Path) -> None:
    code = [
        "r = robot.move_to([0.4, 0.0, 0.3], [0, 2**-0.5, 2**-0.5, 0], speed=0.2)\nprint(r['success'])",
        "s = robot.get_robot_state()['value']\nprint(np.round(s['end_effector_position_m'], 3).tolist())\n"
        "robot.move_to(gripper='close')['executed']",
        "robot.finish()",
    ]
    outcome = run_episode("mock/empty", policy=ReplayPolicy.from_cells(code), out_dir=tmp_path)
    events = [json.loads(x) for x in (Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()]
    out1, out2 = events[0]["cells"][0]["output"], events[1]["cells"][0]["output"]
    assert "Output:\nTrue\nmove_to: ok; stopped_reason=target_reached executed_distance_m=" in out1
    assert "[0.4, 0.0, 0.3]" in out2 and "move_to: ok; gripper_open_fraction=1->" in out2
    assert outcome.physical_actions == 2 and not outcome.finished and outcome.gate_rejections == 1
    assert (
        "finish: FAILED finish_rejected; no fresh observe after your last physical action"
        in events[2]["cells"][0]["output"]
    )  # no goal predicates: a fresh observe() is the standard
    frames = sorted(p.name for p in (tmp_path / "images" / "episodes" / outcome.episode_id).iterdir())
    assert frames == ["obs_000_head.png", "obs_000_wrist.png"]  # captured from the driver's cameras


def test_privileged_policy_gets_host_context_that_stays_on_the_host(tmp_path: Path) -> None:
    class Teacher(PolicyClient):
        name = "teacher"
        wants_host_context = True

        def __init__(self) -> None:
            self.seen: list = []
            self.replay = ReplayPolicy.from_cells(
                [
                    "print(sorted(k for k in globals() if not k.startswith('_')))",
                    "'bowl_m' in repr(robot.observe())",
                ]
            )

        def act(self, request: PolicyRequest) -> PolicyReply:
            self.seen.append(request.host_context)
            return self.replay.act(request)

    teacher = Teacher()
    config = EpisodeConfig(loop=LoopConfig(record_snapshots=True))
    outcome = run_episode("toy/0", policy=teacher, out_dir=tmp_path, backend_factory=toy_backend, config=config)
    assert teacher.seen[0] == {"bowl_m": [0.1, 0.2, 0.03]} and len(teacher.seen) == 3
    record = Path(outcome.record_dir)
    snapshots = [json.loads(x) for x in (record / "snapshots.jsonl").read_text().splitlines()]
    assert [s["request_index"] for s in snapshots] == [1, 2, 3, 4]  # before each request, and after the last
    assert snapshots[0]["snapshot"] == {"bowl_m": [0.1, 0.2, 0.03]}
    text = (record / "rows.jsonl").read_text() + (record / "events.jsonl").read_text()
    assert "bowl_m" not in text.replace("'bowl_m' in repr", "")
    assert "['image', 'math', 'np', 'robot']" in text


def test_the_session_reaches_only_registered_calls(tmp_path: Path) -> None:
    code = ["for name in ('_dispatch', 'snapshot', 'check_success', '__init__'):\n"
            "    r = robot._call(name, (), {})\n    print(name, r['success'], r['failure_category'])\n"
            "print(robot.snapshot()['message'])"]
    outcome = run_episode("toy/0", policy=ReplayPolicy.from_cells(code), out_dir=tmp_path, backend_factory=toy_backend)
    event = json.loads((Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()[0])
    output = event["cells"][0]["output"]
    for name in ("_dispatch", "snapshot", "check_success", "__init__"):
        assert f"{name} False invalid_argument" in output
    assert "robot has no call named 'snapshot'; available: finish, hold, mark_point" in output


def test_parallel_rollout_summarises_episodes(tmp_path: Path) -> None:
    first = run_episode(
        "toy/0", policy=ReplayPolicy.from_cells(SOLVE), out_dir=tmp_path / "rec", backend_factory=toy_backend
    )
    seen: list[dict] = []
    summary = rollout(
        ["toy/0", "toy/1"],
        [11, 12],
        policy=PolicySpec("replay", {"record": first.record_dir}),
        out_dir=tmp_path / "roll",
        backend_factory="episode_support:toy_backend",
        episodes=4,
        workers=2,
        progress=seen.append,
    )
    assert set(summary) >= SUMMARY_KEYS and summary["episodes"] == 4 and len(seen) == 4
    assert summary["strict_success"] == 1.0 and summary["mean_requests"] == 4.0
    assert sorted((o["task"], o["init_state"]) for o in summary["outcomes"]) == [
        ("toy/0", 11),
        ("toy/0", 12),
        ("toy/1", 11),
        ("toy/1", 12),
    ]
    assert 0 < summary["harness_s_per_request_median"] < 0.4


def test_run_and_rollout_commands_end_with_one_json_line(tmp_path: Path) -> None:
    first = run_episode(
        "toy/0", policy=ReplayPolicy.from_cells(SOLVE), out_dir=tmp_path / "rec", backend_factory=toy_backend
    )
    runner = CliRunner()
    result = runner.invoke(
        cli.app,
        [
            "run",
            "--task",
            "toy/0",
            "--init-state",
            "11",
            "--policy",
            "replay",
            "--record",
            first.record_dir,
            "--backend",
            "episode_support:toy_backend",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert (
        "=== request 1" in result.output
        and "--- In [1]:" in result.output
        and "finish: ok; accepted" in result.output
    )
    last = json.loads(lines[-1])
    assert last["outcome"] == "strict_success" and last["init_state"] == 11
    result = runner.invoke(
        cli.app,
        [
            "rollout",
            "--suite",
            "toy",
            "--tasks",
            "0",
            "--states",
            "1-2",
            "--policy",
            "replay",
            "--record",
            first.record_dir,
            "--backend",
            "episode_support:toy_backend",
            "--out",
            str(tmp_path / "roll"),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert set(summary) >= SUMMARY_KEYS and summary["episodes"] == 2 and "strict success %" in result.output


def test_task_lists_and_ranges() -> None:
    assert parse_range("11-16") == [11, 12, 13, 14, 15, 16] and parse_range("1,3,5-6") == [1, 3, 5, 6]
    assert parse_range("-1") == [-1]
    assert suite_tasks("libero_spatial")[-1] == "libero_spatial/9" and len(suite_tasks("libero_90")) == 90
    assert suite_tasks("tabletop", "cube_on_plate") == ["tabletop/cube_on_plate"]
    with pytest.raises(ValueError, match="give tasks"):
        suite_tasks("tabletop")


def test_system_prompt_from_a_released_row_replaces_the_harness_prompt(tmp_path: Path) -> None:
    """`--system-prompt` takes the prompt of a released model's SFT row (its system message
    up to ``# TASK.md``); the episode's rows carry it verbatim, followed by this task's TASK.md."""
    first = run_episode(
        "toy/0", policy=ReplayPolicy.from_cells(SOLVE), out_dir=tmp_path / "rec", backend_factory=toy_backend
    )
    released = json.loads((Path(first.record_dir) / "rows.jsonl").read_text().splitlines()[0])
    captured = "You are Codex, a coding agent.\n\nKnowledge cutoff: 2024-06\n\nSome captured rules."
    released["messages"][0]["content"] = captured + "\n\n# TASK.md\n\nan older task text\n"
    row_file = tmp_path / "released.jsonl"
    row_file.write_text(json.dumps(released) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")

    runner = CliRunner()
    base = ["run", "--task", "toy/0", "--policy", "replay", "--record", first.record_dir,
            "--backend", "episode_support:toy_backend", "--out", str(tmp_path / "run"), "--quiet"]
    result = runner.invoke(cli.app, [*base, "--system-prompt", str(bad)])
    assert result.exit_code == 2 and "no system message" in result.output
    result = runner.invoke(cli.app, [*base, "--system-prompt", str(row_file)])
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.output.strip().splitlines()[-1])
    rows = (tmp_path / "run").rglob("rows.jsonl")
    system = json.loads(next(iter(rows)).read_text().splitlines()[0])["messages"][0]["content"]
    assert system.startswith(captured + "\n\n# TASK.md\n\n")
    assert "an older task text" not in system and "TASK.md" in system and outcome["outcome"] == "strict_success"
