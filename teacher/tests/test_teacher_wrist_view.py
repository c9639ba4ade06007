"""The teacher never picks a wrist-camera pixel on the robot: the fingers and the hand fill
the wrist image's bottom in every pose (the camera is fixed to the hand), and perception
refuses a click there. ``CameraModel.in_view`` keeps wrist clicks above
``WRIST_HAND_FROM_V``; checked here against the simulator's own robot pixels over many arm
poses and finger openings (the rest of the arm is out of view when the wrist camera looks
down, as every teacher view does; a click at v = 0.87 on a plate under the fingers stopped
libero_10/4 and libero_goal_swap/1 episodes)."""

from __future__ import annotations

import numpy as np
import pytest

from captain_teacher.scene import WRIST_CAMERA, WRIST_HAND_FROM_V, CameraModel

pytestmark = pytest.mark.sim


def test_the_wrist_view_ends_where_the_hand_begins() -> None:
    from captain_backends.core.libero.driver import LiberoDriver
    from captain_perception.groundtruth import SimTruth
    from captain_perception.robot_mask_score import arm_poses, robot_geoms, set_pose

    driver = LiberoDriver(task="libero_10/4", init_state=12)
    driver.configure()
    truth = SimTruth.from_libero(driver)
    try:
        hand = robot_geoms(truth, root="robot0_right_hand")  # the hand, its fingers and the camera's mount
        top_rows = []
        for q, finger in arm_poses(driver, 12, seed=5, spread_rad=0.6):
            for opening in (finger, 0.0, 0.04):
                set_pose(driver, q, opening)
                mask = np.isin(truth.segmentation(WRIST_CAMERA), hand)
                rows = np.nonzero(mask.any(axis=1))[0]
                assert rows.size, "the hand is in the wrist image in every pose"
                top_rows.append(int(rows.min()))
    finally:
        truth.close()
        driver.shutdown()
    highest = min(top_rows) / 512.0
    # every robot pixel lies below the bound, and the bound is not far above the fingertips
    assert highest > WRIST_HAND_FROM_V, f"the hand's pixels reach up to v = {highest:.3f}"
    assert highest - WRIST_HAND_FROM_V < 0.05, f"the bound leaves {highest - WRIST_HAND_FROM_V:.3f} of the image unused"


def test_in_view_keeps_wrist_points_above_the_hand_only() -> None:
    K = np.array([[400.0, 0.0, 256.0], [0.0, 400.0, 256.0], [0.0, 0.0, 1.0]])
    for name, low_ok in ((WRIST_CAMERA, False), ("agentview", True)):
        cam = CameraModel(name, K, np.eye(4))
        assert cam.in_view(0.5, 0.5, 0.04)
        assert cam.in_view(0.5, 0.85, 0.04) is low_ok
        assert not cam.in_view(0.5, 0.99, 0.04)
        assert not cam.in_view(float("nan"), 0.5, 0.04)


def test_a_view_with_the_jaws_turned_keeps_the_wrist_camera_in_place() -> None:
    """``go``'s 180 deg twin is the same grasp, not the same view: the wrist camera sits off
    the tool's axis, so a view taken with the jaws turned must move the tool by
    ``twin_view_shift`` (libero_10/4 state 12: the turned view put the camera 10 cm back and
    the mug on its plate at the image's edge). Checked with the simulator's own camera."""
    from types import SimpleNamespace

    from captain_backends.core.libero.driver import LiberoDriver
    from captain_harness.core.geometry import quat_to_matrix
    from captain_harness.core.kinematics import Kinematics
    from captain_perception.robot_mask_score import set_pose
    from captain_teacher.planners.grasping import quat_for_jaw
    from captain_teacher.planners.measuring import twin_view_shift

    driver = LiberoDriver(task="libero_10/4", init_state=12)
    driver.configure()
    try:
        driver.reset(init_state=12)
        kin = Kinematics(driver.description())
        q0 = np.asarray(driver.read_state().joint_positions_rad, float)

        def camera_at(p: np.ndarray, jaw: float) -> tuple[np.ndarray, np.ndarray]:
            T = np.eye(4)
            T[:3, :3] = quat_to_matrix(quat_for_jaw(jaw))
            T[:3, 3] = p
            ik = kin.solve_ik(T, q0, restarts=8)
            assert ik.success, ik.reason
            set_pose(driver, ik.q, 0.04)
            return kin.fk(ik.q), driver.capture((WRIST_CAMERA,))[WRIST_CAMERA].T_base_camera

        view = np.array([0.45, -0.2, 0.25])
        T_tcp, T_cam = camera_at(view, 0.0)
        shift = twin_view_shift(SimpleNamespace(T_tcp_wrist=np.linalg.inv(T_tcp) @ T_cam))
        assert shift is not None and abs(shift[2]) < 1e-9
        _, turned_in_place = camera_at(view, np.pi)
        _, turned_moved = camera_at(view + shift, np.pi)
    finally:
        driver.shutdown()
    assert np.linalg.norm(turned_moved[:3, 3] - T_cam[:3, 3]) < 0.002  # the same spot, seen upside down
    assert np.linalg.norm(turned_in_place[:3, 3] - T_cam[:3, 3]) > 0.08
    assert twin_view_shift(SimpleNamespace(T_tcp_wrist=None)) is None
