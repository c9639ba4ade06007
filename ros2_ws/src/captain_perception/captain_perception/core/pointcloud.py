"""Organised point clouds of one camera frame, in the robot base frame.

A ``FrameCloud`` wraps one ``CameraFrame`` and computes, lazily and once:

* ``points_base``: (H, W, 3) metric points in the robot base frame (NaN where the depth
  is invalid), metres;
* ``lab``: the image in CIE L*a*b* (L in 0..100), a perceptual colour space in which
  Euclidean distance approximates perceived colour difference;
* ``support_planes()``: heights (base z, metres) of the large horizontal surfaces in
  view, the largest first (normally the table).

Normals are estimated from the organised cloud by central differences over a smoothed
cloud, oriented towards the camera.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import cv2
import numpy as np

from captain_backends.core.driver import CameraFrame

#: Normals with a base-frame z component above this count as facing up (horizontal surface).
UP_NORMAL_MIN_Z = 0.95
#: Histogram bin for horizontal-surface heights, metres.
PLANE_BIN_M = 0.002


@dataclass(frozen=True)
class SupportPlane:
    """A horizontal surface: ``height_m`` (base z), ``area_m2`` seen, ``pixels`` counted."""

    height_m: float
    area_m2: float
    pixels: int


class FrameCloud:
    """Point cloud and colour of one camera frame (see the module docstring)."""

    def __init__(self, frame: CameraFrame, exclude: np.ndarray | None = None) -> None:
        self.frame = frame
        #: (H, W) bool pixels left out of the cloud (no depth), e.g. the robot's own; or None
        self.exclude = exclude
        self.height, self.width = frame.depth_m.shape[:2]
        self.K = np.asarray(frame.K, dtype=float)
        self.T_base_camera = np.asarray(frame.T_base_camera, dtype=float)
        #: results derived from this frame by other modules (e.g. surface pieces), by key
        self.cache: dict[object, object] = {}

    @property
    def camera_position_base(self) -> np.ndarray:
        """Camera optical centre in the base frame, metres."""
        return self.T_base_camera[:3, 3].copy()

    @cached_property
    def depth_m(self) -> np.ndarray:
        """Depth with invalid values (0, negative, inf) and excluded pixels set to NaN, float32, metres."""
        d = np.asarray(self.frame.depth_m, dtype=np.float32).copy()
        d[~(np.isfinite(d) & (d > 0))] = np.nan
        if self.exclude is not None:
            d[self.exclude] = np.nan
        return d

    @cached_property
    def valid(self) -> np.ndarray:
        """(H, W) bool: pixels with a valid depth."""
        return np.isfinite(self.depth_m)

    @cached_property
    def points_camera(self) -> np.ndarray:
        """(H, W, 3) float32 camera-frame points (OpenCV optical frame), metres."""
        fx, fy, cx, cy = self.K[0, 0], self.K[1, 1], self.K[0, 2], self.K[1, 2]
        xs = ((np.arange(self.width, dtype=np.float32) - cx) / fx)[None, :]
        ys = ((np.arange(self.height, dtype=np.float32) - cy) / fy)[:, None]
        d = self.depth_m
        return np.stack([xs * d, ys * d, d], axis=-1)

    @cached_property
    def point_planes(self) -> np.ndarray:
        """(3, H, W) float32 base-frame x, y, z planes, metres (NaN where depth is invalid)."""
        R = self.T_base_camera[:3, :3].astype(np.float32)
        t = self.T_base_camera[:3, 3].astype(np.float32)
        fx, fy, cx, cy = self.K[0, 0], self.K[1, 1], self.K[0, 2], self.K[1, 2]
        xs = ((np.arange(self.width, dtype=np.float32) - cx) / fx)[None, :]
        ys = ((np.arange(self.height, dtype=np.float32) - cy) / fy)[:, None]
        d = self.depth_m
        out = np.empty((3, self.height, self.width), np.float32)
        for i in range(3):
            # base-frame ray direction (per unit depth) times depth, plus the camera origin
            out[i] = (R[i, 0] * xs + R[i, 1] * ys + R[i, 2]) * d + t[i]
        return out

    @cached_property
    def points_base(self) -> np.ndarray:
        """(H, W, 3) float32 base-frame points, metres (NaN where depth is invalid)."""
        return np.ascontiguousarray(np.moveaxis(self.point_planes, 0, -1))

    @cached_property
    def lab(self) -> np.ndarray:
        """(H, W, 3) float32 CIE L*a*b* of the image, lightly smoothed (sigma 0.8 px)."""
        rgb = np.ascontiguousarray(self.frame.rgb[..., :3]).astype(np.float32) / 255.0
        rgb = cv2.GaussianBlur(rgb, (0, 0), 0.8)
        return cv2.cvtColor(rgb, cv2.COLOR_RGB2Lab)

    def pixel_size_m(self, depth_m: float | np.ndarray) -> float | np.ndarray:
        """Side of one pixel's footprint on a fronto-parallel surface at this depth, metres."""
        return np.asarray(depth_m) / float(0.5 * (self.K[0, 0] + self.K[1, 1]))

    def normals(self, y0: int = 0, y1: int | None = None, x0: int = 0, x1: int | None = None,
                smooth_px: int = 5) -> np.ndarray:
        """(h, w, 3) unit normals (base frame) of a crop, oriented towards the camera;
        NaN where undefined. The cloud is box-smoothed over ``smooth_px`` first."""
        y1 = self.height if y1 is None else y1
        x1 = self.width if x1 is None else x1
        pts = self.points_base[y0:y1, x0:x1]
        return normals_of(pts, self.camera_position_base, smooth_px)

    def support_planes(self, max_planes: int = 4) -> list[SupportPlane]:
        """Large horizontal surfaces, biggest first (see the module docstring)."""
        return self._support_planes[:max_planes]

    def table_height_m(self) -> float | None:
        """Height of the largest horizontal surface in view (normally the table), or None."""
        planes = self._support_planes
        return planes[0].height_m if planes else None

    @cached_property
    def _support_planes(self) -> list[SupportPlane]:
        step = 2
        planes = np.ascontiguousarray(self.point_planes[:, ::step, ::step])
        n = normal_planes(planes, self.camera_position_base, 3)
        up = np.isfinite(n[2]) & (n[2] > UP_NORMAL_MIN_Z)
        if up.sum() < 50:
            return []
        z = planes[2][up].astype(float)
        depth = self.depth_m[::step, ::step][up].astype(float)
        cos_view = np.abs(np.sum(self.T_base_camera[:3, 2] * np.array([0, 0, 1.0])))
        area = (self.pixel_size_m(depth) * step) ** 2 / max(cos_view, 0.2)
        lo, hi = np.floor(z.min() / PLANE_BIN_M), np.ceil(z.max() / PLANE_BIN_M) + 1
        edges = np.arange(lo, hi + 1) * PLANE_BIN_M
        if len(edges) < 2:
            edges = np.array([z.min() - PLANE_BIN_M, z.max() + PLANE_BIN_M])
        hist, _ = np.histogram(z, bins=edges, weights=area)
        counts, _ = np.histogram(z, bins=edges)
        planes: list[SupportPlane] = []
        used = np.zeros(len(hist), bool)
        min_area = 0.004  # m^2, about 6 x 6 cm
        # peaks by pixel count: the surface that dominates the view (a far floor may cover
        # more square metres than the table in front of it, but far fewer pixels)
        for idx in np.argsort(counts)[::-1]:
            if used[idx] or counts[idx] <= 0:
                continue
            a, b = max(0, idx - 2), min(len(hist), idx + 3)
            area_sum = float(hist[a:b].sum())
            used[a:b] = True
            if area_sum < min_area:
                continue
            sel = (z >= edges[a]) & (z < edges[b])
            planes.append(SupportPlane(height_m=float(np.median(z[sel])), area_m2=area_sum,
                                       pixels=int(counts[a:b].sum()) * step * step))
        planes.sort(key=lambda pl: -pl.pixels)
        return planes


def normals_of(points: np.ndarray, camera_position: np.ndarray, smooth_px: int = 5) -> np.ndarray:
    """Unit normals (h, w, 3) of an organised cloud (h, w, 3), oriented towards ``camera_position``.

    NaN points are ignored by the smoothing; normals are NaN where undefined.
    """
    planes = np.moveaxis(np.asarray(points, dtype=np.float32), -1, 0)
    return np.moveaxis(normal_planes(planes, camera_position, smooth_px), 0, -1)


def normal_planes(planes: np.ndarray, camera_position: np.ndarray, smooth_px: int = 5) -> np.ndarray:
    """Unit normals as (3, h, w) planes of an organised cloud given as (3, h, w) planes.

    Central differences over a cloud box-smoothed by ``smooth_px`` (NaN points ignored),
    oriented towards ``camera_position``; NaN where undefined.
    """
    _, h, w = planes.shape
    n = np.full((3, h, w), np.nan, np.float32)
    if h < 3 or w < 3:
        return n
    valid = np.isfinite(planes[2])
    vf = valid.astype(np.float32)
    smooth = []
    with np.errstate(invalid="ignore", divide="ignore"):
        wsum = cv2.blur(vf, (smooth_px, smooth_px)) if smooth_px > 1 else vf
        for i in range(3):
            filled = np.where(valid, planes[i], np.float32(0.0))
            s = cv2.blur(filled, (smooth_px, smooth_px)) / wsum if smooth_px > 1 else filled
            smooth.append(s)
    dx = [s[1:-1, 2:] - s[1:-1, :-2] for s in smooth]
    dy = [s[2:, 1:-1] - s[:-2, 1:-1] for s in smooth]
    nx = dx[1] * dy[2] - dx[2] * dy[1]
    ny = dx[2] * dy[0] - dx[0] * dy[2]
    nz = dx[0] * dy[1] - dx[1] * dy[0]
    cam = np.asarray(camera_position, dtype=np.float32)
    facing = nx * (cam[0] - planes[0, 1:-1, 1:-1]) + ny * (cam[1] - planes[1, 1:-1, 1:-1]) + \
        nz * (cam[2] - planes[2, 1:-1, 1:-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = np.float32(1.0) / np.sqrt(nx * nx + ny * ny + nz * nz)
    inv = np.where(facing < 0, -inv, inv)
    inv = np.where(valid[1:-1, 1:-1], inv, np.float32(np.nan))
    with np.errstate(invalid="ignore"):  # 0 * inf beside excluded pixels: NaN, undefined
        n[0, 1:-1, 1:-1] = nx * inv
        n[1, 1:-1, 1:-1] = ny * inv
        n[2, 1:-1, 1:-1] = nz * inv
    return n
