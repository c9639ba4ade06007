"""Room for the hand: which objects a top-down hand would touch at a grasp pose, and
where on the table an object can be set aside.

The Panda hand seen from above is a rectangle about 0.21 m long along the jaw axis and
0.065 m wide, starting 0.026 m above the tool centre point; open fingers reach 0.0125 m
below it. Anything taller than the hand's underside inside that rectangle is in the way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from captain_teacher.boxes import Box, rot_z
from captain_teacher.objects import FIXTURE_KINDS, kind_of
from captain_teacher.scene import SceneView

HAND_HALF_LENGTH_M = 0.106
HAND_HALF_WIDTH_M = 0.034
HAND_BOTTOM_ABOVE_TCP_M = 0.026
FINGER_BELOW_TCP_M = 0.0125


def _overlap(a: Box, b: Box) -> bool:
    """Whether two boxes' footprints overlap (separating axis test in 2-D)."""
    def corners(box: Box) -> np.ndarray:
        R = rot_z(box.yaw_rad)[:2, :2]
        s = np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]], float) * box.half_m[:2]
        return box.center_m[:2] + s @ R.T

    ca, cb = corners(a), corners(b)
    for box in (a, b):
        R = rot_z(box.yaw_rad)[:2, :2]
        for axis in (R[:, 0], R[:, 1]):
            pa, pb = ca @ axis, cb @ axis
            if pa.max() < pb.min() or pb.max() < pa.min():
                return False
    return True


def hand_box(tcp_m: np.ndarray, jaw_yaw: float) -> Box:
    """The hand's footprint at a top-down pose (z from its underside up 0.1 m)."""
    axis_angle = math.pi / 2 + jaw_yaw  # the jaw axis, from base x
    center = np.array([tcp_m[0], tcp_m[1], tcp_m[2] + HAND_BOTTOM_ABOVE_TCP_M + 0.05])
    return Box(center, np.array([HAND_HALF_LENGTH_M, HAND_HALF_WIDTH_M, 0.05]), axis_angle)


def hand_blockers(scene: SceneView, tcp_m: np.ndarray, jaw_yaw: float, skip: Iterable[str],
                  column_m: float = 0.22) -> list[str]:
    """Objects inside the column the hand sweeps above a top-down grasp: within its
    footprint, from its underside at the grasp up ``column_m`` (the hover and the hand)."""
    hand = hand_box(tcp_m, jaw_yaw)
    underside = tcp_m[2] + HAND_BOTTOM_ABOVE_TCP_M - 0.004
    out = []
    skipped = set(skip)
    for n in scene.names():
        if n in skipped:
            continue
        b = scene.box(n)
        if b.top_z_m > underside and b.bottom_z_m < underside + column_m and _overlap(hand, b):
            out.append(n)
    for b in scene.fixture_parts(skipped):
        if b.top_z_m > underside and b.bottom_z_m < underside + column_m and _overlap(hand, b):
            out.append("open drawer")
    return out


def movable(name: str) -> bool:
    """Whether the teacher may set an object aside (not a fixture or container)."""
    return kind_of(name) not in FIXTURE_KINDS and kind_of(name) not in ("plate",)


#: Horizontal distances from the base where a set-aside object stays easy to pick up again
#: with a top-down grasp from any side (nearer, the wrist turns through singular poses;
#: farther, the elbow or shoulder reach their limits), m.
COMFORTABLE_REACH_M = (0.45, 0.62)
#: Set-aside spots farther than this are not considered, m.
MAX_SET_ASIDE_REACH_M = 0.70


def free_spot(scene: SceneView, obj: str, avoid: Iterable[np.ndarray], rng: np.random.Generator,
              keep_away_m: float = 0.13, seen: Callable[[np.ndarray], bool] | None = None,
              avoid_boxes: Iterable[Box] = ()) -> np.ndarray | None:
    """A point on the table, within comfortable reach, at least ``keep_away_m`` from every
    other object's footprint and from the ``avoid`` points, preferring ``COMFORTABLE_REACH_M``;
    ``avoid_boxes`` (e.g. where an open drawer will be) are kept away from like objects;
    with ``seen``, only a point it accepts (a camera sees it, so the spot can be clicked);
    None when there is none."""
    box = scene.box(obj)
    support_z = box.bottom_z_m
    others = [scene.box(n) for n in scene.names() if n != obj] + list(avoid_boxes)
    avoid = [np.asarray(p, float)[:2] for p in avoid]
    best, best_score = None, -math.inf
    for x in np.arange(0.36, 0.70, 0.03):
        for y in np.arange(-0.30, 0.31, 0.03):
            p = np.array([x, y])
            reach = float(np.hypot(x, y))
            if reach > MAX_SET_ASIDE_REACH_M:
                continue
            room = min((max(0.0, _xy_dist(p, b)) for b in others), default=1.0)
            far = min((float(np.linalg.norm(p - a)) for a in avoid), default=1.0)
            if room < keep_away_m * 0.7 or far < keep_away_m:
                continue
            score = min(room, 0.2) + 0.3 * min(far, 0.3) - 0.2 * float(np.linalg.norm(p - box.center_m[:2])) \
                + 0.01 * float(rng.random()) - 1.5 * max(0.0, reach - COMFORTABLE_REACH_M[1]) \
                - 1.5 * max(0.0, COMFORTABLE_REACH_M[0] - reach)
            if score > best_score and (seen is None or seen(np.array([x, y, support_z]))):
                best, best_score = np.array([x, y, support_z]), score
    return best


def _xy_dist(p: np.ndarray, box: Box) -> float:
    local = rot_z(box.yaw_rad)[:2, :2].T @ (p - box.center_m[:2])
    d = np.maximum(np.abs(local) - box.half_m[:2], 0.0)
    return float(np.hypot(*d))
