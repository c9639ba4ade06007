"""Helpers shared by the LIBERO driver tests: trajectory streaming, Pinocchio IK on the
driver's description, and camera reprojection checks."""

from __future__ import annotations

import mujoco
import numpy as np
import pinocchio as pin

from captain_backends.core.driver import JointCommand


def stream(drv, q_from, q_to, duration_s, gripper=None, guard=None):
    """Stream a min-jerk joint trajectory; returns the advance reports."""
    n = max(1, round(duration_s / drv.control_period_s))
    reports = []
    for k in range(1, n + 1):
        s = k / n
        a = 10 * s**3 - 15 * s**4 + 6 * s**5
        drv.send_command(JointCommand(q_from + (q_to - q_from) * a, gripper))
        reports.append(drv.advance(guard))
        if reports[-1].guard_tripped:
            break
    return reports


def hold(drv, duration_s, gripper=None):
    q = drv.read_state().joint_positions_rad
    positions = []
    for _ in range(round(duration_s / drv.control_period_s)):
        drv.send_command(JointCommand(q, gripper))
        drv.advance()
        positions.append(drv.read_state().joint_positions_rad)
    return np.array(positions)


class Ik:
    """Damped least-squares IK on the description's MJCF with Pinocchio (arm joints only)."""

    def __init__(self, description):
        self.model = pin.buildModelFromMJCF(str(description.model_path))
        self.data = self.model.createData()
        # Pinocchio 4.1 misplaces MJCF sites; the body gripper0_eef coincides with the TCP
        self.tcp = self.model.getFrameId("gripper0_eef")
        self.flange = self.model.getFrameId(description.flange_frame)
        self.T_flange_tcp = description.T_flange_tcp
        self.arm_v = [self.model.joints[self.model.getJointId(n)].idx_v for n in description.arm_joint_names]
        self.arm_q = [self.model.joints[self.model.getJointId(n)].idx_q for n in description.arm_joint_names]

    def fk(self, q_arm, frame=None):
        q = pin.neutral(self.model)
        q[self.arm_q] = q_arm
        pin.framesForwardKinematics(self.model, self.data, q)
        return self.data.oMf[self.tcp if frame is None else frame].homogeneous.copy()

    def solve(self, T_base_tcp, q_arm):
        target = pin.SE3(T_base_tcp[:3, :3], T_base_tcp[:3, 3])
        q = pin.neutral(self.model)
        q[self.arm_q] = q_arm
        for _ in range(300):
            pin.framesForwardKinematics(self.model, self.data, q)
            err = pin.log6(self.data.oMf[self.tcp].actInv(target)).vector
            if np.linalg.norm(err) < 1e-6:
                break
            J = pin.computeFrameJacobian(self.model, self.data, q, self.tcp, pin.LOCAL)[:, self.arm_v]
            dq = np.zeros(self.model.nv)
            dq[self.arm_v] = J.T @ np.linalg.solve(J @ J.T + 1e-6 * np.eye(6), err)
            q = pin.integrate(self.model, q, dq)
        assert np.linalg.norm(err) < 1e-5, "IK did not converge"
        return np.asarray(q[self.arm_q])


def visible_point(drv, frame, world_point):
    """Where the camera ray towards ``world_point`` first meets a visible geom (world)."""
    s = drv.scene
    T_world_camera = drv.description().T_world_base @ frame.T_base_camera
    origin = T_world_camera[:3, 3]
    direction = world_point - origin
    direction /= np.linalg.norm(direction)
    geom = np.zeros(1, np.int32)
    groups = np.array([0, 1, 0, 0, 0, 0], np.uint8)
    dist = mujoco.mj_ray(s.model, s.data, origin, direction, groups, 1, -1, geom)
    assert dist > 0
    return origin + dist * direction, int(s.model.geom_bodyid[geom[0]])


def reprojection_error_m(frame, T_world_base, p_world):
    """Project a world point with K and T_base_camera, read the depth there and
    back-project; distance between the two points, metres."""
    T_camera_world = np.linalg.inv(T_world_base @ frame.T_base_camera)
    p_cam = (T_camera_world @ np.r_[p_world, 1.0])[:3]
    assert p_cam[2] > 0
    u, v, _ = frame.K @ (p_cam / p_cam[2])
    h, w = frame.depth_m.shape
    assert 0 <= u < w and 0 <= v < h, "point outside the image"
    ui, vi = round(float(u)), round(float(v))
    z = float(frame.depth_m[vi, ui])
    back = np.linalg.inv(frame.K) @ np.array([ui, vi, 1.0]) * z
    back_world = (T_world_base @ frame.T_base_camera @ np.r_[back, 1.0])[:3]
    return float(np.linalg.norm(back_world - p_world))


def pixel_check(drv, frame, world_point, edge_m=0.01):
    """Project ``world_point`` with the frame's K and T_base_camera to a pixel, cast
    MuJoCo's ray through that pixel's centre and back-project the rendered depth there.

    Returns ``(error_m, body_id)``: the distance between the ray's hit and the
    back-projected point, and the body the ray hit; None when the pixel lies on a depth
    edge (where rasterisation and ray casting may legitimately disagree)."""
    s = drv.scene
    T_world_camera = drv.description().T_world_base @ frame.T_base_camera
    p_cam = (np.linalg.inv(T_world_camera) @ np.r_[world_point, 1.0])[:3]
    assert p_cam[2] > 0, "point behind the camera"
    u, v, _ = frame.K @ (p_cam / p_cam[2])
    h, w = frame.depth_m.shape
    ui, vi = round(float(u)), round(float(v))
    assert 1 <= ui < w - 1 and 1 <= vi < h - 1, "point outside the image"
    patch = frame.depth_m[vi - 1:vi + 2, ui - 1:ui + 2]
    if patch.min() <= 0 or patch.max() - patch.min() > edge_m:
        return None
    ray_cam = np.linalg.inv(frame.K) @ np.array([ui, vi, 1.0])
    direction = T_world_camera[:3, :3] @ (ray_cam / np.linalg.norm(ray_cam))
    geom = np.zeros(1, np.int32)
    groups = np.array([0, 1, 0, 0, 0, 0], np.uint8)
    dist = mujoco.mj_ray(s.model, s.data, T_world_camera[:3, 3], direction, groups, 1, -1, geom)
    assert dist > 0
    hit = T_world_camera[:3, 3] + dist * direction
    back = (T_world_camera @ np.r_[ray_cam * float(frame.depth_m[vi, ui]), 1.0])[:3]
    return float(np.linalg.norm(back - hit)), int(s.model.geom_bodyid[geom[0]])
