"""The w_t = 0 detector of `captain datagen` on a real harness episode of a policy that sets no labels:
repeated execution failures and recovery loops are left unsupervised, nothing else."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest, ToolCall, new_call_id
from captain_training.datagen.build import generate_rows

CELLS = [
    "x = 1 / 0",                                                   # 1 fails (first attempt: kept)
    "y = [][3]",                                                   # 2 fails again -> repeated failure
    "print('ok')",                                                 # 3 fine
    "x = 1 / 0",                                                   # 4 re-sends the code that failed -> loop
    "print('fine')",                                               # 5 fine
    "r = robot.recover(max_distance_m=0.01, max_duration_s=0.5)",  # 6 a recovery (kept)
    "print(robot.get_robot_state()['success'])",                   # 7 fine
    "r = robot.recover(max_distance_m=0.01, max_duration_s=0.5)",  # 8 recover again within 3 -> loop
    "print('done')",                                               # 9 fine
]


class _Cells(PolicyClient):
    name = "fixed-cells"

    def act(self, request: PolicyRequest) -> PolicyReply:
        i = request.request_index - 1
        if i >= len(CELLS):
            return PolicyReply(content="Stop.", finish_reason="stop")
        return PolicyReply(reasoning=f"step {i + 1}", tool_calls=[ToolCall(new_call_id(), CELLS[i])],
                           finish_reason="tool_calls")


@pytest.mark.sim
def test_detector_masks_repeated_failures_and_recovery_loops_of_any_policy(tmp_path):
    from captain_harness.core.episode.runner import run_episode

    outcome = run_episode("tabletop/cube_on_plate", policy=_Cells(), out_dir=str(tmp_path / "rec"), seed=5,
                          episode_id="loops")
    assert outcome.requests == len(CELLS) + 1
    result = generate_rows(tmp_path / "rec", tmp_path / "rows.jsonl", include_unsuccessful=True)
    rows = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text().splitlines()]
    by_code = {}
    for row in rows:
        reply = row["messages"][-1]
        calls = reply.get("tool_calls") or []
        code = calls[0]["function"]["arguments"] if calls else None
        code = code.get("input") if isinstance(code, dict) else (json.loads(code)["input"] if code else None)
        by_code.setdefault(code, []).append(row["meta"].get("nosup_reason"))
    reasons = [row["meta"].get("nosup_reason") for row in rows]
    assert reasons[:len(CELLS)] == [None, "repeated_execution_failure", None, "recovery_loop", None, None,
                                    None, "recovery_loop", None], reasons
    assert result.n_masked_repeated_failure == 1 and result.n_masked_recovery_loop == 2
    assert by_code["print('ok')"] == [None]

    off = generate_rows(tmp_path / "rec", tmp_path / "plain.jsonl", include_unsuccessful=True, mask_loops=False)
    assert off.n_masked_recovery_loop == 0 and off.n_unsupervised_rows == 0

    import typer

    from captain_training.datagen.cli import datagen

    app = typer.Typer()
    app.command()(datagen)
    res = CliRunner().invoke(app, [str(tmp_path / "rec"), "--out", str(tmp_path / "cli.jsonl"),
                                   "--include-unsuccessful"])
    assert res.exit_code == 0, res.output
    assert "1 request(s) with repeated execution failures, 2 in recovery loops" in res.output
