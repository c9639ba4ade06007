"""Pinocchio kinematics of a driver's ``RobotDescription``, for tests: forward
kinematics of the tool centre point and a damped least-squares IK, plus a helper that
streams a straight Cartesian line of joint targets to a driver."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from captain_backends.core import ForceGuard, JointCommand, RobotDescription, RobotDriver


class PandaKinematics:
    """FK/IK of the arm in the description's base frame (fingers held at 0)."""

    def __init__(self, description: RobotDescription) -> None:
        self.model = pin.buildModelFromMJCF(str(description.model_path))
        self.data = self.model.createData()
        flange = self.model.getFrameId(description.flange_frame)
        frame = self.model.frames[flange]
        T = description.T_flange_tcp
        placement = frame.placement * pin.SE3(T[:3, :3], T[:3, 3])
        self.tcp_frame = self.model.addFrame(pin.Frame("tcp", frame.parentJoint, placement,
                                                       pin.FrameType.OP_FRAME))
        self.data = self.model.createData()
        self.q_index = np.array([self.model.joints[self.model.getJointId(n)].idx_q
                                 for n in description.arm_joint_names])
        self.v_index = np.array([self.model.joints[self.model.getJointId(n)].idx_v
                                 for n in description.arm_joint_names])
        self.lower = description.joint_lower_rad
        self.upper = description.joint_upper_rad

    def _full(self, q_arm: np.ndarray) -> np.ndarray:
        q = pin.neutral(self.model)
        q[self.q_index] = q_arm
        return q

    def tcp(self, q_arm: np.ndarray) -> np.ndarray:
        """4x4 pose of the TCP in the base frame."""
        pin.framesForwardKinematics(self.model, self.data, self._full(q_arm))
        return self.data.oMf[self.tcp_frame].homogeneous.copy()

    def solve(self, T_goal: np.ndarray, q_start: np.ndarray, iterations: int = 60,
              tolerance: float = 1e-7) -> np.ndarray:
        """Joint positions that put the TCP at ``T_goal`` (DLS from ``q_start``)."""
        goal = pin.SE3(T_goal[:3, :3], T_goal[:3, 3])
        q = self._full(q_start)
        for _ in range(iterations):
            pin.framesForwardKinematics(self.model, self.data, q)
            current_to_goal = self.data.oMf[self.tcp_frame].actInv(goal)
            err = pin.log(current_to_goal).vector
            if np.linalg.norm(err) < tolerance:
                break
            J = pin.computeFrameJacobian(self.model, self.data, q, self.tcp_frame)[:, self.v_index]
            J = -pin.Jlog6(current_to_goal.inverse()) @ J
            dq = -J.T @ np.linalg.solve(J @ J.T + 1e-8 * np.eye(6), err)
            q[self.q_index] = np.clip(q[self.q_index] + dq, self.lower, self.upper)
        return q[self.q_index].copy()


def rot_z(angle_rad: float) -> np.ndarray:
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def stream_line(driver: RobotDriver, kin: PandaKinematics, q_start: np.ndarray, T_goal: np.ndarray,
                speed_mps: float, guard: ForceGuard | None = None, gripper: float | None = None):
    """Stream a straight TCP line from FK(q_start) to ``T_goal`` (orientation
    interpolated) with a quintic time scaling; stop at the first tripped guard.

    Returns (last commanded joints, list of AdvanceReports).
    """
    T0 = kin.tcp(q_start)
    distance = float(np.linalg.norm(T_goal[:3, 3] - T0[:3, 3]))
    angle = float(np.linalg.norm(pin.log3(T0[:3, :3].T @ T_goal[:3, :3])))
    duration = max(distance / speed_mps * 1.875, angle / 1.0 * 1.875, 0.05)
    steps = int(np.ceil(duration / driver.control_period_s))
    q = q_start.copy()
    reports = []
    for k in range(1, steps + 1):
        s = k / steps
        s = 10 * s**3 - 15 * s**4 + 6 * s**5
        T = np.eye(4)
        T[:3, 3] = T0[:3, 3] + s * (T_goal[:3, 3] - T0[:3, 3])
        T[:3, :3] = T0[:3, :3] @ pin.exp3(s * pin.log3(T0[:3, :3].T @ T_goal[:3, :3]))
        q = kin.solve(T, q)
        sent = driver.send_command(JointCommand(q, gripper))
        q = sent.joint_positions_rad
        report = driver.advance(guard)
        reports.append(report)
        if report.guard_tripped:
            break
    return q, reports


def wait(driver: RobotDriver, duration_s: float, guard: ForceGuard | None = None) -> list:
    """Advance without new commands for ``duration_s``."""
    return [driver.advance(guard) for _ in range(round(duration_s / driver.control_period_s))]
