"""From a detection to the object's pixels, points and geometry.

A detection made with ``granularity="point"`` carries only its pixel; the object's
region is grown around that pixel the first time a measurement needs it and cached on
the detection. ``cameras="all"`` adds the same object seen by the observation's other
cameras: its points are projected into each other camera, the pixels where that camera
sees those points (depth agrees) seed the region there, and the regions' points are
merged.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from captain_perception.core.backproject import project_points
from captain_perception.core.errors import NothingFoundError
from captain_perception.core.geometry import (
    ObjectGeometry,
    floor_next_to_bottom,
    measure_points,
    surrounding_support_z,
)
from captain_perception.core.region import RegionParams, grow_region
from captain_perception.core.store import Detection, MaskCrop, Observation

CAMERA_CHOICES = ("primary", "all")


@dataclass(frozen=True)
class ObjectView:
    """The object's pixels in one camera: ``mask`` (H, W) and its base-frame ``points`` (N, 3);
    ``floor_xy_m``: surface points seen next to its lowest pixels (``floor_next_to_bottom``)."""

    camera: str
    mask: np.ndarray
    points: np.ndarray
    support_z_m: float | None
    floor_xy_m: np.ndarray | None = None


def detection_mask(obs: Observation, det: Detection, params: RegionParams) -> np.ndarray:
    """The detection's object mask in its own camera (grown and cached for point detections)."""
    if det.mask is not None:
        return det.mask.full()
    cloud = obs.cloud(det.camera)
    region = grow_region(cloud, det.pixel_xy[0], det.pixel_xy[1], params)
    if region is None or region.pixel_count == 0:
        raise NothingFoundError(
            f"{det.detection_id}: no object region around its pixel in {det.camera} (no depth there); mark a "
            "pixel on the object's body")
    if region.on_support:
        det.info["region_on_support"] = True
    det.mask = MaskCrop.from_mask(region.mask)
    return region.mask


def object_views(obs: Observation, det: Detection, params: RegionParams, cameras: str = "primary"
                 ) -> list[ObjectView]:
    """The object's views: its own camera first, then (``cameras="all"``) the others."""
    mask = detection_mask(obs, det, params)
    cloud = obs.cloud(det.camera)
    pts = cloud.points_base[mask]
    pts = pts[np.isfinite(pts[:, 2])]
    if len(pts) == 0:
        raise NothingFoundError(f"{det.detection_id}: its region has no depth; mark the object again")
    lowest = float(np.percentile(pts[:, 2], 0.3))
    support = surrounding_support_z(cloud.points_base, mask, lowest, fallback_z_m=cloud.table_height_m())
    views = [ObjectView(det.camera, mask, pts, support,
                        floor_next_to_bottom(cloud.points_base, mask, lowest, support))]
    if cameras != "all":
        return views
    for name in obs.frames:
        if name == det.camera:
            continue
        other = _view_in_camera(obs, name, pts, params)
        if other is not None:
            views.append(other)
    return views


def _view_in_camera(obs: Observation, camera: str, pts: np.ndarray, params: RegionParams) -> ObjectView | None:
    cloud = obs.cloud(camera)
    sample = pts[:: max(1, len(pts) // 400)]
    xy, z = project_points(sample, cloud.K, cloud.T_base_camera)
    ok = np.isfinite(xy[:, 0]) & (xy[:, 0] >= 0) & (xy[:, 0] <= cloud.width - 1) & \
        (xy[:, 1] >= 0) & (xy[:, 1] <= cloud.height - 1)
    if ok.sum() < 5:
        return None
    ix = np.round(xy[ok, 0]).astype(int)
    iy = np.round(xy[ok, 1]).astype(int)
    seen = cloud.depth_m[iy, ix]
    visible = np.isfinite(seen) & (np.abs(seen - z[ok]) < np.maximum(0.01, 0.02 * z[ok]))
    if visible.sum() < 5:
        return None
    # seed at the visible projected pixel closest to the median of the visible ones
    vx, vy = ix[visible], iy[visible]
    k = int(np.argmin(np.hypot(vx - np.median(vx), vy - np.median(vy))))
    region = grow_region(cloud, vx[k], vy[k], params)
    if region is None or region.on_support or region.pixel_count < 20:
        return None
    # the grown region must mostly be made of the projected object's pixels
    hits = region.mask[vy, vx].mean()
    if hits < 0.5:
        return None
    mpts = cloud.points_base[region.mask]
    mpts = mpts[np.isfinite(mpts[:, 2])]
    # drop a region that reaches far beyond the object seen by the primary camera
    centre = np.median(pts[:, :2], axis=0)
    reach = np.percentile(np.hypot(*(pts[:, :2] - centre).T), 99) + 0.03
    if np.percentile(np.hypot(*(mpts[:, :2] - centre).T), 90) > reach:
        return None
    lowest = float(np.percentile(mpts[:, 2], 0.3))
    support = surrounding_support_z(cloud.points_base, region.mask, lowest, fallback_z_m=cloud.table_height_m())
    return ObjectView(camera, region.mask, mpts, support,
                      floor_next_to_bottom(cloud.points_base, region.mask, lowest, support))


def measure_detection(obs: Observation, det: Detection, params: RegionParams, *, shape: str = "box",
                      cameras: str = "primary") -> ObjectGeometry:
    """Geometry of a detection's object (see ``geometry.measure_points``)."""
    views = object_views(obs, det, params, cameras)
    pts = np.concatenate([v.points for v in views])
    supports = [v.support_z_m for v in views if v.support_z_m is not None]
    support = supports[0] if supports else None
    floors = [v.floor_xy_m for v in views if v.floor_xy_m is not None]
    floor = np.concatenate(floors) if floors else None
    view = None
    if len(views) == 1:
        cam = obs.cloud(views[0].camera).camera_position_base
        view = (float(cam[0]), float(cam[1]))
    return measure_points(pts, support_z_m=support, shape=shape, cameras=tuple(v.camera for v in views),
                          floor_xy_m=floor, view_xy_m=view)


def mask_outline_uv(mask: np.ndarray, max_vertices: int = 24) -> list[list[float]]:
    """Simplified outer outline of a mask as normalised ``[u, v]`` vertices."""
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    if not contours:
        return []
    c = max(contours, key=cv2.contourArea)
    eps = 0.5
    poly = cv2.approxPolyDP(c, eps, True)
    while len(poly) > max_vertices:
        eps *= 1.6
        poly = cv2.approxPolyDP(c, eps, True)
    h, w = mask.shape
    return [[round((float(p[0][0]) + 0.5) / w, 4), round((float(p[0][1]) + 0.5) / h, 4)] for p in poly]
