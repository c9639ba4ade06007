"""Where the teacher aims placements, on scenes built from snapshots in the libero_10 kitchen
layout (robot base at (-0.66, 0, 0.912) in the world): objects sharing a region are set
apart by their own widths and stay inside it (across the reach direction, at the near edge,
when the region is at the edge of reach), the second is carried past the first, set-aside
spots stay within comfortable reach, what leaves a table region no clear spot is moved out
of it first, and the code that turns a held object a quarter about the vertical does so."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot
from captain_harness.core.episode.table_regions import TableRegion
from captain_harness.core.geometry import quat_to_matrix
from captain_teacher.boxes import Box, rot_z
from captain_teacher.clearance import COMFORTABLE_REACH_M, MAX_SET_ASIDE_REACH_M, free_spot
from captain_teacher.objects import grasp_for
from captain_teacher.planners.destinations import (
    AIM_EDGE_MARGIN_M,
    FAR_AIM_EDGE_MARGIN_M,
    SHARE_ACROSS_REACH_FROM_M,
    SHARE_GAP_M,
    destination_for,
    share_spread_m,
)
from captain_teacher.planners.grasping import _lift_expression
from captain_teacher.planners.placing import (
    NUDGE_CLEARANCE_M,
    NUDGE_MAX_M,
    _long_side_along_share,
    footprint_gap,
    nudge_spot,
    quarter_turn_fallback,
    spot_blockers,
)
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


def _two_pots_on_the_stove(stove_xy: tuple[float, float] = (-0.202, -0.194),
                           pot_2_xy: tuple[float, float] = (0.026, 0.036)) -> SceneView:
    goals = tuple(GoalPredicate("on", (pot, "flat_stove_1_cook_region"), False) for pot in ("moka_pot_1", "moka_pot_2"))
    return _scene({"moka_pot_1": ((-0.072, 0.263, 0.966), YAW_180),
                   "moka_pot_2": ((*pot_2_xy, 0.966), YAW_180),
                   "flat_stove_1": ((*stove_xy, 0.905), UPRIGHT)}, goals)


def _swapped_stove() -> SceneView:
    """LIBERO-PRO's libero_10_swap/8: the stove where the left pot stood, its cook region's
    centre 0.86 m from the base, and that pot where the stove stood."""
    return _two_pots_on_the_stove(stove_xy=(0.044, 0.065), pot_2_xy=(-0.205, -0.201))


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


def test_two_pots_on_a_cook_region_at_the_edge_of_reach_are_set_side_by_side_across_the_reach() -> None:
    scene = _swapped_stove()
    places = [t for t in decompose_scene(scene) if t.kind == "place"]
    dest = places[0].dest
    center = dest.region_center_m(scene)
    assert float(np.hypot(*center[:2])) >= SHARE_ACROSS_REACH_FROM_M
    axis = dest.share_axis(scene)
    assert abs(float(axis[:2] @ center[:2])) / float(np.hypot(*center[:2])) < 0.2  # across the reach direction
    aims = [t.dest.aim_m(scene) for t in places]
    # along the stove's longer side the farther pot would stand 0.9 m out; here both are at
    # the region's near edge, the far-region margin inside it
    assert max(float(np.hypot(*a[:2])) for a in aims) < 0.815
    limit = np.asarray(dest.half_xy_m()) - FAR_AIM_EDGE_MARGIN_M + 1e-9
    for aim in aims:
        assert np.all(np.abs(aim[:2] - center[:2]) <= limit)
        assert aim[0] - center[0] <= -(dest.half_xy_m()[0] - FAR_AIM_EDGE_MARGIN_M) + 1e-9  # at the near edge
    # along the row a pot's handle and spout would reach into its neighbour's: each is turned
    # a quarter on the way, and across its long side the outlines do not touch
    ctx = SimpleNamespace(scene=scene)
    assert all(_long_side_along_share(ctx, t.args[0], t.dest) for t in places)
    width = max(float(np.abs(rot_z(scene.box(n).yaw_rad + math.pi / 2)[:2, :2].T @ axis[:2]) @ scene.box(n).half_m[:2])
                for n in ("moka_pot_1", "moka_pot_2"))
    assert abs(float((aims[1] - aims[0])[:2] @ axis[:2])) > 2 * width
    # each pot goes to the side it starts from, so their paths do not cross
    starts = [scene.position(t.args[0])[:2] @ axis[:2] for t in places]
    assert (starts[0] - starts[1]) * float((aims[0] - aims[1])[:2] @ axis[:2]) > 0
    # the official stove is nearer: its pots stay along its longer side with the usual margin
    official = _two_pots_on_the_stove()
    near = [t for t in decompose_scene(official) if t.kind == "place"]
    assert np.allclose(near[0].dest.share_axis(official)[:2], [1.0, 0.0])
    assert [t.dest.share for t in near] == [(0, 2), (1, 2)]
    assert near[0].dest._edge_margin(official) == AIM_EDGE_MARGIN_M
    assert not any(_long_side_along_share(SimpleNamespace(scene=official), t.args[0], t.dest) for t in near)


def test_the_second_pot_is_carried_past_the_first_not_over_it() -> None:
    ctx = SimpleNamespace(scene=_swapped_stove(), style=SimpleNamespace(lift_extra_m=0.0))
    places = {t.args[0]: t for t in decompose_scene(ctx.scene) if t.kind == "place"}
    spec = grasp_for("moka_pot_2")
    # set down beside the other pot (its aim SHARE_GAP_M clear of the other's), it is not lifted over it
    first_aim = places["moka_pot_1"].dest.aim_m(ctx.scene)
    done = _scene({"moka_pot_1": ((first_aim[0] - 0.66, first_aim[1], 0.966), YAW_180),
                   "moka_pot_2": ((-0.205, -0.201, 0.966), YAW_180),
                   "flat_stove_1": ((0.044, 0.065, 0.905), UPRIGHT)}, ctx.scene.snapshot.goals)
    ctx.scene = done
    assert "pass over" not in _lift_expression(ctx, "moka_pot_2", places["moka_pot_2"].dest, spec)
    # but a pot standing on the way is passed over
    mid = 0.5 * (done.position("moka_pot_2") + places["moka_pot_2"].dest.aim_m(done))
    ctx.scene = _scene({"moka_pot_1": ((mid[0] - 0.66, mid[1], 0.966), YAW_180),
                        "moka_pot_2": ((-0.205, -0.201, 0.966), YAW_180),
                        "flat_stove_1": ((0.044, 0.065, 0.905), UPRIGHT)}, done.snapshot.goals)
    assert "pass over" in _lift_expression(ctx, "moka_pot_2", places["moka_pot_2"].dest, spec)


#: LIBERO-PRO's swapped libero_goal/5, state 13 (world frame): the cream cheese box stands
#: at the edge of the stove's front region, and the table is too crowded for a free spot.
CROWDED = {"akita_black_bowl_1": ((-0.089, -0.007, 0.898), (0.705, 0.0, 0.0, 0.709)),
           "cream_cheese_1": ((-0.069, 0.136, 0.909), YAW_180),
           "plate_1": ((-0.212, -0.068, 0.91), (0.708, -0.056, 0.073, 0.7)),
           "wine_bottle_1": ((0.037, -0.015, 0.899), YAW_180),
           "flat_stove_1": ((-0.404, 0.202, 0.905), UPRIGHT),
           "wine_rack_1": ((-0.267, -0.251, 0.92), YAW_180),
           "wooden_cabinet_1": ((0.04, -0.234, 0.905), YAW_180)}
FRONT = TableRegion((0.61, 0.21), (0.04, 0.04), 0.0)  # main_table_stove_front_region in TASK.md, base frame


def test_what_leaves_no_clear_spot_in_a_table_region_is_moved_out_of_it_first() -> None:
    goals = (GoalPredicate("on", ("plate_1", "main_table_stove_front_region"), False),)
    ctx = SimpleNamespace(scene=_scene(CROWDED, goals), table_regions={"main_table_stove_front_region": FRONT})
    plan = decompose_scene_ctx(ctx)
    assert [(t.kind, t.args) for t in plan] == [
        ("clear_region", ("cream_cheese_1", "main_table_stove_front_region", "plate_1")), ("place", ("plate_1",))]
    # 13 cm from every other object and the region's centre, no spot of the table is free
    centre = np.array([*FRONT.center_xy_m, 0.0])
    assert free_spot(ctx.scene, "cream_cheese_1", [centre], np.random.default_rng(0)) is None
    spot = nudge_spot(ctx, "cream_cheese_1", "plate_1", FRONT)
    assert spot is not None
    box = ctx.scene.box("cream_cheese_1")
    assert float(np.linalg.norm(spot[:2] - box.center_m[:2])) <= NUDGE_MAX_M
    there = Box(spot, box.half_m, box.yaw_rad)
    others = [n for n in ctx.scene.names() if n not in ("cream_cheese_1", "plate_1")]
    assert min(footprint_gap(there, ctx.scene.box(n)) for n in others) >= NUDGE_CLEARANCE_M
    # moved there, it leaves the plate a spot of the region clear of everything
    poses = dict(CROWDED)
    poses["cream_cheese_1"] = ((spot[0] - 0.66, spot[1], 0.909), YAW_180)
    ctx.scene = _scene(poses, goals)
    assert spot_blockers(ctx, "plate_1", FRONT) == []
    assert [t.kind for t in decompose_scene_ctx(ctx)] == ["place"]


def test_footprint_gap_is_the_distance_between_box_edges() -> None:
    a = Box(np.array([0.0, 0.0, 0.0]), np.array([0.05, 0.02, 0.01]), 0.0)
    assert footprint_gap(a, Box(np.array([0.13, 0.0, 0.0]), np.array([0.05, 0.02, 0.01]), 0.0)) == pytest.approx(0.03)
    assert footprint_gap(a, Box(np.array([0.0, 0.07, 0.0]), np.array([0.05, 0.02, 0.01]), math.pi / 2)) == \
        pytest.approx(0.0)  # turned across, its end reaches into the first
    assert footprint_gap(a, Box(np.array([0.0, 0.1, 0.0]), np.array([0.05, 0.02, 0.01]), math.pi / 2)) == \
        pytest.approx(0.03)


def decompose_scene_ctx(ctx: SimpleNamespace) -> list:
    return decompose(ctx)  # type: ignore[arg-type]


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
