"""The handle grasp into the microwave and the door pushed shut top-down: the hand
orientations they write, which objects go in by the handle, where a mug is first set down
when the microwave opens outward at the table's side, the door's push path, the way back
to the start pose after a set-down, and the short-number formatting the cells use. The
whole episodes run in ``tests/e2e/test_teacher_episodes.py`` (libero_10/9 and LIBERO-PRO's
swapped libero_10/9)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from captain_backends.core.snapshot import ObjectPose, SimSnapshot
from captain_harness.core.geometry import quat_to_matrix
from captain_teacher.cells import num, vec
from captain_teacher.planners.destinations import Destination
from captain_teacher.planners.door import (
    DOOR_HINGE_LOCAL_M,
    DOOR_PUSH_OUT_M,
    DOOR_PUSH_RADIUS_M,
    DOOR_STEP_RAD,
    swing_points,
)
from captain_teacher.planners.front_load import (
    BODY_CENTER_LOCAL_M,
    HANDLE_BAR_LOCAL_M,
    INSIDE_TCP_LOCAL_XY_M,
    MUG_RADIUS_M,
    STAGE_ASIDE_M,
    STAGE_OUT_M,
    front_loads,
    level_quat,
    look_quat,
    set_down_first,
    stage_spot,
    staged,
)
from captain_teacher.planners.placing import tall_on_way_home
from captain_teacher.scene import SceneView

MICROWAVE = Destination("microwave_1_heating_region", "microwave_1", "in", True, True)


@pytest.mark.parametrize("heading_deg", [90.0, 60.0, 135.0, -30.0])
@pytest.mark.parametrize("pitch_deg", [0.0, 32.0, 45.0])
def test_level_quat_tips_the_fingers_and_keeps_the_jaws_level(heading_deg: float, pitch_deg: float) -> None:
    h, p = math.radians(heading_deg), math.radians(pitch_deg)
    R = quat_to_matrix(level_quat(h, p))
    assert np.isclose(np.linalg.det(R), 1.0)
    fingers = [math.cos(h) * math.cos(p), math.sin(h) * math.cos(p), -math.sin(p)]
    assert np.allclose(R[:, 2], fingers, atol=1e-9)
    assert abs(R[2, 0]) < 1e-9  # the jaws close horizontally, across the handle's upright bar
    L = quat_to_matrix(look_quat(h, p))
    assert np.allclose(L[:, 2], fingers, atol=1e-9)
    # the look's jaws close in the vertical plane: the hand is narrow seen from the side
    assert np.isclose(L[:, 0] @ [-math.sin(h), math.cos(h), 0.0], 0.0, atol=1e-9) and L[2, 0] > 0


#: A quarter turn clockwise about the vertical (w, x, y, z): LIBERO's libero_10/9 mugs stand
#: so, their handles toward the robot's right (base -y).
YAW_MINUS_90 = (math.sqrt(0.5), 0.0, 0.0, -math.sqrt(0.5))


def _ctx(names: dict[str, tuple[float, float, float]], door_rad: float = -1.3,
         turned: tuple[str, ...] = ()) -> SimpleNamespace:
    poses = {n: ObjectPose(p, YAW_MINUS_90 if n in turned else (1.0, 0.0, 0.0, 0.0)) for n, p in names.items()}
    snap = SimSnapshot(0.0, (0.0, 0.0, 0.0), 1.0, poses, dict(poses), (), "", "", None,
                       {"microwave_1_microjoint": door_rad}, {"microwave_1_microjoint": door_rad}, {}, {}, {}, False)
    return SimpleNamespace(scene=SceneView(snap, np.eye(4)), home_m=np.array([0.4515, 0.0, 0.2613]))


#: libero_10/9's official layout (state 11) and LIBERO-PRO's swapped one: the microwave
#: moved to the table's right side, its opening (body -y) facing outward, the mug beside it.
OFFICIAL = {"white_yellow_mug_1": (0.644, -0.002, -0.012), "microwave_1": (0.652, 0.34, 0.008)}
SWAPPED = {"white_yellow_mug_1": (0.672, 0.019, -0.012), "microwave_1": (0.539, -0.274, 0.008)}
MUG = "white_yellow_mug_1"


def test_a_mug_is_set_down_in_front_of_an_outward_opening_first_within_reach_and_clear_of_it() -> None:
    assert not staged(_ctx(OFFICIAL, turned=(MUG,)), MICROWAVE)  # the slide in starts 0.65 m out
    ctx = _ctx(SWAPPED, -1.80, turned=(MUG,))
    assert staged(ctx, MICROWAVE)  # it would start 0.72 m out, and the microwave stands in between
    spot = stage_spot(ctx, MUG, MICROWAVE)
    shift = spot - ctx.scene.box(MUG).center_m
    assert abs(shift[2]) < 1e-9  # set down on the table, upright, turned as it stands
    mw = np.array(SWAPPED["microwave_1"])
    at = np.array(SWAPPED[MUG][:2]) + shift[:2]  # the mug's origin set down; its body +x is base -y
    bar = at + np.array([0.0, -HANDLE_BAR_LOCAL_M["white_yellow_mug"][0]])
    body = at + np.array([0.0, -BODY_CENTER_LOCAL_M["white_yellow_mug"][0]])
    inside = mw[:2] + np.asarray(INSIDE_TCP_LOCAL_XY_M)
    # the handle STAGE_OUT_M out in front of its place inside, STAGE_ASIDE_M toward the base
    assert np.allclose(bar - inside, [-STAGE_ASIDE_M, -STAGE_OUT_M], atol=1e-9)
    assert float(np.hypot(*bar)) < float(np.hypot(*(inside - [0.0, STAGE_OUT_M])))
    front = mw[1] + 0.0115 - 0.0995  # the microwave's front face (its body box), base y
    assert front - (body[1] + MUG_RADIUS_M) > 0.01  # the round body clears it
    hinge_x = mw[0] - 0.173  # the door, open 103 deg, leans away from the spot
    assert body[0] - MUG_RADIUS_M - hinge_x > 0.05
    first = set_down_first(ctx, MUG, MICROWAVE)
    assert first is not None and np.allclose(first[0], spot) and "in front of the opening" in first[1]
    assert set_down_first(_ctx(OFFICIAL, turned=(MUG,)), MUG, MICROWAVE) is None
    there = dict(SWAPPED, **{MUG: tuple(np.array(SWAPPED[MUG]) + shift + [0.01, 0.0, 0.0])})
    assert set_down_first(_ctx(there, -1.80, turned=(MUG,)), MUG, MICROWAVE) is None  # 1 cm off: there already


def test_the_way_back_after_a_set_down_rises_over_what_stands_on_it() -> None:
    ctx = _ctx(SWAPPED, -1.80, turned=(MUG,))
    spot = np.array([0.49, -0.43, -0.012])
    # 10 cm over the release (the mug hangs 9 cm below the fingertips) is under the
    # microwave's top (19.6 cm): the straight way home would sweep the fingers through it
    assert tall_on_way_home(ctx, spot, 0.09, exclude=(MUG,)) == "microwave_1"
    assert tall_on_way_home(ctx, spot + np.array([0.0, 0.0, 0.2]), 0.09, exclude=(MUG,)) is None  # high enough
    assert tall_on_way_home(ctx, np.array([0.6, 0.2, -0.012]), 0.09, exclude=(MUG,)) is None  # nothing between
    ctx.home_m = None
    assert tall_on_way_home(ctx, spot, 0.09) is None


def test_only_a_mug_whose_handle_is_known_goes_in_by_its_handle() -> None:
    ctx = _ctx({"white_yellow_mug_1": (0.64, 0.0, 0.0), "porcelain_mug_1": (0.5, -0.2, 0.0),
                "microwave_1": (0.65, 0.34, 0.0)})
    assert front_loads(ctx, "white_yellow_mug_1", MICROWAVE)
    assert not front_loads(ctx, "porcelain_mug_1", MICROWAVE)  # another model: its handle is not known
    plate = Destination("plate_1", "plate_1", "on", False, False)
    assert not front_loads(ctx, "white_yellow_mug_1", plate)


@pytest.mark.parametrize("door_rad", [-1.33, -2.05, -0.4])
def test_the_door_is_pushed_along_its_swing_outside_its_face_to_shut(door_rad: float) -> None:
    ctx = _ctx({"microwave_1": (0.652, 0.34, 0.008)}, door_rad)
    pts = swing_points(ctx, "microwave_1", door_rad)
    hinge = np.array([0.652, 0.34]) + np.asarray(DOOR_HINGE_LOCAL_M[:2])
    assert len(pts) == len(np.arange(door_rad, -0.03, DOOR_STEP_RAD)) + 1
    for p in pts:  # each push point rides the door's outer side at the push radius
        assert np.isclose(np.linalg.norm(p[:2] - hinge), math.hypot(DOOR_PUSH_RADIUS_M, DOOR_PUSH_OUT_M))
        assert np.isclose(p[2], 0.008 + 0.188 - 0.022)  # fingertips just below the door's top edge
    angles = [math.atan2(*(p[:2] - hinge)[::-1]) for p in pts]
    assert np.all(np.diff(angles) > 0)  # toward shut
    # the last push ends at the shut door: on the hinge line's outer side, along the front
    assert np.allclose(pts[-1][:2], hinge + np.array([DOOR_PUSH_RADIUS_M, -DOOR_PUSH_OUT_M]))


def test_num_keeps_whole_numbers_whole() -> None:
    assert num(20.0, 0) == "20" and num(100.0, 0) == "100" and num(-30.0, 0) == "-30"
    assert num(0.050) == "0.05" and num(1.0) == "1" and num(-0.0004) == "0" and num(2.5, 0) == "2"
    assert vec([0.1, 20.0], 0) == "[0, 20]"
