"""Metric geometry of one object from its observed points (robot base frame, metres).

From the points of an object's region (one or several cameras) this module estimates:

* the **footprint**: the outline of the object seen from above (the convex hull of its
  points projected on the base xy plane), fitted with a circle and with the smallest
  enclosing rectangle; an outline that fills at least ``RECTANGLE_FILL`` of its
  rectangle is a ``"rectangle"``, anything else (a disc, a mug with its handle) a
  ``"circle"``: its smallest enclosing circle; ``shape="cylinder"`` makes it a circle. An outline
  whose hull corners lie on one circle is that circle even where something hides part of
  it (a bowl standing on a plate): the circle is fitted through the corners rather than
  taken as the smallest enclosing one, which would shrink toward the visible side.
  ``radius_m`` is the radius of the smallest circle about the footprint centre that
  contains the footprint (for a circle its radius, for a rectangle half its diagonal);
* the **heights**: ``top_z_m`` (highest point), ``bottom_z_m`` (lowest point, or the
  supporting surface when the object rests on one, since the contact is not visible);
* ``center_m``: footprint centre in x, y and the middle of bottom and top in z;
* ``extents_m``: ``[length, width, height]``: length along the yaw direction, width
  across it, from the oriented bounding box (``shape="box"``, the default) or from the
  footprint's fit (``"auto"``: the circle's diameter for round outlines;
  ``"cylinder"``: always the circle); ``yaw_rad``: direction of the rectangle's long
  side in (-pi/2, pi/2] (0 for circular footprints, where it is undefined);
* **resting**: whether the object's lowest point sits on the surface around it
  (``resting_gap_m`` = lowest object point minus the height of the surrounding surface
  below it).

The bottom of a resting object is normally hidden (the camera looks down on it), so
``bottom_z_m`` is the supporting surface. One case is told apart: an object whose
bottom edge is *seen* standing clear of the surface. Its lowest points lie on the
outline of its footprint (a vertical wall down to its bottom, unlike a bowl, whose
lowest visible points lie inside the rim's outline), and the camera sees the surface
right past that edge *under* the footprint (``floor_xy_m``: surface points next to the
lowest points in the image). Its bottom is then its lowest point. When surface is
seen only at the outline of a wall's foot (a camera looking down past the object's
side), the bottom is hidden behind the object and is taken at that surface, up to a
gap of ``HIDDEN_BOTTOM_MAX_M``; ``resting`` still follows the seen gap (an object held
above a surface and seen from straight above looks the same).

A tall object seen from the side shows only its near half: ``view_xy_m`` (the camera's
position) lets the footprint be completed by mirroring the seen half about its widest
section across the line of sight, when the outline reaches far less behind that section
than in front of it (``HIDDEN_BACK_RATIO``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from captain_perception.core.errors import NothingFoundError

SHAPES = ("box", "cylinder", "auto")
#: Largest gap (m) between an object's lowest point and the surface under it for the
#: object to count as resting on that surface.
RESTING_TOLERANCE_M = 0.015
#: Fewest 3-D points for a measurement.
MIN_POINTS = 20
#: Height (m) above the lowest point of the band of points that make an object's bottom edge.
BOTTOM_BAND_M = 0.004
#: Largest median distance (m) of the bottom edge's points from the footprint's outline
#: for the edge to be the foot of a vertical wall.
WALL_OUTLINE_M = 0.003
#: How far (m) inside the footprint's outline a surface point must be seen to show a gap
#: under the object, and how many such points prove it.
UNDER_DEPTH_M = 0.002
UNDER_MIN_POINTS = 5
UNDER_MIN_SHARE = 0.25
UNDER_BEYOND_EDGE_M = 0.005
#: Largest gap (m) down to the surface that an object's own walls may hide from the
#: camera (seen from above, its bottom edge is behind it).
HIDDEN_BOTTOM_MAX_M = 0.045
#: An outline that reaches behind its widest section (seen from the camera) less than this
#: share of how far it reaches in front of it has a hidden back.
HIDDEN_BACK_RATIO = 0.5
#: Share of an object's height, from its lowest point, whose points decide whether its back
#: is hidden (a bottle's narrower shoulder, neck and cap above are left out).
BODY_SHARE = 0.6


@dataclass(frozen=True)
class Footprint:
    """The object's outline seen from above (see the module docstring).

    Attributes:
        shape: ``"circle"`` or ``"rectangle"``.
        radius_m: radius of the smallest circle about ``center_xy_m`` containing the footprint.
        center_xy_m: footprint centre in the base frame.
        circle_radius_m: radius of the fitted circle.
        rectangle_size_m: ``(length, width)`` of the smallest enclosing rectangle.
        yaw_rad: direction of the rectangle's long side, (-pi/2, pi/2].
        area_m2: area of the observed outline.
    """

    shape: str
    radius_m: float
    center_xy_m: tuple[float, float]
    circle_radius_m: float
    rectangle_size_m: tuple[float, float]
    yaw_rad: float
    area_m2: float

    def to_dict(self) -> dict[str, Any]:
        """Plain-value dict for results."""
        return {
            "shape": self.shape,
            "radius_m": round(self.radius_m, 5),
            "center_xy_m": [round(v, 5) for v in self.center_xy_m],
            "circle_radius_m": round(self.circle_radius_m, 5),
            "rectangle_size_m": [round(v, 5) for v in self.rectangle_size_m],
            "yaw_rad": round(self.yaw_rad, 4),
            "area_m2": round(self.area_m2, 6),
        }


@dataclass(frozen=True)
class ObjectGeometry:
    """Measured geometry of one object (see the module docstring), base frame, metres."""

    center_m: tuple[float, float, float]
    top_z_m: float
    bottom_z_m: float
    lowest_point_z_m: float
    extents_m: tuple[float, float, float]
    yaw_rad: float
    footprint: Footprint
    support_z_m: float | None
    resting_gap_m: float | None
    point_count: int
    cameras: tuple[str, ...] = field(default_factory=tuple)

    @property
    def center_xy_m(self) -> tuple[float, float]:
        """Footprint centre (x, y)."""
        return self.center_m[0], self.center_m[1]

    @property
    def resting(self) -> bool | None:
        """True when the lowest point sits on the surface around the object (None if unknown)."""
        if self.resting_gap_m is None:
            return None
        return bool(self.resting_gap_m <= RESTING_TOLERANCE_M)

    def to_dict(self) -> dict[str, Any]:
        """Plain-value dict for results (the policy-facing ``object`` / ``destination``)."""
        return {
            "center_m": [round(v, 5) for v in self.center_m],
            "center_xy_m": [round(v, 5) for v in self.center_xy_m],
            "top_z_m": round(self.top_z_m, 5),
            "bottom_z_m": round(self.bottom_z_m, 5),
            "lowest_point_z_m": round(self.lowest_point_z_m, 5),
            "extents_m": [round(v, 5) for v in self.extents_m],
            "yaw_rad": round(self.yaw_rad, 4),
            "footprint": self.footprint.to_dict(),
            "support_z_m": None if self.support_z_m is None else round(self.support_z_m, 5),
            "resting_gap_m": None if self.resting_gap_m is None else round(self.resting_gap_m, 5),
            "resting": self.resting,
            "point_count": self.point_count,
            "cameras": list(self.cameras),
        }


def measure_points(points_base: np.ndarray, *, support_z_m: float | None = None, shape: str = "box",
                   cameras: tuple[str, ...] = (), floor_xy_m: np.ndarray | None = None,
                   view_xy_m: tuple[float, float] | None = None) -> ObjectGeometry:
    """Geometry of an object from its base-frame points (N, 3) (see the module docstring).

    Args:
        points_base: the object's observed points, metres; NaN rows are ignored.
        support_z_m: height of the surface around and below the object, or None.
        shape: ``"box"`` (oriented-box extents; footprint shape from the outline),
            ``"auto"`` (extents from the footprint's fit) or ``"cylinder"`` (circle).
        cameras: names of the cameras the points came from (reported back).
        floor_xy_m: (M, 2) base-frame x, y of supporting-surface points seen next to the
            object's lowest points (``floor_next_to_bottom``), or None; a gap seen under
            a wall keeps the bottom at the lowest point (see the module docstring).
        view_xy_m: base-frame x, y of the camera that saw all the points, or None;
            completes the footprint of a tall object whose back is hidden (module docstring).

    Raises:
        NothingFoundError: fewer than ``MIN_POINTS`` valid points.
    """
    pts = np.asarray(points_base, dtype=np.float64).reshape(-1, 3)
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    if len(pts) < MIN_POINTS:
        raise NothingFoundError(f"only {len(pts)} 3-D points on the object (need {MIN_POINTS}); "
                                "mark a pixel nearer the middle of the object or use another camera")
    z = pts[:, 2]
    top = float(np.percentile(z, 99.7))
    lowest = float(np.percentile(z, 0.3))
    xy = pts[:, :2]
    if view_xy_m is not None:
        # a tall object: its top does not show its back; the body below a narrower top (a
        # bottle's shoulder, neck and cap) decides whether the back is hidden
        body = pts[z <= lowest + BODY_SHARE * (top - lowest)]
        xy = complete_hidden_back(xy, view_xy_m, body[:, :2] if len(body) >= MIN_POINTS else None,
                                  min_height_m=top - lowest)
    footprint = fit_footprint(xy, shape)

    gap = None if support_z_m is None else lowest - float(support_z_m)
    bottom = lowest
    if gap is not None and gap > 0:
        seen = _bottom_evidence(pts, lowest, floor_xy_m) if gap <= HIDDEN_BOTTOM_MAX_M else ""
        if (gap <= RESTING_TOLERANCE_M and seen != "gap") or seen == "hidden":
            bottom = float(support_z_m)
    height = max(top - bottom, 0.0)
    cx, cy = footprint.center_xy_m
    if footprint.shape == "circle" and shape != "box":
        length = width = 2.0 * footprint.circle_radius_m
    else:
        length, width = footprint.rectangle_size_m
    yaw = 0.0 if footprint.shape == "circle" else footprint.yaw_rad
    return ObjectGeometry(
        center_m=(cx, cy, 0.5 * (top + bottom)),
        top_z_m=top,
        bottom_z_m=bottom,
        lowest_point_z_m=lowest,
        extents_m=(float(length), float(width), float(height)),
        yaw_rad=float(yaw),
        footprint=footprint,
        support_z_m=None if support_z_m is None else float(support_z_m),
        resting_gap_m=None if gap is None else float(gap),
        point_count=len(pts),
        cameras=tuple(cameras),
    )


def complete_hidden_back(xy: np.ndarray, view_xy_m: tuple[float, float], body_xy: np.ndarray | None = None,
                         min_height_m: float = math.inf) -> np.ndarray:
    """The footprint points (N, 2) with the hidden back half added when it is hidden.

    Along the horizontal line of sight from ``view_xy_m``, the widest section of the
    outline (the mean depth of its two outermost points across the line of sight) is where
    the camera's view grazes the object's sides. A body seen whole reaches about as far
    behind that section as in front of it; one whose back reaches less than
    ``HIDDEN_BACK_RATIO`` of its front is completed with the mirror image of the seen points
    about the section. ``body_xy`` (default: ``xy``) are the points that decide, and only
    an object taller (``min_height_m``, its height) than the outline is wide across the
    line of sight is completed (a lower one shows its back from above). Otherwise the
    points are returned unchanged.
    """
    xy = np.asarray(xy, dtype=np.float64)
    body = xy if body_xy is None else np.asarray(body_xy, dtype=np.float64)
    centre = body.mean(axis=0)
    d = centre - np.asarray(view_xy_m, dtype=np.float64)
    norm = float(np.hypot(*d))
    if norm < 1e-6 or len(xy) < MIN_POINTS:
        return xy
    d /= norm
    e = np.array([-d[1], d[0]])
    along = (body - centre) @ d
    across = (body - centre) @ e
    lo, hi = int(np.argmin(across)), int(np.argmax(across))
    if across[hi] - across[lo] > min_height_m:
        return xy
    section = 0.5 * (along[lo] + along[hi])
    front = section - float(np.percentile(along, 0.5))
    back = float(np.percentile(along, 99.5)) - section
    if front <= 0.0 or back >= HIDDEN_BACK_RATIO * front:
        return xy
    seen = body[along < section]
    mirrored = seen + np.outer(2.0 * (section - along[along < section]), d)
    return np.concatenate([xy, mirrored])


def _bottom_evidence(pts: np.ndarray, lowest: float, floor_xy_m: np.ndarray | None) -> str:
    """What the surface seen next to the object's lowest points says about its bottom:
    ``"gap"`` (the bottom edge is seen standing clear of the surface: surface seen under
    the footprint, see the module docstring), ``"hidden"`` (surface seen only at and
    around the outline: the bottom edge itself is hidden behind the object), or ``""``
    (no surface seen next to the lowest points)."""
    if floor_xy_m is None or len(floor_xy_m) < UNDER_MIN_POINTS:
        return ""
    xy = pts[:, :2]
    origin = xy.mean(axis=0)
    hull = cv2.convexHull(((xy - origin) * 1000.0).astype(np.float32))
    band = xy[pts[:, 2] <= lowest + BOTTOM_BAND_M]
    if len(band) < UNDER_MIN_POINTS:
        return ""

    def inside_mm(p: np.ndarray) -> np.ndarray:
        local = (p - origin) * 1000.0
        return np.array([cv2.pointPolygonTest(hull, (float(a), float(b)), True) for a, b in local])

    band = band[:: max(1, len(band) // 200)]
    edge = float(np.median(inside_mm(band)))
    floor = np.asarray(floor_xy_m, dtype=np.float64).reshape(-1, 2)
    floor = floor[:: max(1, len(floor) // 200)]
    # the foot of a wall: surface seen inside the outline at all; a bottom edge inside the
    # outline (a mug's or a basket's foot): surface seen well beyond that edge
    depth = UNDER_DEPTH_M if edge <= WALL_OUTLINE_M * 1000.0 else edge * 1e-3 + UNDER_BEYOND_EDGE_M
    under = inside_mm(floor) > depth * 1000.0
    if int(under.sum()) >= UNDER_MIN_POINTS and float(under.mean()) >= UNDER_MIN_SHARE:
        return "gap"
    return "hidden" if edge <= WALL_OUTLINE_M * 1000.0 else ""


def fit_footprint(xy: np.ndarray, shape: str = "box", outline_rule: str = "fill") -> Footprint:
    """Fit a circle and a rectangle to the outline of points (N, 2), metres.

    ``outline_rule`` picks between them when neither ``shape`` nor a hidden rim decides:
    ``"fill"`` (measurement) calls an outline a rectangle only when it fills
    ``RECTANGLE_FILL`` of its enclosing rectangle; ``"area"`` (the classical segmenter's
    round/boxy cue for text grounding) compares how well each shape's area matches the hull,
    so an irregular fixture such as a stove with knobs stays boxy.
    """
    if outline_rule not in ("fill", "area"):
        raise ValueError(f"outline_rule must be 'fill' or 'area', not {outline_rule!r}")
    xy = np.asarray(xy, dtype=np.float64)
    if len(xy) > 20000:
        xy = xy[np.random.default_rng(0).choice(len(xy), 20000, replace=False)]
    origin = xy.mean(axis=0)
    local = ((xy - origin) * 1000.0).astype(np.float32)  # millimetres keep cv2 well conditioned
    hull = cv2.convexHull(local)
    area = float(cv2.contourArea(hull)) * 1e-6
    (rcx, rcy), (rw, rh), rangle = cv2.minAreaRect(hull)
    (ccx, ccy), crad = cv2.minEnclosingCircle(hull)
    crad_m = float(crad) * 1e-3
    length, width = (rw, rh) if rw >= rh else (rh, rw)
    yaw = math.radians(rangle) if rw >= rh else math.radians(rangle + 90.0)
    yaw = _wrap_half_pi(yaw)
    rect_area = max(rw * rh * 1e-6, 1e-12)
    circ_area = max(math.pi * crad_m ** 2, 1e-12)
    rim = _rim_circle(hull.reshape(-1, 2).astype(np.float64), float(crad))
    if rim is not None:  # an outline on one circle with one stretch hidden
        (ccx, ccy), crad = rim
        crad_m = float(crad) * 1e-3
    if shape == "cylinder" or rim is not None:
        kind = "circle"
    else:
        # a rectangle fills its smallest enclosing rectangle; a disc fills pi/4 of it, and
        # a round body with a handle or spout less still: anything that does not fill its
        # rectangle is measured by its smallest enclosing circle
        kind = "rectangle" if area / rect_area >= RECTANGLE_FILL else "circle"
        if outline_rule == "area":
            # a disc fills ~100 % of its circle and pi/4 of its rectangle; a rectangle fills
            # 100 % of its rectangle and at most 2/pi of its circle
            kind = "circle" if area / circ_area > area / rect_area * 0.92 else "rectangle"
    if kind == "circle":
        centre = np.array([ccx, ccy]) * 1e-3 + origin
        radius = crad_m
    else:
        centre = np.array([rcx, rcy]) * 1e-3 + origin
        radius = 0.5e-3 * math.hypot(rw, rh)
    return Footprint(
        shape=kind,
        radius_m=float(radius),
        center_xy_m=(float(centre[0]), float(centre[1])),
        circle_radius_m=crad_m,
        rectangle_size_m=(float(length) * 1e-3, float(width) * 1e-3),
        yaw_rad=float(yaw),
        area_m2=area,
    )


#: Smallest share of its enclosing rectangle an outline must fill to be a rectangle.
RECTANGLE_FILL = 0.88
#: Largest RMS distance (mm) of the hull's corners from the rim circle, and as a share of
#: its radius, for an outline to count as one circle.
RIM_RMS_MM = 1.5
RIM_RMS_FRACTION = 0.03
#: Smallest arc (degrees) of the rim that must be seen for the rim fit to be trusted.
RIM_MIN_ARC_DEG = 120.0
#: How deep inside the rim (in multiples of the RMS tolerance) a stretch of the outline must
#: reach to count as hidden rim rather than the ragged edge of a mask.
RIM_STRETCH_DEPTH = 3.0


def _rim_circle(hull_mm: np.ndarray, enclosing_radius_mm: float) -> tuple[tuple[float, float], float] | None:
    """The circle through a round outline's hull corners (millimetres), or None.

    Something standing on a plate, or the plate's own far side, hides part of its outline;
    the smallest enclosing circle of what remains is then too small and shifted toward the
    camera. The hull corners of what remains lie on the rim, except where the hidden
    stretch begins and ends, where they lie inside it; so a least-squares circle is fitted
    through the corners, dropping those well inside and refitting. It is accepted only
    when no corner lies outside it, the kept corners lie on it (RMS within ``RIM_RMS_MM``
    or ``RIM_RMS_FRACTION`` of its radius), the outline leaves the rim along exactly one
    stretch (a rectangle leaves it along all four sides; a whole outline never, and its
    smallest enclosing circle is then the rim), and the kept corners span at least
    ``RIM_MIN_ARC_DEG`` of it.
    """
    if len(hull_mm) < 8:
        return None
    keep = np.ones(len(hull_mm), dtype=bool)
    for _ in range(4):
        v = hull_mm[keep]
        a = np.column_stack([2.0 * v[:, 0], 2.0 * v[:, 1], np.ones(len(v))])
        (cx, cy, c), *_ = np.linalg.lstsq(a, (v ** 2).sum(axis=1), rcond=None)
        r2 = c + cx * cx + cy * cy
        if not np.isfinite(r2) or r2 <= 0.0:
            return None
        r = math.sqrt(r2)
        tol = max(RIM_RMS_MM, RIM_RMS_FRACTION * r)
        inside = r - np.linalg.norm(hull_mm - (cx, cy), axis=1) > 2.0 * tol
        if np.array_equal(keep, ~inside):
            break
        keep = ~inside
        if keep.sum() < max(8, 0.6 * len(hull_mm)):
            return None
    centre = np.array([cx, cy])
    dist = np.linalg.norm(hull_mm - centre, axis=1)
    if not 0.97 * enclosing_radius_mm <= r <= 1.5 * enclosing_radius_mm or np.any(dist - r > 2.0 * tol):
        return None
    if math.sqrt(float(np.mean((dist[keep] - r) ** 2))) > tol:
        return None
    # walk the outline (corners and the middles of the edges between them) and count the
    # stretches that run inside the rim, ignoring those no deeper than the outline's noise;
    # none: the whole outline is seen and its enclosing circle is the rim already
    mid = 0.5 * (hull_mm + np.roll(hull_mm, -1, axis=0))
    depth = np.empty(2 * len(hull_mm))
    depth[0::2] = r - dist
    depth[1::2] = r - np.linalg.norm(mid - centre, axis=1)
    if _stretches_deeper(depth, 2.0 * tol, RIM_STRETCH_DEPTH * tol) != 1:
        return None
    ang = np.sort(np.arctan2(hull_mm[keep, 1] - cy, hull_mm[keep, 0] - cx))
    gaps = np.diff(np.concatenate([ang, ang[:1] + 2.0 * math.pi]))
    if 360.0 - math.degrees(float(gaps.max())) < RIM_MIN_ARC_DEG:
        return None
    return (float(cx), float(cy)), r


def _stretches_deeper(depth: np.ndarray, enter: float, deepest: float) -> int:
    """Runs of a closed sequence where ``depth > enter`` that reach beyond ``deepest``."""
    inside = depth > enter
    if inside.all():
        return 1 if depth.max() > deepest else 0
    start = int(np.argmin(inside))  # begin the walk outside a run
    count, run_max = 0, -np.inf
    for k in range(len(depth) + 1):
        i = (start + k) % len(depth)
        if inside[i]:
            run_max = max(run_max, float(depth[i]))
        elif run_max > -np.inf:
            count += run_max > deepest
            run_max = -np.inf
    return count


def _wrap_half_pi(angle: float) -> float:
    """Wrap an undirected axis angle into (-pi/2, pi/2]."""
    a = math.fmod(angle, math.pi)
    if a <= -math.pi / 2:
        a += math.pi
    elif a > math.pi / 2:
        a -= math.pi
    return a


def surrounding_support_z(points_base: np.ndarray, mask: np.ndarray, lowest_z_m: float,
                          ring_px: int = 8, fallback_z_m: float | None = None) -> float | None:
    """Height of the surface around and below an object, from a ring of pixels around its mask.

    Takes the ring pixels that lie below the object's lowest point (plus 1 cm) and returns
    a high percentile of their heights: the top of whatever the object stands on.
    ``fallback_z_m`` (e.g. the table height) is returned when the ring has no such pixels.
    """
    m = mask.astype(np.uint8)
    ys, xs = np.nonzero(m)
    if len(xs) == 0:
        return fallback_z_m
    h, w = mask.shape
    y0, y1 = max(0, ys.min() - ring_px - 1), min(h, ys.max() + ring_px + 2)
    x0, x1 = max(0, xs.min() - ring_px - 1), min(w, xs.max() + ring_px + 2)
    crop = m[y0:y1, x0:x1]
    ring = cv2.dilate(crop, np.ones((2 * ring_px + 1, 2 * ring_px + 1), np.uint8)).astype(bool) & ~crop.astype(bool)
    z = points_base[y0:y1, x0:x1, 2][ring]
    z = z[np.isfinite(z)]
    z = z[z < lowest_z_m + 0.01]
    if len(z) < 10:
        return fallback_z_m
    return float(np.percentile(z, 90))


def floor_next_to_bottom(points_base: np.ndarray, mask: np.ndarray, lowest_z_m: float, support_z_m: float | None,
                         ring_px: int = 3) -> np.ndarray | None:
    """Base-frame x, y (M, 2) of supporting-surface pixels next to the object's lowest pixels.

    The lowest pixels are the mask's points within ``BOTTOM_BAND_M`` of ``lowest_z_m``;
    their neighbours within ``ring_px`` outside the mask that lie on the support
    (within ``BOTTOM_BAND_M`` of ``support_z_m``) are returned (None without a support).
    """
    if support_z_m is None:
        return None
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    h, w = mask.shape
    y0, y1 = max(0, ys.min() - ring_px - 1), min(h, ys.max() + ring_px + 2)
    x0, x1 = max(0, xs.min() - ring_px - 1), min(w, xs.max() + ring_px + 2)
    crop = mask[y0:y1, x0:x1]
    P = points_base[y0:y1, x0:x1]
    z = P[..., 2]
    low = crop & np.isfinite(z) & (z <= lowest_z_m + BOTTOM_BAND_M)
    if not low.any():
        return None
    k = 2 * ring_px + 1
    near = cv2.dilate(low.astype(np.uint8), np.ones((k, k), np.uint8)).astype(bool) & ~crop
    near &= np.isfinite(z) & (np.abs(z - float(support_z_m)) <= BOTTOM_BAND_M)
    return P[near][:, :2].astype(np.float64)
