"""Real teacher episodes on the MuJoCo tabletop (whole harness: sandboxed session, guarded
motion, perception, completion gate): putting the red cube on the plate and picking it up
end in strict success on several layouts; the head-camera click lands on the cube (its
measured footprint is the cube's, not the table's); the grasp closes below the cube's top
even where the wrist camera saw only the top face; an injected placement failure leaves
the cube off the plate (a host failure), flagged in the records; no cell of these
episodes writes its verdict as a literal.

Each episode builds the tabletop scene and runs 4-9 requests (about 5-10 s here).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from captain_harness.core.episode.runner import run_episode
from captain_teacher import TeacherPolicy
from captain_teacher.clearance import FINGER_BELOW_TCP_M
from captain_teacher.objects import grasp_for
from captain_teacher.planners.grasping import choose_grasp, grasp_step
from captain_teacher.planners.measuring import measurement_problem
from captain_teacher.planners.verify import MEASURED_SUMMARY
from captain_teacher.verdicts import literal_verdicts

os.environ.setdefault("MUJOCO_GL", "egl")
pytestmark = [pytest.mark.sim]

#: Half size of the tabletop's cubes, m (the scene's ``CUBE_HALF_M``).
CUBE_HALF_M = 0.02


def _events(outcome: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()]


def _assert_no_literal_verdict(events: list[dict[str, Any]]) -> None:
    verifying = [c["code"] for e in events for c in e["cells"] if "within tolerance:" in c["code"]]
    assert verifying  # the episode has a verifying cell, and it computes its verdict
    assert {c["code"]: literal_verdicts(c["code"]) for e in events for c in e["cells"]
            if literal_verdicts(c["code"])} == {}


def _radii(events: list[dict[str, Any]], request_index: int) -> list[float]:
    """Footprint radii (m) in the measure receipts of one request."""
    text = "\n".join(c["output"] for e in events if e["request_index"] == request_index for c in e["cells"])
    return [float(m.group(1)) for m in re.finditer(r"measure_object_geometry: ok;.*?\bradius_m=([0-9.eE+-]+)", text)]


@pytest.mark.parametrize("seed", [1, 3])
def test_cube_on_plate_ends_in_strict_success_with_the_head_click_on_the_cube(seed: int, tmp_path: Path) -> None:
    outcome = run_episode("tabletop/cube_on_plate", policy=TeacherPolicy(seed=seed), out_dir=tmp_path, seed=seed)
    assert outcome.error is None, outcome.error
    assert outcome.outcome == "strict_success", (outcome.end_reason, outcome.requests)
    assert outcome.requests <= 10
    events = _events(outcome)
    # request 2 clicks the cube and the plate in the head image and measures them together:
    # the object's footprint is the cube's (2.8 cm), not the table's
    assert "agentview" in events[1]["cells"][0]["code"]
    cube_radius = _radii(events, 2)[0]
    assert abs(cube_radius - CUBE_HALF_M * 2**0.5) < 0.006, cube_radius
    closing = [c for e in events for c in e["cells"] if 'move_to(gripper="close")' in c["code"]]
    assert len(closing) == 1 and "held: True" in closing[0]["output"]  # the first grasp holds
    _assert_no_literal_verdict(events)


def test_pick_cube_ends_holding_the_cube_up(tmp_path: Path) -> None:
    outcome = run_episode("tabletop/pick_cube", policy=TeacherPolicy(seed=2), out_dir=tmp_path, seed=2)
    assert outcome.error is None, outcome.error
    assert outcome.outcome == "strict_success", (outcome.end_reason, outcome.requests)
    events = _events(outcome)
    last = "\n".join(c["code"] + c["output"] for c in events[-1]["cells"])
    assert "gripper_state()" in last and "held: True" in last  # verified while holding, then finished
    _assert_no_literal_verdict(events)


def test_a_grasp_from_a_top_only_wrist_measurement_closes_below_the_top(tmp_path: Path) -> None:
    """The wrist camera straight above sees only the cube's top face (measured bottom =
    top): the grasp must still go below the top, by the cube's known height, and keep the
    fingertips off the table."""
    policy = TeacherPolicy(seed=0, variety=False)
    outcome = run_episode("tabletop/pick_cube", policy=policy, out_dir=tmp_path, seed=0)
    assert outcome.outcome == "strict_success"
    ctx = next(iter(policy._episodes.values())).ctx
    box = ctx.scene.box("red_cube")
    assert abs(box.top_z_m - box.bottom_z_m - 2 * CUBE_HALF_M) < 1e-9
    top_only = {"center": [*box.center_m[:2], box.top_z_m], "top": box.top_z_m, "bottom": box.top_z_m,
                "radius": 0.028, "yaw": 0.0}
    assert measurement_problem(ctx, "red_cube", top_only) is None
    ctx.printed_history.append({"cube": top_only})
    spec = grasp_for("red_cube")
    step = grasp_step(ctx, "red_cube", None, spec, choose_grasp(ctx, "red_cube", spec, 0), "cube", 0)
    line = next(x for x in step.cells[0].splitlines() if x.startswith("grasp[2] = "))
    o = {"top_z_m": top_only["top"], "bottom_z_m": top_only["bottom"]}
    grasp_z = eval(line.split("=", 1)[1].split("#")[0], {"o": o, "max": max})
    assert box.top_z_m - grasp_z > 0.015  # the jaws close on the cube's sides ...
    assert grasp_z - FINGER_BELOW_TCP_M > box.bottom_z_m + 0.002  # ... with the fingertips off the table


def test_an_injected_placement_failure_leaves_the_cube_off_the_plate(tmp_path: Path) -> None:
    policy = TeacherPolicy(seed=1, failure_rate=1.0, failures="perturbed_place")
    outcome = run_episode("tabletop/cube_on_plate", policy=policy, out_dir=tmp_path, seed=1)
    assert outcome.error is None, outcome.error
    assert not outcome.host_success and outcome.finished  # it finishes as if nothing went wrong
    flags = json.loads((Path(outcome.record_dir) / "teacher.json").read_text())
    assert flags["injected_failure"] == "perturbed_place"
    metas = [e.get("meta") or {} for e in _events(outcome)]
    assert any(m.get("injected_failure") == "perturbed_place" for m in metas)
    _finish_summaries_match_the_checks(_events(outcome))


def _finish_summaries_match_the_checks(events: list[dict]) -> None:
    """A finish() summary claims the goals measured within tolerance only after a verifying
    cell printed ``within tolerance: True``."""
    verdict = None
    claims = []
    for event in events:
        for cell in event["cells"]:
            found = re.findall(r"^within tolerance: (True|False)$", cell["output"], re.MULTILINE)
            verdict = found[-1] == "True" if found else verdict
            if "robot.finish(summary=" in cell["code"]:
                claims.append((MEASURED_SUMMARY in cell["code"], verdict))
    assert claims, "no finish() with a summary"
    assert all(verdict is True for claimed, verdict in claims if claimed), claims
