"""Where the teacher aims placements, on scenes built from snapshots in the libero_10 kitchen
layout (robot base at (-0.66, 0, 0.912) in the world): objects sharing a region are set
apart by their own widths and stay inside it, set-aside spots stay within comfortable
reach, and the code that turns a held object a quarter about the vertical does so."""

from __future__ import annotations

import math

import numpy as np
import pytest

from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot
from captain_harness.core.geometry import quat_to_matrix
from captain_teacher.boxes import rot_z
from captain_teacher.clearance import COMFORTABLE_REACH_M, MAX_SET_ASIDE_REACH_M, free_spot
from captain_teacher.planners.destinations import (
    AIM_EDGE_MARGIN_M,
    SHARE_GAP_M,
    destination_for,
    share_spread_m,
)
from captain_teacher.planners.placing import quarter_turn_fallback
from captain_teacher.planners.task import decompose
from captain_teacher.scene import SceneView

T_WORLD_BASE = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
YAW_180 = (0.0, 0.0, 0.0, 1.0)
UPRIGHT = (1.0, 0.0, 0.0, 0.0)


def _scene(poses: dict[str, tuple[tuple[float, float, float], tuple[float, float, float, float]]],
           goals: tuple[GoalPredicate, ...]) -> SceneView:
    objects = {n: ObjectPose(p, q) for n, (p, q) in poses.items()}
    snap = SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, objects, dict(objects), goals, "", "", None)
    return SceneView(snap, T_WORLD_BASE)


def _two_pots_on_the_stove(stove_xy: tuple[float, float] = (-0.202, -0.194)) -> SceneView:
    goals = tuple(GoalPredicate("on", (pot, "flat_stove_1_cook_region"), False) for pot in ("moka_pot_1", "moka_pot_2"))
    return _scene({"moka_pot_1": ((-0.072, 0.263, 0.966), YAW_180),
                   "moka_pot_2": ((0.026, 0.036, 0.966), YAW_180),
                   "flat_stove_1": ((*stove_xy, 0.905), UPRIGHT)}, goals)


def test_two_moka_pots_on_one_cook_region_are_set_apart_by_their_widths_and_stay_inside_it() -> None:
    scene = _two_pots_on_the_stove()
    places = [t for t in decompose_scene(scene) if t.kind == "place"]
    assert [t.dest.share for t in places] == [(0, 2), (1, 2)]
    aims = [t.dest.aim_m(scene) for t in places]
    dest = places[0].dest
    axis = dest.share_axis(scene)
    width = max(float(np.abs(rot_z(scene.box(n).yaw_rad)[:2, :2].T @ axis[:2]) @ scene.box(n).half_m[:2])
                for n in ("moka_pot_1", "moka_pot_2"))
    apart = abs(float((aims[1] - aims[0])[:2] @ axis[:2]))
    assert apart >= min(2 * width + SHARE_GAP_M, 2 * (max(dest.half_xy_m()) - AIM_EDGE_MARGIN_M)) - 1e-9
    assert apart > 2 * width  # the pots' outlines do not touch
    center = dest.region_center_m(scene)
    limit = np.asarray(dest.half_xy_m()) - AIM_EDGE_MARGIN_M + 1e-9
    for aim in aims:  # the shift toward the robot (a far region) plus the spread stay inside the region
        assert np.all(np.abs(aim[:2] - center[:2]) <= limit)


def decompose_scene(scene: SceneView) -> list:
    """``decompose`` needs only ``ctx.scene``."""

    class _Ctx:
        pass

    ctx = _Ctx()
    ctx.scene = scene
    return decompose(ctx)  # type: ignore[arg-type]


def test_the_spread_is_never_below_the_region_default_and_capped_by_the_region() -> None:
    scene = _two_pots_on_the_stove()
    dest = destination_for("flat_stove_1_cook_region", "on", scene)
    hx, hy = dest.half_xy_m()
    spread = share_spread_m(dest, ["moka_pot_1", "moka_pot_2"], scene)
    assert min(max(hx, hy) * 0.55, 0.045) <= spread <= max(hx, hy) - AIM_EDGE_MARGIN_M + 1e-12
    # small objects keep the region's own default
    assert share_spread_m(dest, [], scene) == pytest.approx(min(max(hx, hy) * 0.55, 0.045))


@pytest.mark.parametrize("seed", range(5))
def test_set_aside_spots_are_free_and_within_reach(seed: int) -> None:
    scene = _scene({"akita_black_bowl_1": ((-0.098, -0.007, 0.898), UPRIGHT),
                    "wooden_cabinet_1": ((0.04, -0.234, 0.905), YAW_180),
                    "plate_1": ((-0.05, 0.2, 0.9), UPRIGHT)}, ())
    bowl = scene.box("akita_black_bowl_1").center_m
    spot = free_spot(scene, "akita_black_bowl_1", [bowl], np.random.default_rng(seed))
    assert spot is not None
    reach = float(np.hypot(*spot[:2]))
    assert reach <= MAX_SET_ASIDE_REACH_M
    assert COMFORTABLE_REACH_M[0] <= reach <= COMFORTABLE_REACH_M[1]  # room enough here for a comfortable spot
    assert float(np.linalg.norm(spot[:2] - bowl[:2])) >= 0.13


def test_a_set_aside_spot_is_one_a_camera_sees() -> None:
    # a spot no camera sees cannot be clicked, and the teacher would stop there
    scene = _scene({"akita_black_bowl_1": ((-0.098, -0.007, 0.898), UPRIGHT),
                    "wooden_cabinet_1": ((0.04, -0.234, 0.905), YAW_180),
                    "plate_1": ((-0.05, 0.2, 0.9), UPRIGHT)}, ())
    bowl = scene.box("akita_black_bowl_1").center_m
    free = free_spot(scene, "akita_black_bowl_1", [bowl], np.random.default_rng(0))
    assert free is not None
    hidden_side = float(np.sign(free[1]))  # hide the side the unconstrained choice took
    spot = free_spot(scene, "akita_black_bowl_1", [bowl], np.random.default_rng(0),
                     seen=lambda p: float(np.sign(p[1])) != hidden_side)
    assert spot is not None and float(np.sign(spot[1])) != hidden_side
    assert free_spot(scene, "akita_black_bowl_1", [bowl], np.random.default_rng(0), seen=lambda p: False) is None


@pytest.mark.parametrize("refused", [0, 1, 2])
def test_a_refused_carry_is_retried_with_the_object_turned_a_quarter_either_way(refused: int) -> None:
    q0 = [0.0, math.cos(0.3), math.sin(0.3), 0.0]  # a top-down grasp, jaws turned
    tries: list[list[float]] = []

    def go(p: object, q: list[float], **kw: object) -> dict:
        tries.append(list(q))
        ok = len(tries) > refused
        return {"success": ok, "failure_category": None if ok else "joint_limit"}

    session = {"math": math, "go": go, "place": [0.5, 0.0, 0.3], "q": list(q0), "print": lambda *a: None}
    session["r"] = go(session["place"], session["q"])
    exec(quarter_turn_fallback(0.08, "moka pot"), session)  # the generated session code
    assert session["r"]["success"] is (refused < 3)
    R0 = quat_to_matrix(np.array(q0))
    R = quat_to_matrix(np.array(session["q"]))
    assert np.allclose(R[:, 2], R0[:, 2])  # the tool still points straight down
    turned = math.degrees(math.atan2(float(np.cross(R0[:, 0], R[:, 0]) @ R0[:, 2]), float(R0[:, 0] @ R[:, 0])))
    assert turned == pytest.approx([0.0, 90.0, -90.0][refused], abs=1e-6)
    assert len(tries) == refused + 1
