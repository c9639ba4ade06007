"""A carton that fell over (``libero_10`` task 1's cartons start in the air and land where
they fall): its box follows the turn it made since the episode started, so the hand's
clearance checks and the grasp see it as it lies, long and low, and the jaws close across
its narrow side. The turn is taken from the start pose, not from the model's own z axis:
LIBERO's models of cans and cartons stand upright with their z axis horizontal."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from captain_backends.core.snapshot import ObjectPose, SimSnapshot
from captain_harness.core.geometry import matrix_to_quat, quat_to_matrix
from captain_teacher.objects import grasp_for
from captain_teacher.planners.grasping import choose_grasp
from captain_teacher.scene import SceneView

T_WORLD_BASE = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
#: a LIBERO-like model frame: upright, with its own z axis along the world's y
MODEL = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)
#: a quarter turn about the world's x axis: an upright carton falls onto its side, along y
FALL = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
#: the milk's origin now (lying, centre 2.7 cm above the table) and at the start (upright)
LYING_AT = (-0.11, -0.015, 0.912 + 0.027)
START_AT = (-0.11, -0.015, 0.912 + 0.066)


def _scene(fell: bool) -> SceneView:
    now = tuple(matrix_to_quat(FALL @ quat_to_matrix(MODEL))) if fell else MODEL
    poses = {"milk_1": ObjectPose(LYING_AT if fell else START_AT, now)}
    start = {"milk_1": ObjectPose(START_AT, MODEL)}
    snap = SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, poses, start, (), "", "", None)
    return SceneView(snap, T_WORLD_BASE)


def test_a_carton_that_fell_over_gets_a_long_low_box_along_its_axis() -> None:
    box = _scene(fell=True).box("milk_1")
    assert box.half_m == pytest.approx([0.066, 0.027, 0.027], abs=1e-6)
    assert abs(math.cos(box.yaw_rad)) == pytest.approx(0.0, abs=1e-6)  # its long side along base y
    # the shape's offset (4 mm down its upright axis) turns with it: along y, not down
    assert box.center_m == pytest.approx([0.55, -0.011, 0.027], abs=1e-6)
    assert box.top_z_m == pytest.approx(0.054, abs=1e-6)


def test_an_upright_carton_keeps_its_upright_box_whatever_its_model_axes() -> None:
    box = _scene(fell=False).box("milk_1")
    assert box.half_m == pytest.approx([0.027, 0.027, 0.066])
    assert box.yaw_rad == 0.0


def test_the_jaws_close_across_a_carton_that_fell_over() -> None:
    ctx = SimpleNamespace(scene=_scene(fell=True), rng=np.random.default_rng(0))
    grasp = choose_grasp(ctx, "milk_1", grasp_for("milk_1"), 0)
    # the jaw axis (turned by the jaw yaw from base y) along x: across the carton lying along y
    assert abs(math.sin(grasp.jaw_yaw)) == pytest.approx(1.0, abs=0.05)
    assert grasp.jaw_code == 'o["yaw_rad"]'  # the session reads it from the measured long side
