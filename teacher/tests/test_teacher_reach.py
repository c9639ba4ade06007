"""Reach-aware regrasping: after a rim grasp the arm could not reach (the cell prints
``descent: joint_limit`` or ``descent: ik_failed`` when the preview refused the approach or
the descent), the next attempt turns the jaws well away from the failed ones. The opposite
side of a rim has the same jaws, so the retry order by room alone could try the same wrist
turn again (libero_goal/3 state 13: jaws along x at both the far and the near side). After
a centred grasp the arm could not reach, the retry tips the hand outward (the episode that
shows it reaching a can top-down cannot is in ``tests/e2e/test_teacher_episodes.py``)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from captain_backends.core.snapshot import ObjectPose, SimSnapshot
from captain_harness.core.geometry import quat_to_matrix
from captain_teacher.clearance import hand_blockers
from captain_teacher.objects import grasp_for
from captain_teacher.planners.grasping import (
    FOLDED_HOVER_OUT_M,
    FOLDED_LAST_DOWN_M,
    REACH_TILT_RAD,
    UNREACHABLE_JAW_TURN_RAD,
    Grasp,
    _folded_hover_offset,
    choose_grasp,
    span_across_reach,
    tipped_grasp_fits,
    tipped_quat,
    wrap_jaw,
)
from captain_teacher.planners.pick_place import UNREACHABLE_DESCENT
from captain_teacher.scene import SceneView

T_WORLD_BASE = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
BOWL = "akita_black_bowl_1"


#: A can near the far edge of the arm's reach (base x 0.84 m, y -0.24 m).
CAN = "alphabet_soup_1"


def _ctx(unreachable: list[float] | None = None) -> SimpleNamespace:
    poses = {BOWL: ObjectPose((-0.06, 0.24, 0.8984), (1.0, 0.0, 0.0, 0.0)),
             "plate_1": ObjectPose((-0.16, 0.05, 0.9025), (1.0, 0.0, 0.0, 0.0)),
             CAN: ObjectPose((0.18, -0.24, 0.912), (1.0, 0.0, 0.0, 0.0))}
    snap = SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, poses, dict(poses), (), "", "", None)
    return SimpleNamespace(scene=SceneView(snap, T_WORLD_BASE), rng=np.random.default_rng(0),
                           unreachable_jaws={BOWL: unreachable} if unreachable else {}, out_of_reach=set())


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


def test_a_retry_after_an_unreachable_centred_grasp_tips_the_hand_outward() -> None:
    spec = grasp_for(CAN)  # a centred grasp
    assert spec.style != "rim"
    ctx = _ctx()
    assert choose_grasp(ctx, CAN, spec, 1).tilt_rad == 0.0
    # only a far object is marked out of reach after a failed centred grasp (nearer, the
    # failure is a wrist turn)
    assert tipped_grasp_fits(ctx, CAN) and not tipped_grasp_fits(ctx, "plate_1") and not tipped_grasp_fits(ctx, BOWL)
    ctx.out_of_reach.add(CAN)
    assert choose_grasp(ctx, CAN, spec, 0).tilt_rad == 0.0  # only a retry tips
    g = choose_grasp(ctx, CAN, spec, 1)
    centre = ctx.scene.box(CAN).center_m
    heading = math.atan2(centre[1], centre[0])
    assert g.tilt_rad == REACH_TILT_RAD and g.jaw_yaw == heading and "out of the arm's reach" in g.note


def test_a_tipped_hand_keeps_its_fingers_level_and_leans_outward() -> None:
    for heading in (0.0, 0.6, -1.2):
        for tilt in (0.3, REACH_TILT_RAD):
            R = quat_to_matrix(tipped_quat(heading, tilt))
            outward = np.array([math.cos(heading), math.sin(heading), 0.0])
            closing, approach = R[:, 0], R[:, 2]  # the jaws close along the tool's x axis
            assert abs(closing[2]) < 1e-9 and abs(float(closing @ outward)) < 1e-9  # level, across the reach
            assert math.isclose(math.acos(-approach[2]), tilt, abs_tol=1e-9)  # tipped from straight down
            assert float(approach @ outward) > 0.0  # fingertips outward, the wrist nearer the robot


def _yawed(yaw: float) -> tuple[float, float, float, float]:
    return (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


def test_a_far_box_is_tipped_only_when_it_fits_the_jaws_across_the_reach_direction() -> None:
    # the butter (8.2 x 4.4 cm) where LIBERO-PRO's libero_object_temp_x0.5 puts it, 0.86 m
    # from the base: its long side along the reach direction leaves 6.5 cm for the jaws,
    # which close across that direction; turned a quarter, 8.2 cm, more than they open
    at = (0.18, -0.24, 0.912)
    heading = math.atan2(-0.24, 0.18 + 0.66)
    for yaw, fits in ((0.0, True), (math.pi, True), (heading + math.pi / 2, False)):
        poses = {"butter_1": ObjectPose(at, _yawed(yaw))}
        snap = SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, poses, dict(poses), (), "", "", None)
        ctx = SimpleNamespace(scene=SceneView(snap, T_WORLD_BASE))
        span = span_across_reach(ctx, "butter_1")
        assert (span < 0.07) is fits, span
        assert tipped_grasp_fits(ctx, "butter_1") is fits


def test_a_retried_grasp_near_the_base_hovers_farther_out_clear_of_its_neighbours() -> None:
    pudding, mug = "chocolate_pudding_1", "porcelain_mug_1"
    base_xy = np.array([0.31, 0.02])

    def ctx(with_mug: bool) -> SimpleNamespace:
        poses = {pudding: ObjectPose((base_xy[0] - 0.66, base_xy[1], 0.93), (1.0, 0.0, 0.0, 0.0))}
        if with_mug:  # standing in the way of a hand hovering straight out from the pudding
            poses[mug] = ObjectPose((base_xy[0] + 0.12 - 0.66, base_xy[1], 0.918), (1.0, 0.0, 0.0, 0.0))
        snap = SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, poses, dict(poses), (), "", "", None)
        return SimpleNamespace(scene=SceneView(snap, T_WORLD_BASE))

    grasp = Grasp(None, "0.0", 0.0, 0.012, 0.0)
    outward = base_xy / float(np.linalg.norm(base_xy))
    alone = _folded_hover_offset(ctx(False), pudding, grasp, base_xy)
    assert np.allclose(alone, outward * FOLDED_HOVER_OUT_M)
    crowded = ctx(True)
    turned = _folded_hover_offset(crowded, pudding, grasp, base_xy)
    assert float(np.linalg.norm(turned)) == pytest.approx(FOLDED_HOVER_OUT_M)
    assert float(turned @ outward) < 0.9 * FOLDED_HOVER_OUT_M  # turned off the reach direction
    box = crowded.scene.box(pudding)
    tcp = np.array([*(box.center_m[:2] + turned), box.top_z_m + FOLDED_LAST_DOWN_M])
    assert hand_blockers(crowded.scene, tcp, 0.0, [pudding]) == []
    assert hand_blockers(crowded.scene, np.array([*(box.center_m[:2] + alone), tcp[2]]), 0.0, [pudding]) == [mug]
