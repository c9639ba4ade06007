"""ROS-free core of the XR1 fake hardware, in the spirit of ros2_control's mock components.

``FirstOrderMirror`` mirrors commanded joint positions into the state with a
first-order lag (time constant ``tau``): after ``dt`` the state has moved
``1 - exp(-dt / tau)`` of the way to the target; velocities are the finite difference.
``synthetic_rgbd`` makes a camera frame that is cheap and recognisable: a colour
gradient with a checkerboard, and a depth image of a plane facing the camera.
"""

from __future__ import annotations

import math

import numpy as np


class FirstOrderMirror:
    """Joint positions following their targets with a first-order lag.

    Args:
        initial_positions: starting joint positions (also the first target).
        time_constant_s: lag time constant, s (0: the state jumps to the target).
    """

    def __init__(self, initial_positions: np.ndarray, time_constant_s: float) -> None:
        self.positions = np.asarray(initial_positions, dtype=float).copy()
        self.velocities = np.zeros_like(self.positions)
        self.target = self.positions.copy()
        self.time_constant_s = float(time_constant_s)

    def set_target(self, target: np.ndarray) -> None:
        """A new commanded position for every joint."""
        target = np.asarray(target, dtype=float)
        if target.shape != self.positions.shape:
            raise ValueError(f"expected {self.positions.shape[0]} targets, got {target.shape}")
        self.target = target.copy()

    def step(self, dt_s: float) -> None:
        """Advance the state by ``dt_s`` seconds."""
        if dt_s <= 0:
            return
        alpha = 1.0 if self.time_constant_s <= 0 else 1.0 - math.exp(-dt_s / self.time_constant_s)
        new = self.positions + alpha * (self.target - self.positions)
        self.velocities = (new - self.positions) / dt_s
        self.positions = new


def pinhole_K(width_px: int, height_px: int, fovy_deg: float) -> np.ndarray:
    """Intrinsics (pixels) of a square-pixel pinhole camera with vertical field of view
    ``fovy_deg``, principal point at the image centre (OpenCV pixel centres)."""
    f = 0.5 * height_px / math.tan(math.radians(fovy_deg) / 2.0)
    return np.array([[f, 0.0, (width_px - 1) / 2.0], [0.0, f, (height_px - 1) / 2.0], [0.0, 0.0, 1.0]])


def synthetic_rgbd(width_px: int, height_px: int, fovy_deg: float = 60.0, plane_distance_m: float = 1.0,
                   frame_index: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A synthetic RGB-D frame: (HxWx3 uint8 RGB, HxW float32 depth in m, 3x3 K).

    The colour image is a red/green gradient with a 32-pixel checkerboard in blue that
    shifts by one square per ``frame_index``; the depth is a plane at
    ``plane_distance_m`` along the optical axis (constant z).
    """
    ys, xs = np.mgrid[0:height_px, 0:width_px]
    rgb = np.empty((height_px, width_px, 3), dtype=np.uint8)
    rgb[..., 0] = (255 * xs / max(1, width_px - 1)).astype(np.uint8)
    rgb[..., 1] = (255 * ys / max(1, height_px - 1)).astype(np.uint8)
    rgb[..., 2] = np.where(((xs // 32 + ys // 32 + frame_index) % 2) == 0, 200, 40).astype(np.uint8)
    depth = np.full((height_px, width_px), plane_distance_m, dtype=np.float32)
    return rgb, depth, pinhole_K(width_px, height_px, fovy_deg)
