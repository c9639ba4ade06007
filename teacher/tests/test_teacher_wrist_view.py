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
