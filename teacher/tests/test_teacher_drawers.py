"""Opening a drawer with things around it, on the layout of LIBERO-PRO's ``libero_goal_swap``
task 0 (open the middle drawer; robot base at (-0.66, 0, 0.912) in the world; poses of
its official state 11): objects standing where the open drawer will be are set aside
first, and a stove low beside the pull makes the hand pull with its fingers tipped down."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot
from captain_harness.core.geometry import quat_to_matrix
from captain_teacher.planners import articulated
from captain_teacher.planners.task import decompose
from captain_teacher.scene import SceneView

T_WORLD_BASE = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
MIDDLE = "wooden_cabinet_1_middle_region"
SWAP_0 = {  # world position (m), quaternion wxyz
    "akita_black_bowl_1": ((-0.0795, 0.0029, 0.8984), (0.7071, 0.0, 0.0, 0.7071)),
    "cream_cheese_1": ((-0.0608, 0.1347, 0.9089), (0.0, 0.0, 0.0, 1.0)),
    "plate_1": ((0.0459, -0.0098, 0.9025), (0.7071, 0.0, 0.0, 0.7071)),
    "wine_bottle_1": ((-0.2107, -0.064, 0.8989), (0.0, 0.0, 0.0, 1.0)),
    "flat_stove_1": ((-0.4044, 0.2024, 0.905), (1.0, 0.0, 0.0, 0.0)),
    "wine_rack_1": ((0.0229, -0.2311, 0.92), (0.0, 0.0, 0.0, 1.0)),
    "wooden_cabinet_1": ((-0.2504, -0.254, 0.905), (0.0, 0.0, 0.0, 1.0)),
}
CLOSED = {"wooden_cabinet_1_top_level": 0.0, "wooden_cabinet_1_middle_level": 0.0,
          "wooden_cabinet_1_bottom_level": 0.0, "flat_stove_1_button": 0.0}


def _ctx(moved: dict[str, tuple[float, float, float]] | None = None, joints: dict[str, float] | None = None
         ) -> SimpleNamespace:
    poses = {n: ObjectPose((moved or {}).get(n, p), q) for n, (p, q) in SWAP_0.items()}
    goal = GoalPredicate("open", (MIDDLE,), False, True, False)
    snap = SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, poses, dict(poses), (goal,), "", "", None,
                       articulated_joints={**CLOSED, **(joints or {})})
    return SimpleNamespace(scene=SceneView(snap, T_WORLD_BASE))


def test_objects_where_the_open_drawer_will_be_are_set_aside_before_it_is_opened() -> None:
    ctx = _ctx()
    # the bottle stands in front of the drawer; the low bowl beside it passes under the raised drawer
    assert articulated.pull_obstacles(ctx, MIDDLE) == ["wine_bottle_1"]
    kinds = [(t.kind, t.args[0]) for t in decompose(ctx)]
    assert kinds == [("clear_pull", "wine_bottle_1"), ("open", MIDDLE)]
    bottom = _ctx(joints={})
    assert articulated.pull_obstacles(bottom, "wooden_cabinet_1_bottom_region") == ["akita_black_bowl_1",
                                                                                  "wine_bottle_1"]
    # set down elsewhere, or the drawer already open: nothing is in the way
    away = _ctx(moved={"wine_bottle_1": (0.0, 0.25, 0.8989), "akita_black_bowl_1": (0.05, -0.2, 0.8984)})
    assert articulated.pull_obstacles(away, MIDDLE) == []
    assert [t.kind for t in decompose(away)] == ["open"]
    assert articulated.pull_obstacles(_ctx(joints={"wooden_cabinet_1_middle_level": -0.15}), MIDDLE) == []


def test_a_stove_low_beside_the_pull_tips_the_pulling_hand() -> None:
    aside = {"wine_bottle_1": (0.0, 0.25, 0.8989), "akita_black_bowl_1": (0.05, -0.2, 0.8984)}  # set aside first
    ctx = _ctx(moved=aside)
    middle = articulated.drawer_for_region(ctx.scene, MIDDLE)
    pull = middle.pull_direction(ctx.scene)
    assert articulated._low_beside_pull(ctx, middle, pull) == "flat_stove_1"
    far = _ctx(moved={**aside, "flat_stove_1": (0.0, 0.35, 0.905)})
    assert articulated._low_beside_pull(far, middle, pull) is None


@pytest.mark.parametrize("pull", [(0.0, 1.0), (0.0, -1.0), (-1.0, 0.0), (0.6, -0.8)])
def test_tipped_pulling_hand_keeps_the_jaws_across_the_bar_and_points_the_fingers_down_into_the_cabinet(
        pull: tuple[float, float]) -> None:
    tilt = articulated.PULL_TILT_RAD
    p = np.array([*pull, 0.0])
    bar = np.cross(p, [0.0, 0.0, 1.0])
    R = quat_to_matrix(articulated.tipped_side_quat(np.array(pull), tilt))
    assert np.isclose(np.linalg.det(R), 1.0)
    jaw, fingers = R[:, 0], R[:, 2]
    assert abs(float(np.dot(jaw, bar))) < 1e-9  # the jaws still close across the bar
    assert np.isclose(fingers[2], -math.sin(tilt))  # tipped down ...
    assert np.isclose(float(np.dot(fingers, -p)), math.cos(tilt))  # ... into the cabinet
    assert np.allclose(articulated._palm_axis(np.array(pull), tilt), -fingers)
