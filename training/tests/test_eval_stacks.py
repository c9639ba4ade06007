"""`captain eval run --stacks`: settings the stacks' episode action does not carry are refused
before anything runs (none is accepted and ignored), and a bad namespace is a usage error.
The episodes themselves run on stacks in tests/ros/test_rollout_stacks_e2e.py (the same
``rollout_on_stacks``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from captain_training.eval.cli import app
from captain_training.eval.runner import EvalSpec, run_evaluation


@pytest.mark.parametrize("change", [{"workers": 2}, {"backend": "my.module:factory"}])
def test_stacks_refuse_settings_of_an_in_process_robot(tmp_path: Path, change: dict) -> None:
    spec = EvalSpec(suite="tabletop", tasks="cube_on_plate", states="0", policy="teacher", stacks=("/robot1",),
                    records=str(tmp_path / "records"), **change)
    with pytest.raises(ValueError, match="cannot be combined with --stacks"):
        run_evaluation(spec, tmp_path / "results.jsonl")
    assert not (tmp_path / "results.jsonl").exists() and not (tmp_path / "records").exists()


def test_a_bad_stack_namespace_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--suite", "tabletop", "--tasks", "cube_on_plate", "--states", "0",
                                      "--stacks", "/robot-1", "--out", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 2 and "not a ROS namespace" in result.output
