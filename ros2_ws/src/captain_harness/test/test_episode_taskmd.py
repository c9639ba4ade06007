"""TASK.md states the task, the success standard with tolerances, budgets and the API."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from episode_support import ToyWorld

from captain_harness.core.api import RobotAPI
from captain_harness.core.budget import BudgetLimits
from captain_harness.core.episode.gate import CompletionGate, GateConfig, standards_for
from captain_harness.core.episode.taskmd import TaskMdContext, client_signature_text, render_task_md


def test_task_md_has_every_section(tmp_path: Path) -> None:
    api = RobotAPI()
    api.register_object(ToyWorld(tmp_path))
    config = GateConfig(xy_tolerance_m=0.015)
    gate = CompletionGate(standards_for(["On(akita_black_bowl_1, plate_1)"], config), config)
    api.register("finish", gate.primitive(api), group="finish")
    text = render_task_md(TaskMdContext(
        instruction="put the black bowl on the plate", standards=gate.standards,
        limits=BudgetLimits(40, 100, 600.0), gate=gate.config, workspace="/data/captain/episodes/e/workspace",
        cell_timeout_s=90, max_output_tokens=3000), api.specs)
    assert text.startswith("# TASK.md\n\n## Task\n\nput the black bowl on the plate")
    assert "`On(akita_black_bowl_1, plate_1)`" in text and "<= 0.015 m" in text
    assert "At most 40 requests" in text and "100 physical actions" in text and "600 s of wall time" in text
    assert "(hold, move_to)" in text and "at most 2 times" in text
    assert "Quaternions are `[w, x, y, z]`" in text and '"robot0_eye_in_hand"' in text
    assert "/data/captain/episodes/e/workspace" in text
    assert "empty hand that reaches its target touching nothing" in text and "at most 0.5 N" in text
    move = text.index("#### `robot.move_to(")
    assert "● physical action" in text[move:move + 400] and "command the jaw" in text[move:]
    assert text.index("### Perception") < text.index("### Measurement") < text.index("### Motion") \
        < text.index("### Finishing")
    assert "#### `robot.finish(summary: str = '', **details)`" in text


def test_client_signatures_compile(tmp_path: Path) -> None:
    api = RobotAPI()
    api.register_object(ToyWorld(tmp_path))
    for spec in api.specs.values():
        sig = client_signature_text(spec)
        compile(f"def f{sig}: pass", "<t>", "exec")
    assert client_signature_text(api.specs["hold"]) == "(duration_s=1.0)"
