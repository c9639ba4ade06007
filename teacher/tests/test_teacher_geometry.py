"""The teacher's geometry against the rest of the stack: its camera projection inverts
perception's back-projection, its helper library's quaternions match the published ones
and the harness's rotation conventions, horizontal and drawer-pushing hand poses point
where they should,
and ray tests see into open containers from above but not through walls."""

from __future__ import annotations

import math

import numpy as np
import pytest

from captain_harness.core.geometry import quat_to_matrix
from captain_perception.core.backproject import backproject, normalised_to_pixel
from captain_teacher.boxes import Box, open_box
from captain_teacher.library import HELPER_NAMES, HELPERS_SOURCE
from captain_teacher.planners.articulated import PUSH_TILT_RAD, TOP_DOWN, pushing_quat, side_quat
from captain_teacher.planners.lay import lay_quaternion
from captain_teacher.scene import CameraModel


def _look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """T_base_camera of an OpenCV camera at ``eye`` looking at ``target`` (y down)."""
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([x, y, z])
    T[:3, 3] = eye
    return T


def test_projection_inverts_perception_backprojection() -> None:
    rng = np.random.default_rng(3)
    K = np.array([[618.0, 0.0, 255.5], [0.0, 618.0, 255.5], [0.0, 0.0, 1.0]])
    cam = CameraModel("agentview", K, _look_at(np.array([1.3, 0.1, 0.7]), np.array([0.5, 0.0, 0.0])))
    points = rng.uniform([0.3, -0.3, -0.02], [0.8, 0.3, 0.2], size=(50, 3))
    uv, depth = cam.project(points)
    assert np.all((uv > 0.0) & (uv < 1.0)) and np.all(depth > 0.0)
    for p, (u, v), d in zip(points, uv, depth, strict=True):
        x, y = normalised_to_pixel(u, v, 512, 512)
        pc = backproject(x, y, d, K)
        pb = cam.T_base_camera[:3, :3] @ pc + cam.T_base_camera[:3, 3]
        assert np.allclose(pb, p, atol=1e-9)


def test_points_behind_the_camera_have_no_pixel() -> None:
    cam = CameraModel("agentview", np.eye(3) * 500, _look_at(np.zeros(3), np.array([1.0, 0.0, 0.0])))
    uv, _ = cam.project(np.array([[-1.0, 0.0, 0.0]]))
    assert np.all(np.isnan(uv))


def _helpers() -> dict:
    ns: dict = {"math": math, "np": np}
    exec(HELPERS_SOURCE, ns)
    return ns


def test_helper_library_defines_the_four_helpers_and_the_published_quaternions() -> None:
    ns = _helpers()
    assert all(callable(ns[name]) for name in HELPER_NAMES)
    assert np.allclose(ns["downq"](0.0), [0.0, 2**-0.5, 2**-0.5, 0.0])
    assert np.allclose(ns["downq"](-math.pi / 4), [0.0, math.cos(math.pi / 8), math.sin(math.pi / 8), 0.0])


@pytest.mark.parametrize("jaw_yaw", [-1.2, -0.5, 0.0, 0.3, 1.0, math.pi / 2])
def test_downq_points_down_with_the_jaw_axis_turned_counter_clockwise(jaw_yaw: float) -> None:
    R = quat_to_matrix(np.asarray(_helpers()["downq"](jaw_yaw)))
    assert np.allclose(R[:, 2], [0.0, 0.0, -1.0], atol=1e-12)  # fingers straight down
    axis = math.pi / 2 + jaw_yaw
    assert np.allclose(R[:, 0], [math.cos(axis), math.sin(axis), 0.0], atol=1e-12)  # the jaw-closing axis


def test_val_and_need_read_results_and_stop_on_failures() -> None:
    ns = _helpers()
    good = {"success": True, "value": {"object": {"top_z_m": 0.04}}}
    bad = {"success": False, "failure_category": "ik_failed", "message": "no joint solution", "value": None}
    assert ns["val"](good, "object", "top_z_m") == 0.04 and ns["val"](bad, "object") is None
    assert ns["need"](good) == good["value"]
    with pytest.raises(RuntimeError, match="ik_failed: no joint solution"):
        ns["need"](bad, "grasp")


@pytest.mark.parametrize("pointing", [(0.0, 1.0), (0.0, -1.0), (1.0, 0.0), (0.6, -0.8)])
@pytest.mark.parametrize("vertical", [True, False])
def test_side_quat_points_the_fingers_horizontally(pointing: tuple[float, float], vertical: bool) -> None:
    q = side_quat(np.array(pointing), jaw_vertical=vertical)
    R = quat_to_matrix(q)
    assert np.isclose(np.linalg.det(R), 1.0)
    assert np.allclose(R[:, 2], [pointing[0], pointing[1], 0.0], atol=1e-9)
    jaw = R[:, 0]
    assert (abs(jaw[2]) > 0.999) if vertical else abs(jaw[2]) < 1e-9
    # of the two equivalent jaw directions, the one that turns the wrist least from top-down
    flipped = quat_to_matrix(side_quat(np.array(pointing), jaw_vertical=vertical, reference=-TOP_DOWN))
    assert np.allclose(flipped, R)


def test_rays_see_into_an_open_container_from_above_but_not_through_its_wall() -> None:
    basket = Box(np.array([0.6, 0.0, 0.07]), np.array([0.08, 0.08, 0.07]), 0.3)
    inside = np.array([0.6, 0.0, 0.05])
    walls = open_box(basket)
    above = np.array([0.6, 0.0, 0.6])
    side = np.array([1.2, 0.0, 0.06])
    assert basket.ray_hit(above, inside)  # a solid box hides what is inside it
    assert not any(w.ray_hit(above, inside) for w in walls)
    assert any(w.ray_hit(side, inside) for w in walls)
    assert basket.contains(inside) and not basket.contains(above)


@pytest.mark.parametrize("pull", [(0.0, -1.0), (-1.0, 0.0), (0.6, -0.8), (-0.8, -0.6)])
def test_pushing_hand_keeps_the_jaws_along_the_bar_and_tips_the_fingers_into_the_cabinet(
        pull: tuple[float, float]) -> None:
    p = np.array([*pull, 0.0])
    R = quat_to_matrix(pushing_quat(np.array(pull)))
    assert np.isclose(np.linalg.det(R), 1.0)
    jaw, fingers = R[:, 0], R[:, 2]
    assert abs(jaw[2]) < 1e-9 and abs(float(np.dot(jaw, p))) < 1e-9  # horizontal, along the handle bar
    assert np.isclose(fingers[2], -math.cos(PUSH_TILT_RAD))  # mostly down ...
    assert np.isclose(float(np.dot(fingers, -p)), math.sin(PUSH_TILT_RAD))  # ... and into the cabinet
    # the palm (above the fingertips, along -fingers) leans back toward the robot
    assert float(np.dot(-fingers, p)) > 0.5


@pytest.mark.parametrize("heading", [0.0, 0.7, -2.0, math.pi])
@pytest.mark.parametrize("tilt", [0.0, math.radians(35.0), math.pi / 2])
def test_laying_hand_points_along_the_groove_below_level_with_level_jaws(heading: float, tilt: float) -> None:
    R = quat_to_matrix(lay_quaternion(np.array([math.cos(heading), math.sin(heading)]), tilt))
    assert np.isclose(np.linalg.det(R), 1.0)
    jaw, fingers = R[:, 0], R[:, 2]
    expected = np.array([math.cos(heading) * math.cos(tilt), math.sin(heading) * math.cos(tilt), -math.sin(tilt)])
    assert np.allclose(fingers, expected, atol=1e-9)  # the held bottle (along the fingers) lies along the groove
    assert abs(jaw[2]) < 1e-9  # the jaws close horizontally, across it
    if tilt == math.pi / 2 and heading == 0.0:  # pointing straight down along +x is the top-down grasp
        assert np.allclose(R, quat_to_matrix(TOP_DOWN), atol=1e-9)


def test_the_stove_hides_only_behind_its_plate_and_its_knob_stand() -> None:
    """An object on the stove's plate is seen from above and from the head camera (the one
    box of the stove reached above the plate to the knob's height, so an object on the
    plate was hidden from every camera); behind the knob's stand a point stays hidden."""
    from captain_backends.core.snapshot import ObjectPose, SimSnapshot
    from captain_teacher.scene import SceneView

    T_world_base = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
    stove_origin_world = (-0.404, 0.202, 0.905)  # LIBERO's stove: the knob's stand at its origin
    on_plate_world = (-0.404 + 0.16, 0.202, 0.925)  # a plate resting on the stove's plate
    objects = {"flat_stove_1": ObjectPose(stove_origin_world, (1.0, 0.0, 0.0, 0.0)),
               "plate_1": ObjectPose(on_plate_world, (1.0, 0.0, 0.0, 0.0))}
    scene = SceneView(SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, objects, dict(objects), (), "", "", None),
                      T_world_base)
    K = np.array([[618.0, 0.0, 255.5], [0.0, 618.0, 255.5], [0.0, 0.0, 1.0]])
    plate = scene.box("plate_1").center_m
    head = CameraModel("agentview", K, _look_at(np.array([1.319, 0.0, 0.698]), plate))
    above = CameraModel("robot0_eye_in_hand", K, _look_at(plate + np.array([-0.001, 0.0, 0.33]), plate))
    for cam in (head, above):
        assert scene.visible_points("plate_1", cam), cam.name
    stand = scene.part_boxes("flat_stove_1")[1]
    behind = stand.center_m + np.array([-0.08, 0.0, -0.02])  # on the table behind the stand
    assert any(b.ray_hit(head.position_m, behind) for b in scene.occluders([]))


def _pots_on_the_stove():
    """The scene of libero_10/8 state 11 after the teacher set both moka pots on the stove
    (world poses from that episode)."""
    from captain_backends.core.snapshot import ObjectPose, SimSnapshot
    from captain_teacher.scene import SceneView

    T_world_base = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
    objects = {"flat_stove_1": ObjectPose((-0.2023, -0.1942, 0.905), (1.0, 0.0, 0.0, 0.0)),
               "moka_pot_1": ObjectPose((-0.1064, -0.1717, 0.9966), (1.0, 0.0, 0.0, 0.0)),
               "moka_pot_2": ObjectPose((0.0014, -0.1708, 0.9966), (0.0, 0.0, 0.0, 1.0))}
    return SceneView(SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, objects, dict(objects), (), "", "", None),
                     T_world_base)


def test_the_stove_plate_between_two_moka_pots_is_seen_from_beside_them() -> None:
    """A moka pot hides behind its body, spout and handle, not behind one box spanning all
    three: from the wrist camera beside the pots the stove's plate shows between and beside
    them (with the single box every plate point far from the pots was hidden, so the teacher
    found no camera that saw both pots and the stove and measured the second pot in the
    head image, where it is one region with the stove); under a pot's body it stays hidden."""
    from types import SimpleNamespace

    from captain_teacher.planners.verify import _away_points

    scene = _pots_on_the_stove()
    K = np.array([[618.0, 0.0, 255.5], [0.0, 618.0, 255.5], [0.0, 0.0, 1.0]])
    eye = np.array([0.544, -0.05, 0.42])  # the wrist camera, tool at the first view beside the pots
    wrist = CameraModel("robot0_eye_in_hand", K, _look_at(eye, eye + np.array([0.001, 0.0, -1.0])))
    head = CameraModel("agentview", K, _look_at(np.array([1.319, 0.0, 0.698]), scene.box("flat_stove_1").center_m))
    ctx = SimpleNamespace(scene=scene, cameras={"agentview": head})
    for name in ("moka_pot_1", "moka_pot_2"):
        assert scene.visible_points(name, wrist), name
        away = _away_points(ctx, "flat_stove_1", name)  # the stove's plate clear of this pot
        assert away is not None and scene.click("flat_stove_1", wrist, away) is not None, name
    under = scene.position("moka_pot_1").copy()
    under[2] = scene.box("moka_pot_1").bottom_z_m
    assert not scene.visible_points("flat_stove_1", wrist, under[None])


def test_tall_objects_on_a_region_are_looked_at_from_beside_them() -> None:
    """The final look at moka pots on the stove: from 12 cm beside the pot nearest the
    robot's middle (from 5 cm its lid hides its foot, and resting cannot be measured), then
    the usual views above the stove; a short object on a region gets the usual views."""
    from types import SimpleNamespace

    from captain_teacher.planners.destinations import Destination
    from captain_teacher.planners.verify import BESIDE_VIEWS_M, Relation, _beside_views

    ctx = SimpleNamespace(scene=_pots_on_the_stove())
    stove = Destination("flat_stove_1_cook_region", "flat_stove_1", "on", container=False, region=True)
    views = _beside_views(ctx, [Relation("moka_pot_1", stove), Relation("moka_pot_2", stove)])
    assert views is not None and len(views) == len(BESIDE_VIEWS_M) + 3
    nearest_y = max(ctx.scene.box(n).center_m[1] for n in ("moka_pot_1", "moka_pot_2"))  # the stove is at -y
    assert views[0][1] == pytest.approx(nearest_y + BESIDE_VIEWS_M[0][0])
    assert views[0][2] == pytest.approx(ctx.scene.box("flat_stove_1").top_z_m + BESIDE_VIEWS_M[0][1])
    basket = Destination("basket_1_contain_region", "basket_1", "in", container=True, region=True)
    assert _beside_views(ctx, [Relation("moka_pot_1", basket)]) is None
