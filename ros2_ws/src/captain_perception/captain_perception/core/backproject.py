"""Pixels to metric points and back: normalised coordinates, projection, robust depth.

Conventions:

* Normalised image coordinates ``(u, v)`` are in [0, 1]: ``u`` from the left edge of
  the image, ``v`` from the top edge (the policy API's convention).
* Pixel coordinates ``(x, y)`` follow OpenCV: the centre of pixel column ``i`` is at
  ``x = i``, so the left image edge is ``x = -0.5`` and ``x = u * width - 0.5``.
* Camera coordinates use the OpenCV optical frame (x right, y down, z forward), metres;
  depth is the z coordinate (metres along the optical axis).
* ``T_base_camera`` maps camera coordinates to the robot base frame (4x4, metres).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Half-sizes (pixels) of the windows tried, in order, when looking for depth around a pixel.
DEPTH_WINDOWS_PX = (3, 6, 10)


def normalised_to_pixel(u: float, v: float, width: int, height: int) -> tuple[float, float]:
    """Normalised ``(u, v)`` in [0, 1] to pixel coordinates ``(x, y)`` (OpenCV centres)."""
    return float(u) * width - 0.5, float(v) * height - 0.5


def pixel_to_normalised(x: float, y: float, width: int, height: int) -> tuple[float, float]:
    """Pixel coordinates ``(x, y)`` to normalised ``(u, v)`` in [0, 1]."""
    return (float(x) + 0.5) / width, (float(y) + 0.5) / height


def backproject(x: np.ndarray | float, y: np.ndarray | float, depth_m: np.ndarray | float,
                K: np.ndarray) -> np.ndarray:
    """Camera-frame points (..., 3) in metres of pixels ``(x, y)`` at metric depth ``depth_m``."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    z = np.asarray(depth_m, dtype=float)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    return np.stack([(x - cx) / fx * z, (y - cy) / fy * z, z], axis=-1)


def transform_points(T_a_b: np.ndarray, points_b: np.ndarray) -> np.ndarray:
    """Apply a 4x4 transform to points (..., 3) given in frame b; returns them in frame a."""
    pts = np.asarray(points_b, dtype=float)
    return pts @ T_a_b[:3, :3].T + T_a_b[:3, 3]


def project_points(points_base: np.ndarray, K: np.ndarray, T_base_camera: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Project base-frame points (N, 3) into a camera.

    Returns:
        ``(xy, depth_m)``: pixel coordinates (N, 2) (OpenCV centres) and the depth of each
        point along the optical axis (N,), metres; points behind the camera get NaN pixels.
    """
    T_camera_base = np.linalg.inv(T_base_camera)
    pc = transform_points(T_camera_base, np.atleast_2d(points_base))
    z = pc[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = K[0, 0] * pc[:, 0] / z + K[0, 2]
        y = K[1, 1] * pc[:, 1] / z + K[1, 2]
    behind = ~(z > 1e-6)
    x[behind] = np.nan
    y[behind] = np.nan
    return np.stack([x, y], axis=1), z


@dataclass(frozen=True)
class SurfaceDepth:
    """The depth found for one pixel.

    Attributes:
        depth_m: depth along the optical axis at the requested pixel, metres.
        window_px: half-size of the window the estimate came from.
        support_px: number of depth pixels of the chosen surface that were used.
        on_edge: the window straddled a depth discontinuity (several surfaces).
        centre_valid: the requested pixel itself had a valid depth.
        method: ``"plane_fit"`` (local plane through the surface's pixels) or ``"median"``.
    """

    depth_m: float
    window_px: int
    support_px: int
    on_edge: bool
    centre_valid: bool
    method: str


def depth_gap_m(depth_m: np.ndarray | float) -> np.ndarray | float:
    """Depth difference that separates two surfaces at this depth (metres)."""
    return np.maximum(0.006, 0.02 * np.asarray(depth_m))


def robust_depth(depth_m: np.ndarray, K: np.ndarray, x: float, y: float) -> SurfaceDepth | None:
    """Depth of the surface seen at pixel ``(x, y)``, robust to holes and edges.

    Looks at a small window around the pixel and splits its valid depths into surfaces
    at depth gaps. The surface of the pixel itself is used when its depth is valid;
    otherwise (a hole) the surface whose pixels come closest to it, the nearer one on
    ties. The depth at the exact sub-pixel position comes from a plane fitted to that
    surface's pixels (inverse depth is linear in pixel coordinates on a plane), or from
    their median when the fit is poorly conditioned. Returns None when no window up to
    ``DEPTH_WINDOWS_PX[-1]`` pixels holds any valid depth.
    """
    del K  # the estimate is made in image space; K is kept for a uniform signature
    h, w = depth_m.shape
    ix = int(np.clip(round(x), 0, w - 1))
    iy = int(np.clip(round(y), 0, h - 1))
    centre = float(depth_m[iy, ix])
    centre_valid = bool(np.isfinite(centre) and centre > 0)
    for r in DEPTH_WINDOWS_PX:
        x0, x1 = max(0, ix - r), min(w, ix + r + 1)
        y0, y1 = max(0, iy - r), min(h, iy + r + 1)
        win = depth_m[y0:y1, x0:x1]
        ok = np.isfinite(win) & (win > 0)
        if ok.sum() < 1:
            continue
        ys, xs = np.nonzero(ok)
        d = win[ok].astype(float)
        px = xs + x0
        py = ys + y0
        labels, n_surfaces = _split_surfaces(d)
        if centre_valid:
            chosen = labels[np.argmin(np.abs(d - centre))]
        else:
            dist = np.hypot(px - x, py - y)
            best = None
            for k in range(n_surfaces):
                sel = labels == k
                key = (round(float(dist[sel].min()), 1), float(np.median(d[sel])))
                if best is None or key < best[0]:
                    best = (key, k)
            chosen = best[1]
        sel = labels == chosen
        ds, xs_, ys_ = d[sel], px[sel], py[sel]
        depth, method = _fit_depth(ds, xs_, ys_, x, y)
        return SurfaceDepth(depth_m=depth, window_px=r, support_px=int(sel.sum()),
                            on_edge=n_surfaces > 1, centre_valid=centre_valid, method=method)
    return None


def _split_surfaces(d: np.ndarray) -> tuple[np.ndarray, int]:
    """Label depths by surface: sorted depths are split where consecutive values jump."""
    order = np.argsort(d)
    ds = d[order]
    jumps = np.diff(ds) > depth_gap_m(ds[:-1])
    sorted_labels = np.concatenate([[0], np.cumsum(jumps)])
    labels = np.empty_like(sorted_labels)
    labels[order] = sorted_labels
    return labels, int(sorted_labels[-1]) + 1


def _fit_depth(d: np.ndarray, px: np.ndarray, py: np.ndarray, x: float, y: float) -> tuple[float, str]:
    """Depth at (x, y) from a plane through the surface pixels (fit in inverse depth)."""
    if len(d) >= 6 and np.ptp(px) >= 2 and np.ptp(py) >= 2:
        A = np.stack([np.ones_like(d), px - x, py - y], axis=1)
        inv = 1.0 / d
        coef, *_ = np.linalg.lstsq(A, inv, rcond=None)
        resid = np.abs(A @ coef - inv)
        keep = resid <= max(3.0 * np.median(resid), 1e-6)
        if keep.sum() >= 6 and keep.sum() < len(d):
            coef, *_ = np.linalg.lstsq(A[keep], inv[keep], rcond=None)
        if coef[0] > 0:
            depth = 1.0 / coef[0]
            lo, hi = d.min(), d.max()
            margin = depth_gap_m(hi)
            if lo - margin <= depth <= hi + margin:
                return float(depth), "plane_fit"
    near = np.argsort(np.hypot(px - x, py - y))[: max(1, min(9, len(d)))]
    return float(np.median(d[near])), "median"
