"""Objects lying on their side (a milk carton that fell over, as in ``libero_10`` task 1,
whose cartons start in the air and land where they fall): their box follows the object's
whole rotation, so the hand's clearance checks and the grasp see the carton as it lies,
long and low, and the jaws close across its narrow side."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from captain_backends.core.snapshot import ObjectPose, SimSnapshot
from captain_teacher.objects import grasp_for
from captain_teacher.planners.grasping import choose_grasp
from captain_teacher.scene import SceneView

T_WORLD_BASE = np.array([[1.0, 0, 0, -0.66], [0, 1.0, 0, 0.0], [0, 0, 1.0, 0.912], [0, 0, 0, 1.0]])
#: the carton's own z axis turned from up to -y (a quarter turn about x): lying along y
LYING = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)
UPRIGHT = (1.0, 0.0, 0.0, 0.0)
#: world position of the milk's body origin, its centre 2.7 cm above the table when lying
MILK_AT = (-0.11, -0.015, 0.912 + 0.027)


def _scene(quaternion: tuple[float, float, float, float]) -> SceneView:
    poses = {"milk_1": ObjectPose(MILK_AT, quaternion),
             "butter_1": ObjectPose((-0.09, 0.062, 0.912 + 0.012), (0.0, 0.0, 0.0, 1.0))}
    snap = SimSnapshot(0.0, (-0.2, 0.0, 1.17), 1.0, poses, dict(poses), (), "", "", None)
    return SceneView(snap, T_WORLD_BASE)


def test_a_lying_carton_gets_a_long_low_box_along_its_axis() -> None:
    box = _scene(LYING).box("milk_1")
    assert box.half_m == pytest.approx([0.066, 0.027, 0.027], abs=1e-6)
    assert abs(math.cos(box.yaw_rad)) == pytest.approx(0.0, abs=1e-6)  # its long side along base y
    # the shape's offset (4 mm down its own axis) turns with it: along +y, not down
    assert box.center_m == pytest.approx([0.55, -0.011, 0.027], abs=1e-6)
    assert box.top_z_m == pytest.approx(0.054, abs=1e-6)
    upright = _scene(UPRIGHT).box("milk_1")
    assert upright.half_m == pytest.approx([0.027, 0.027, 0.066])
    assert upright.yaw_rad == 0.0


def test_the_jaws_close_across_a_lying_carton() -> None:
    ctx = SimpleNamespace(scene=_scene(LYING), rng=np.random.default_rng(0))
    grasp = choose_grasp(ctx, "milk_1", grasp_for("milk_1"), 0)
    # the jaw axis (turned by the jaw yaw from base y) along x: across the carton lying along y
    assert abs(math.sin(grasp.jaw_yaw)) == pytest.approx(1.0, abs=0.05)
    assert grasp.jaw_code == 'o["yaw_rad"]'  # the session reads it from the measured long side
    tcp = np.array([0.55, -0.011, 0.054 - grasp.depth_m])
    assert tcp[2] > 0.027  # fingertips above the table, inside the carton's height

