"""Rigid-transform helpers: quaternions ``[w, x, y, z]``, rotation matrices and 4x4 poses.

Conventions: quaternions are Hamilton, scalar first (``[w, x, y, z]``, the policy API's
order); a pose ``T_a_b`` is a 4x4 homogeneous matrix mapping coordinates in frame ``b``
to frame ``a`` (so ``T_base_tcp[:3, 3]`` is the TCP position in the base frame, metres).
"""

from __future__ import annotations

import math

import numpy as np


def vector_norm(v: np.ndarray) -> float:
    """Euclidean norm of a 1-D float array: ``np.linalg.norm(v)`` bit for bit (numpy computes
    it as the square root of ``v·v``), without numpy's dispatch."""
    return math.sqrt(v.dot(v))


def quat_normalize(q_wxyz: np.ndarray) -> np.ndarray:
    """Unit quaternion with a non-negative scalar part (``q`` and ``-q`` are the same rotation)."""
    q = np.asarray(q_wxyz, dtype=float)
    q = q / vector_norm(q)
    return -q if q[0] < 0.0 else q


def quat_to_matrix(q_wxyz: np.ndarray) -> np.ndarray:
    """3x3 rotation matrix of a unit quaternion ``[w, x, y, z]``."""
    w, x, y, z = (float(v) for v in q_wxyz)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Unit quaternion ``[w, x, y, z]`` (w >= 0) of a 3x3 rotation matrix."""
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = np.asarray(R, dtype=float)[:3, :3].tolist()
    trace = r00 + r11 + r22
    if trace > 0.0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = [0.25 * s, (r21 - r12) / s, (r02 - r20) / s, (r10 - r01) / s]
    elif r00 > r11 and r00 > r22:
        s = 2.0 * math.sqrt(1.0 + r00 - r11 - r22)
        q = [(r21 - r12) / s, 0.25 * s, (r01 + r10) / s, (r02 + r20) / s]
    elif r11 > r22:
        s = 2.0 * math.sqrt(1.0 + r11 - r00 - r22)
        q = [(r02 - r20) / s, (r01 + r10) / s, 0.25 * s, (r12 + r21) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + r22 - r00 - r11)
        q = [(r10 - r01) / s, (r02 + r20) / s, (r12 + r21) / s, 0.25 * s]
    q = np.array(q)
    q /= vector_norm(q)
    return -q if q[0] < 0.0 else q


def quat_multiply(a_wxyz: np.ndarray, b_wxyz: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` (apply ``b`` first, then ``a``)."""
    aw, ax, ay, az = a_wxyz
    bw, bx, by, bz = b_wxyz
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def quat_angle_rad(a_wxyz: np.ndarray, b_wxyz: np.ndarray) -> float:
    """Angle of the rotation between two unit quaternions, radians in [0, pi]."""
    d = abs(float(np.dot(quat_normalize(a_wxyz), quat_normalize(b_wxyz))))
    return 2.0 * math.acos(min(1.0, d))


def rotation_angle_rad(R_a: np.ndarray, R_b: np.ndarray) -> float:
    """Angle of the relative rotation ``R_a^T R_b``, radians in [0, pi]."""
    c = (float((np.asarray(R_a).T @ np.asarray(R_b)).trace()) - 1.0) / 2.0
    return math.acos(max(-1.0, min(1.0, c)))


def slerp(a_wxyz: np.ndarray, b_wxyz: np.ndarray, s: float) -> np.ndarray:
    """Spherical linear interpolation from ``a`` (s=0) to ``b`` (s=1) along the shorter arc."""
    a = quat_normalize(a_wxyz)
    b = quat_normalize(b_wxyz)
    d = float(np.dot(a, b))
    if d < 0.0:
        b, d = -b, -d
    if d > 0.9995:
        q = a + s * (b - a)
        return q / np.linalg.norm(q)
    theta = math.acos(d)
    sin_theta = math.sin(theta)
    return (math.sin((1.0 - s) * theta) * a + math.sin(s * theta) * b) / sin_theta


def pose_matrix(position_m: np.ndarray, q_wxyz: np.ndarray) -> np.ndarray:
    """4x4 pose from a position (m) and a unit quaternion ``[w, x, y, z]``."""
    w, x, y, z = (float(v) for v in q_wxyz)
    px, py, pz = np.asarray(position_m, dtype=float).reshape(3).tolist()
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w), px],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w), py],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y), pz],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def pose_inverse(T: np.ndarray) -> np.ndarray:
    """Inverse of a 4x4 rigid transform."""
    R = T[:3, :3]
    out = np.eye(4)
    out[:3, :3] = R.T
    out[:3, 3] = -R.T @ T[:3, 3]
    return out


def pose_parts(T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position_m, quaternion_wxyz) of a 4x4 pose."""
    return np.array(T[:3, 3], dtype=float), matrix_to_quat(T[:3, :3])


def rotation_about_axis(axis: np.ndarray, angle_rad: float) -> np.ndarray:
    """Quaternion ``[w, x, y, z]`` of a rotation by ``angle_rad`` about ``axis``."""
    axis = np.asarray(axis, dtype=float)
    axis = axis / np.linalg.norm(axis)
    half = 0.5 * angle_rad
    return np.concatenate(([math.cos(half)], math.sin(half) * axis))
