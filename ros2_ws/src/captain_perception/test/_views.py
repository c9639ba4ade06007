"""Test helper: camera views set up by writing the simulator's arm pose (tests only)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


@contextmanager
def libero_scene(task: str, init_state: int = 11) -> Iterator[tuple]:
    """A configured LIBERO driver of ``task`` at official state ``init_state`` and its
    simulator truth (fixtures included), ``(driver, truth)``; both closed on exit."""
    from captain_backends.core.libero.driver import LiberoDriver
    from captain_perception.groundtruth import SimTruth

    driver = LiberoDriver(task=task, init_state=init_state)
    driver.configure()
    truth = SimTruth.from_libero(driver, include_fixtures=True)
    try:
        yield driver, truth
    finally:
        truth.close()
        driver.shutdown()


def look_down_with_the_wrist(driver, target_base: np.ndarray, height_m: float = 0.36) -> None:
    """Put the arm (simulator write, test only) where the wrist camera looks straight down at
    ``target_base`` (base frame, metres) from ``height_m``, as a policy's final check does."""
    T = np.eye(4)
    T[:3, :3] = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])  # jaw along y, pointing down
    T[:3, 3] = [target_base[0], target_base[1], height_m]
    pose_tool(driver, T, 0.04)


def pose_tool(driver, T_base_tool: np.ndarray, finger_m: float = 0.0) -> None:
    """Put the arm (simulator write, test only) so that the tool has the pose
    ``T_base_tool`` (4x4, base frame, metres)."""
    from captain_harness.core.kinematics import Kinematics
    from captain_perception.robot_mask_score import set_pose

    kin = Kinematics(driver.description())
    s = driver.scene
    ik = kin.solve_ik(np.asarray(T_base_tool, float), np.asarray(s.data.qpos[s.arm_qpos], float), restarts=8)
    assert ik.success, ik.reason
    set_pose(driver, ik.q, finger_m)


def perceive(driver, out_dir):
    """The perception primitives on ``driver`` behind the policy API, and a fresh
    observation: ``(api, perception, observation_handle)``."""
    from captain_harness.core.api import RobotAPI
    from captain_perception.core.primitives import Perception

    perception = Perception(driver, out_dir)
    api = RobotAPI()
    api.register_object(perception)
    return api, perception, api.call("observe").result["value"]["observation_handle"]


def click(api, perception, handle: str, camera: str, x: int, y: int, label: str) -> tuple[str, np.ndarray]:
    """``mark_point`` on pixel (``x``, ``y``) of a 512 x 512 image: the detection id and its
    full-image mask (asserts that the click succeeded)."""
    out = api.call("mark_point", (handle, camera, (x + 0.5) / 512, (y + 0.5) / 512),
                   {"label": label, "granularity": "object"}).result
    assert out["success"], out["message"]
    det = out["value"]["detection_id"]
    return det, perception.store.detection(det).mask.full()
