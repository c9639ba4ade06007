"""Reach-aware regrasping: after a rim grasp the arm could not reach (the cell prints
``descent: joint_limit`` or ``descent: ik_failed`` when the preview refused the approach or
the descent), the next attempt turns the jaws well away from the failed ones. The opposite
side of a rim has the same jaws, so the retry order by room alone could try the same wrist
turn again (libero_goal/3 state 13: jaws along x at both the far and the near side)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from captain_backends.core.snapshot import ObjectPose, SimSnapshot
from captain_teacher.objects import grasp_for
from captain_teacher.planners.grasping import UNREACHABLE_JAW_TURN_RAD, choose_grasp, wrap_jaw
from captain_teacher.planners.pick_place import UNREACHABLE_DESCENT
from captain_teacher.scene import SceneView

T_WORLD_BASE = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
BOWL = "akita_black_bowl_1"


def _ctx(unreachable: list[float] | None = None) -> SimpleNamespace:
    poses = {BOWL: ObjectPose((-0.06, 0.24, 0.8984), (1.0, 0.0, 0.0, 0.0)),
             "plate_1": ObjectPose((-0.16, 0.05, 0.9025), (1.0, 0.0, 0.0, 0.0))}
    snap = SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, poses, dict(poses), (), "", "", None)
    return SimpleNamespace(scene=SceneView(snap, T_WORLD_BASE), rng=np.random.default_rng(0),
                           unreachable_jaws={BOWL: unreachable} if unreachable else {})


def test_a_retry_after_an_unreachable_grasp_turns_the_jaws_away() -> None:
    spec = grasp_for(BOWL)
    for attempt in (1, 2):
        plain = choose_grasp(_ctx(), BOWL, spec, attempt)
        failed = [plain.jaw_yaw]
        turned = choose_grasp(_ctx(failed), BOWL, spec, attempt)
        assert abs(wrap_jaw(turned.jaw_yaw - plain.jaw_yaw)) >= UNREACHABLE_JAW_TURN_RAD - 1e-9
        assert "the arm could not reach" in turned.note
    # two failed wrist turns 30 deg apart (neighbouring sides): the retry avoids both
    both = [0.0, math.pi / 6]
    g = choose_grasp(_ctx(both), BOWL, spec, 2)
    assert all(abs(wrap_jaw(g.jaw_yaw - f)) >= UNREACHABLE_JAW_TURN_RAD - 1e-9 for f in both)


def test_the_failed_descent_is_read_from_the_grasp_cells_own_print() -> None:
    # the grasp cell prints: print("descent:", (r.get("value") or {}).get("stopped_reason"))
    for reason, unreachable in (("joint_limit", True), ("ik_failed", True), ("target_reached", False),
                                ("contact", False)):
        text = f"go: preview refused: {reason} - ...\ndescent: {reason}\nheld: False"
        assert bool(UNREACHABLE_DESCENT.search(text)) is unreachable
