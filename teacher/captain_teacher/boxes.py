"""Oriented boxes in the robot base frame (x forward, y left, z up; metres, radians): the
approximate shapes the teacher gives objects and fixture parts, with the ray and
containment tests its visibility and clearance checks use."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def yaw_of(quaternion_wxyz: Sequence[float]) -> float:
    """Rotation about the vertical of a quaternion [w, x, y, z], rad."""
    w, x, y, z = (float(v) for v in quaternion_wxyz)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def rot_z(yaw: float) -> np.ndarray:
    """3x3 rotation about z by ``yaw`` rad."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


@dataclass(frozen=True)
class Box:
    """An oriented box in the base frame: centre, half extents (body axes) and yaw, metres/rad."""

    center_m: np.ndarray
    half_m: np.ndarray
    yaw_rad: float

    def corners(self) -> np.ndarray:
        """The 8 corners, (8, 3)."""
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
        return self.center_m + (signs * self.half_m) @ rot_z(self.yaw_rad).T

    @property
    def top_z_m(self) -> float:
        """Height of the top face, m."""
        return float(self.center_m[2] + self.half_m[2])

    @property
    def bottom_z_m(self) -> float:
        """Height of the bottom face, m."""
        return float(self.center_m[2] - self.half_m[2])

    def contains(self, point: np.ndarray) -> bool:
        """Whether a point lies inside the box."""
        local = rot_z(self.yaw_rad).T @ (np.asarray(point, float) - self.center_m)
        return bool(np.all(np.abs(local) <= self.half_m))

    def ray_hit(self, origin: np.ndarray, point: np.ndarray, margin_m: float = 0.004) -> bool:
        """Whether the segment from ``origin`` to ``point`` passes through the box before
        it comes within ``margin_m`` of ``point`` (slab test in the box frame)."""
        R = rot_z(self.yaw_rad)
        o = R.T @ (np.asarray(origin, float) - self.center_m)
        p = R.T @ (np.asarray(point, float) - self.center_m)
        d = p - o
        length = float(np.linalg.norm(d))
        if length < 1e-9:
            return False
        t_end = 1.0 - margin_m / length
        t0, t1 = 0.0, t_end
        for k in range(3):
            if abs(d[k]) < 1e-12:
                if abs(o[k]) > self.half_m[k]:
                    return False
                continue
            a = (-self.half_m[k] - o[k]) / d[k]
            b = (self.half_m[k] - o[k]) / d[k]
            lo, hi = min(a, b), max(a, b)
            t0, t1 = max(t0, lo), min(t1, hi)
            if t0 > t1:
                return False
        return True

    def side_points(self, eye_m: np.ndarray, fraction: float = 0.6, n: int = 3) -> np.ndarray:
        """Points on the vertical faces that face ``eye_m``, on n x n grids spanning ``fraction``."""
        R = rot_z(self.yaw_rad)
        out = []
        ticks = np.linspace(-fraction, fraction, n)
        for axis in (0, 1):
            for sign in (-1.0, 1.0):
                normal = R[:, axis] * sign
                face = self.center_m + normal * self.half_m[axis]
                if float(np.dot(normal, np.asarray(eye_m) - face)) <= 0:
                    continue
                other = 1 - axis
                for a in ticks:
                    for b in ticks:
                        local = np.zeros(3)
                        local[axis] = sign * (self.half_m[axis] - 0.002)
                        local[other] = a * self.half_m[other]
                        local[2] = b * self.half_m[2]
                        out.append(self.center_m + R @ local)
        return np.array(out).reshape(-1, 3)

    def top_points(self, fraction: float = 0.6, n: int = 5) -> np.ndarray:
        """Points on the top face on an n x n grid spanning ``fraction`` of it, (n*n, 3)."""
        ticks = np.linspace(-fraction, fraction, n)
        local = np.array([[a * self.half_m[0], b * self.half_m[1], self.half_m[2] - 0.002]
                          for a in ticks for b in ticks])
        return self.center_m + local @ rot_z(self.yaw_rad).T


def open_box(box: Box, wall_m: float = 0.008) -> list[Box]:
    """A box's four walls and floor as thin boxes (for containers)."""
    hx, hy, hz = box.half_m
    R = rot_z(box.yaw_rad)
    parts = [((hx - wall_m, 0.0, 0.0), (wall_m, hy, hz)), ((-hx + wall_m, 0.0, 0.0), (wall_m, hy, hz)),
             ((0.0, hy - wall_m, 0.0), (hx, wall_m, hz)), ((0.0, -hy + wall_m, 0.0), (hx, wall_m, hz)),
             ((0.0, 0.0, -hz + wall_m), (hx, hy, wall_m))]
    return [Box(box.center_m + R @ np.asarray(c), np.asarray(h), box.yaw_rad) for c, h in parts]
