"""A mug on a plate is measured from a wrist view back toward the robot, not from straight
above: from above, the camera 22 cm over the plate, a 10 cm mug hides all of the plate but
a sliver, and the clicks land on the mug's inside and on the sliver. From behind (or, with
the jaws turned, from beyond the plate) the teacher's clicks (the plate's rim where the mug
does not hide it, the mug's wall facing the camera) give perception's measurement of the
two close to the simulator's. Real LIBERO physics and rendering, the project's IK and
perception; the verifying cell's own targets."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from captain_teacher.scene import WRIST_CAMERA

pytestmark = pytest.mark.sim

MUG, PLATE = "white_yellow_mug_1", "plate_2"


def test_a_mug_on_a_plate_is_measured_from_behind_not_from_above(tmp_path) -> None:
    from captain_backends.core.libero.driver import LiberoDriver
    from captain_harness.core.api import RobotAPI
    from captain_harness.core.geometry import quat_to_matrix
    from captain_harness.core.kinematics import Kinematics
    from captain_perception import arrange
    from captain_perception.core.primitives import Perception
    from captain_perception.groundtruth import SimTruth
    from captain_perception.robot_mask_score import set_pose
    from captain_teacher.planners.common import pixels, target
    from captain_teacher.planners.grasping import quat_for_jaw
    from captain_teacher.planners.measuring import (
        BEHIND_VIEWS_M,
        above_views,
        behind_group,
        behind_views,
        beyond_views,
    )
    from captain_teacher.scene import CameraModel, SceneView

    driver = LiberoDriver(task="libero_10/4", init_state=12)
    driver.configure()
    truth = SimTruth.from_libero(driver, include_fixtures=True)
    try:
        driver.reset(init_state=12)
        arrange.put_on(driver, MUG, PLATE)
        arrange.settle(driver, 1.0)
        kin = Kinematics(driver.description())
        q0 = np.asarray(driver.read_state().joint_positions_rad, float)
        perception = Perception(driver, str(tmp_path))
        api = RobotAPI()
        api.register_object(perception)

        def hand_at(view: np.ndarray, jaw: float = 0.0) -> SimpleNamespace:
            """The hand at a top-down view: the teacher's scene and wrist camera from there."""
            q = quat_for_jaw(jaw)
            T = np.eye(4)
            T[:3, :3] = quat_to_matrix(q)
            T[:3, 3] = view
            ik = kin.solve_ik(T, q0, restarts=8)
            assert ik.success, ik.reason
            set_pose(driver, ik.q, 0.04)
            frame = driver.capture((WRIST_CAMERA,))[WRIST_CAMERA]
            scene = SceneView(driver.snapshot(), driver.description().T_world_base)
            return SimpleNamespace(scene=scene, tcp_quaternion=np.asarray(q, float),
                                   T_tcp_wrist=np.linalg.inv(kin.fk(ik.q)) @ frame.T_base_camera,
                                   cameras={WRIST_CAMERA: CameraModel(WRIST_CAMERA, frame.K, frame.T_base_camera)})

        def measured(ctx: SimpleNamespace) -> dict:
            """The verifying cell's clicks from this view, and perception's measurement."""
            group = [target("plate_f", PLATE, ignore=(MUG,)), target("mug_f", MUG)]
            found = pixels(ctx, behind_group(ctx, *group), WRIST_CAMERA)
            assert found is not None and found[0] == WRIST_CAMERA
            handle = api.call("observe").result["value"]["observation_handle"]
            ids = {}
            for var, name in (("plate_f", PLATE), ("mug_f", MUG)):
                u, v = found[1][var]
                r = api.call("mark_point", (handle, WRIST_CAMERA, u, v),
                             {"label": name, "granularity": "object"}).result
                assert r["value"] is not None, r["message"]
                ids[name] = r["value"]["detection_id"]
            m = api.call("measure_object_geometry", (ids[MUG], ids[PLATE]), {}).result
            assert m["value"] is not None, m["message"]
            return m["value"]

        start = hand_at(np.array([0.45, 0.0, 0.3]))
        views = behind_views(start, MUG, PLATE)
        assert views is not None and len(views) > len(BEHIND_VIEWS_M)
        plate_xy = start.scene.box(PLATE).center_m[:2]
        beyond = beyond_views(start, PLATE)
        # toward the robot's base from the plate, and (jaws turned) away from it
        assert float(np.linalg.norm(views[0][:2])) < float(np.linalg.norm(plate_xy)) - 0.15
        assert float(np.linalg.norm(beyond[0][:2])) > float(np.linalg.norm(plate_xy)) + 0.1

        hand_at(above_views(start, PLATE)[0])
        from_above = int(truth.object_mask(truth.segmentation(WRIST_CAMERA), PLATE).sum())
        plate_truth = truth.object_truth(PLATE).footprint_center_xy_m
        true_offset = float(np.linalg.norm(truth.object_truth(MUG).footprint_center_xy_m - plate_truth))
        for view, jaw in ((views[0], 0.0), (beyond[0], math.pi)):
            ctx = hand_at(view, jaw)
            seen = int(truth.object_mask(truth.segmentation(WRIST_CAMERA), PLATE).sum())
            assert from_above < 0.6 * seen, (from_above, seen)  # from above the mug hides the plate
            m = measured(ctx)
            assert float(np.linalg.norm(np.asarray(m["destination"]["center_xy_m"]) - plate_truth)) < 0.01
            assert abs(m["xy_distance_m"] - true_offset) < 0.012
    finally:
        truth.close()
        driver.shutdown()
