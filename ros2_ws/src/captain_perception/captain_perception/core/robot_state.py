"""The policy-facing robot state captured with each observation.

``observe()`` reports ``robot_state`` with ``end_effector_position_m`` (the tool centre
point in the robot base frame, metres). The perception core takes a callable that
returns this dict; whoever composes the harness passes the motion layer's state. When
none is given, ``kinematic_robot_state(driver)`` builds one from the driver's joint
readings and the arm's kinematics (``captain_harness.core.kinematics``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from captain_backends.core.driver import RobotDriver

RobotStateProvider = Callable[[], dict[str, Any]]


def kinematic_robot_state(driver: RobotDriver) -> RobotStateProvider:
    """A provider computing the TCP pose from the driver's joints with forward kinematics.

    The kinematic model is built on first use. If it cannot be built the provider still
    returns the joint and gripper readings, with ``end_effector_position_m`` None and the
    reason in ``end_effector_error``.
    """
    holder: dict[str, Any] = {}

    def provide() -> dict[str, Any]:
        state = driver.read_state()
        out: dict[str, Any] = {
            "time_s": float(state.time_s),
            "joint_positions_rad": np.asarray(state.joint_positions_rad, float).round(5).tolist(),
            "gripper_opening_m": round(float(state.gripper_opening_m), 5),
            "gripper_open_fraction": round(float(state.gripper_open_fraction), 4),
        }
        if "kin" not in holder and "error" not in holder:
            try:
                from captain_harness.core.kinematics import Kinematics

                holder["kin"] = Kinematics(driver.description())
            except Exception as exc:
                holder["error"] = f"{type(exc).__name__}: {exc}"
        if "kin" in holder:
            from captain_harness.core.geometry import matrix_to_quat

            T = holder["kin"].fk(np.asarray(state.joint_positions_rad, float))
            out["end_effector_position_m"] = np.asarray(T[:3, 3]).round(5).tolist()
            out["end_effector_quaternion_wxyz"] = matrix_to_quat(T[:3, :3]).round(5).tolist()
        else:
            out["end_effector_position_m"] = None
            out["end_effector_error"] = holder.get("error", "no kinematics")
        return out

    return provide
