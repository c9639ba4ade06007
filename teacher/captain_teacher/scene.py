"""The teacher's privileged view of the scene: the simulator snapshot in the robot base
frame, approximate object boxes, camera models and the choice of the pixel to click.

Everything here runs on the host. The snapshot never reaches the session: the teacher
only turns it into decisions (which object, which side, which pixel) that it then writes
as code.

Frames: the snapshot is in the simulator world frame; ``SceneView`` converts it into the
robot base frame with ``T_world_base`` (x forward, y left, z up), metres. Pixels are
normalised ``(u, v)`` in [0, 1], u from the left edge, v from the top (the API's
convention); camera poses ``T_base_camera`` are OpenCV optical frames (x right, y down,
z forward).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from captain_harness.core.geometry import quat_to_matrix
from captain_teacher.boxes import Box, open_box, rot_z, yaw_of
from captain_teacher.fixtures import drawers, open_drawer_boxes
from captain_teacher.objects import kind_of

#: Approximate boxes per kind: (centre offset from the body origin in the body frame,
#: half extents in the body frame, whether the body's yaw turns the box). Kinds whose
#: bodies LIBERO stores tilted (cans, bottles, cartons) use world-aligned boxes.
SHAPES: dict[str, tuple[tuple[float, float, float], tuple[float, float, float], bool]] = {
    "bowl": ((0.0, 0.0, 0.027), (0.054, 0.054, 0.026), True),
    "ramekin": ((0.0, 0.0, 0.022), (0.045, 0.045, 0.021), True),
    "plate": ((0.0, 0.0, 0.007), (0.069, 0.069, 0.009), True),
    "flat_box": ((0.0, 0.0, 0.0), (0.041, 0.022, 0.012), True),
    "can": ((0.0, 0.0, 0.0), (0.032, 0.032, 0.038), False),
    "bottle": ((0.0, 0.0, 0.0), (0.02, 0.028, 0.073), False),
    "carton": ((0.0, 0.0, -0.004), (0.027, 0.027, 0.066), False),
    "wine_bottle": ((0.0, 0.0, 0.08), (0.022, 0.022, 0.078), True),
    "moka_pot": ((0.0, 0.017, 0.01), (0.041, 0.074, 0.076), True),
    "mug": ((0.0, 0.0, 0.055), (0.066, 0.05, 0.055), True),
    "book": ((0.0, 0.0, 0.068), (0.0145, 0.055, 0.068), True),  # upright: thin along its body x
    "basket": ((0.0, 0.0, 0.075), (0.085, 0.079, 0.071), True),
    "drawer_cabinet": ((0.004, 0.0, 0.114), (0.127, 0.111, 0.109), True),
    "stove": ((0.096, 0.0, 0.015), (0.149, 0.095, 0.035), True),
    "microwave": ((0.0, 0.0115, 0.094), (0.172, 0.0995, 0.094), True),  # the body; its door swings in front
    "wine_rack": ((0.0, 0.003, 0.163), (0.134, 0.127, 0.165), True),
    "caddy": ((0.0, 0.0, 0.085), (0.075, 0.217, 0.083), True),
    "cube": ((0.0, 0.0, 0.0), (0.02, 0.02, 0.02), True),  # the tabletop's cubes: origin at the centre
}
#: Boxes of single objects whose geometry differs from their kind's LIBERO model: the
#: MuJoCo tabletop names its objects without an index (``plate``, ``red_cube``), and its
#: plate is a flat cylinder of radius 8 cm with its origin at its centre.
SHAPES_BY_NAME: dict[str, tuple[tuple[float, float, float], tuple[float, float, float], bool]] = {
    "plate": ((0.0, 0.0, 0.0), (0.08, 0.08, 0.006), True),
}
DEFAULT_SHAPE = ((0.0, 0.0, 0.03), (0.04, 0.04, 0.03), True)
#: An object whose own z axis leans more than this from the vertical lies tilted, degrees.
TILTED_DEG = 25.0
#: A can, bottle or carton whose upright axis leans more than this lies on its side, degrees.
LYING_DEG = 45.0
#: Things seen as several boxes when they may hide something (centre offset from the
#: body's origin and half sizes, in the body's frame, metres): the stove is a low plate
#: with a knob's stand at its back, not the box of ``SHAPES`` that spans both (an object on
#: its plate would be inside that box, hidden from every camera); a moka pot is its body,
#: its spout and its handle (the box of ``SHAPES`` spans all three and hides the stove's
#: plate between two pots from a camera beside them). From the simulator's model.
PART_BOXES: dict[str, tuple[tuple[tuple[float, float, float], tuple[float, float, float]], ...]] = {
    "stove": (((0.158, 0.0, 0.0), (0.087, 0.095, 0.0255)), ((0.0, 0.0, 0.018), (0.05, 0.03, 0.038))),
    "moka_pot": (((0.0, 0.0, 0.002), (0.04, 0.04, 0.069)), ((0.0, -0.048, 0.045), (0.008, 0.012, 0.02)),
                 ((0.0, 0.06, 0.03), (0.009, 0.02, 0.045))),
}
#: Kinds clicked on the wall of their body around the origin (radius, m), below a lid whose
#: knob is a region of its own, clear of the handle and spout their box includes.
BODY_CLICK_KINDS: dict[str, float] = {"moka_pot": 0.03}
#: Kinds whose inside a click should avoid.
HOLLOW_KINDS = frozenset({"bowl", "ramekin", "mug", "basket"})
#: Fixtures open at the top: what lies in them hides behind their walls only (``occluders``).
OPEN_TOP_KINDS = frozenset({"caddy"})
#: The wrist camera's name.
WRIST_CAMERA = "robot0_eye_in_hand"
#: The wrist camera is fixed to the hand, and the fingers and the hand fill its image below
#: this share of the image height in every pose (the fingertips reach up to about 0.76): a
#: click there lands on the robot, which perception refuses.
WRIST_HAND_FROM_V = 0.74


@dataclass(frozen=True)
class CameraModel:
    """A pinhole camera: intrinsics ``K`` (pixels) and pose ``T_base_camera`` (optical frame)."""

    name: str
    K: np.ndarray
    T_base_camera: np.ndarray
    width_px: int = 512
    height_px: int = 512

    @property
    def position_m(self) -> np.ndarray:
        """Optical centre in the base frame, m."""
        return self.T_base_camera[:3, 3]

    def in_view(self, u: float, v: float, margin: float) -> bool:
        """Whether normalised image coordinates ``(u, v)`` lie ``margin`` inside the image
        and, for the wrist camera, above the hand (``WRIST_HAND_FROM_V``)."""
        if not (np.isfinite(u) and np.isfinite(v) and margin <= u <= 1 - margin and margin <= v <= 1 - margin):
            return False
        return self.name != WRIST_CAMERA or v <= WRIST_HAND_FROM_V

    def project(self, points_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised pixel coordinates (N, 2) and depths (N,) of base-frame points (N, 3);
        points behind the camera get NaN coordinates."""
        p = np.atleast_2d(np.asarray(points_m, dtype=float))
        T = np.linalg.inv(self.T_base_camera)
        pc = p @ T[:3, :3].T + T[:3, 3]
        z = pc[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            x = self.K[0, 0] * pc[:, 0] / z + self.K[0, 2]
            y = self.K[1, 1] * pc[:, 1] / z + self.K[1, 2]
        uv = np.stack([(x + 0.5) / self.width_px, (y + 0.5) / self.height_px], axis=1)
        uv[z <= 1e-6] = np.nan
        return uv, z




@dataclass
class SceneView:
    """The snapshot in the base frame.

    Attributes:
        snapshot: the simulator snapshot (world frame).
        T_world_base: 4x4 pose of the robot base in the world.
        held_names: objects the teacher knows to be in the gripper (moved with it).
    """

    snapshot: Any
    T_world_base: np.ndarray
    held_names: tuple[str, ...] = ()
    _boxes: dict[str, Box] = field(default_factory=dict)

    @property
    def T_base_world(self) -> np.ndarray:
        """Inverse of ``T_world_base``."""
        return np.linalg.inv(self.T_world_base)

    def to_base(self, p_world: Sequence[float]) -> np.ndarray:
        """A world point in the base frame."""
        T = self.T_base_world
        return T[:3, :3] @ np.asarray(p_world, dtype=float) + T[:3, 3]

    def names(self) -> list[str]:
        """Every object and fixture of the snapshot."""
        return list(self.snapshot.object_poses)

    def position(self, name: str) -> np.ndarray:
        """Body origin of an object in the base frame, m."""
        return self.to_base(self.snapshot.object_poses[name].position_m)

    def yaw(self, name: str) -> float:
        """Yaw of an object in the base frame, rad."""
        T = self.T_base_world
        base_yaw = math.atan2(T[1, 0], T[0, 0])
        return yaw_of(self.snapshot.object_poses[name].quaternion_wxyz) + base_yaw

    def up_axis(self, name: str) -> np.ndarray:
        """The direction of an object's own z axis in the base frame (unit vector)."""
        up = self.T_base_world[:3, :3] @ quat_to_matrix(self.snapshot.object_poses[name].quaternion_wxyz)[:, 2]
        return up / max(float(np.linalg.norm(up)), 1e-9)

    def box(self, name: str) -> Box:
        """Approximate box of an object in the base frame: its shape's box turned by the
        object's yaw. A can, bottle or carton (a shape whose box ignores the yaw) that has
        fallen over since the episode started (its upright axis of then leans more than
        ``LYING_DEG`` now) gets the box that holds its shape's box turned as it has turned,
        long side first: long and low, as it lies. (The turn is taken from the start, not
        from the model's own z axis, which for LIBERO's cans and cartons is not their
        upright axis.)"""
        if name not in self._boxes:
            offset, half, turns = SHAPES_BY_NAME.get(name) or SHAPES.get(kind_of(name), DEFAULT_SHAPE)
            turned = None if turns else self._turn_since_start(name)
            if turned is not None and turned[2, 2] < math.cos(math.radians(LYING_DEG)):
                self._boxes[name] = _turned_box(self.position(name), turned, np.asarray(offset, float),
                                                np.asarray(half, float))
            else:
                yaw = self.yaw(name) if turns else 0.0
                center = self.position(name) + rot_z(yaw) @ np.asarray(offset)
                self._boxes[name] = Box(center, np.asarray(half, dtype=float), yaw)
        return self._boxes[name]

    def _turn_since_start(self, name: str) -> np.ndarray | None:
        """The rotation (base frame, 3x3) that takes the object from its pose at the start of
        the episode to its pose now (None without a start pose)."""
        start = self.snapshot.initial_object_poses.get(name)
        if start is None:
            return None
        R_bw = self.T_base_world[:3, :3]
        turn = quat_to_matrix(self.snapshot.object_poses[name].quaternion_wxyz) @ quat_to_matrix(
            start.quaternion_wxyz).T
        return R_bw @ turn @ R_bw.T

    @property
    def ee_m(self) -> np.ndarray:
        """Tool centre point in the base frame, m."""
        return self.to_base(self.snapshot.ee_position_m)

    def click_candidates(self, name: str, camera: CameraModel, wall_height_frac: float = 0.65,
                         wall_radius_frac: float = 0.97) -> np.ndarray:
        """Points worth clicking on an object: the outer wall facing the camera for hollow
        things (a click inside a bowl lands on whatever it holds or on its floor; seen from
        the side, at ``wall_height_frac`` of its height and ``wall_radius_frac`` of its
        radius), a ring on the rim of plates, the top face of everything else."""
        box = self.box(name)
        kind = kind_of(name)
        radius = float(min(box.half_m[0], box.half_m[1]))
        if kind in HOLLOW_KINDS:
            toward = camera.position_m[:2] - box.center_m[:2]
            elevation = math.atan2(camera.position_m[2] - box.top_z_m, float(np.hypot(*toward)))
            if elevation > math.radians(55.0):
                # looking down into it: click its inner wall, away from the rim and the floor
                angles = np.radians(np.arange(0.0, 360.0, 30.0))
                z = box.bottom_z_m + 0.55 * 2.0 * box.half_m[2]
                return np.array([[box.center_m[0] + 0.62 * radius * math.cos(a),
                                  box.center_m[1] + 0.62 * radius * math.sin(a), z] for a in angles])
            heading = math.atan2(toward[1], toward[0])
            angles = heading + np.radians(np.linspace(-50.0, 50.0, 11))
            z = box.bottom_z_m + wall_height_frac * 2.0 * box.half_m[2]
            return np.array([[box.center_m[0] + wall_radius_frac * radius * math.cos(a),
                              box.center_m[1] + wall_radius_frac * radius * math.sin(a), z] for a in angles])
        offset, half, turns = SHAPES_BY_NAME.get(name) or SHAPES.get(kind, DEFAULT_SHAPE)
        up = self.up_axis(name)
        if turns and up[2] < math.cos(math.radians(TILTED_DEG)):
            # lying tilted (a bottle laid along the rack's shelf): its box is upright, so
            # click along the object's own axis, on its lower, wider part
            origin = self.position(name)
            return np.array([origin + up * (offset[2] + f * half[2]) for f in np.linspace(-0.6, 0.2, 9)])
        if kind in BODY_CLICK_KINDS:
            # the body's wall facing the camera, below the lid (its knob segments apart)
            origin = self.position(name)
            toward = camera.position_m[:2] - origin[:2]
            heading = math.atan2(toward[1], toward[0])
            r = BODY_CLICK_KINDS[kind]
            return np.array([[origin[0] + r * math.cos(a), origin[1] + r * math.sin(a),
                              box.bottom_z_m + f * 2.0 * box.half_m[2]]
                             for a in heading + np.radians(np.linspace(-40.0, 40.0, 5))
                             for f in (0.3, 0.45, 0.6)])
        if kind == "plate":
            angles = np.radians(np.arange(0.0, 360.0, 20.0))
            z = box.top_z_m - 0.004
            return np.array([[box.center_m[0] + 0.72 * radius * math.cos(a),
                              box.center_m[1] + 0.72 * radius * math.sin(a), z] for a in angles])
        return np.vstack([box.top_points(), box.side_points(camera.position_m)])

    def part_boxes(self, name: str) -> list[Box]:
        """The boxes of a fixture whose single box is far from its shape (``PART_BOXES``),
        base frame: what hides things behind it."""
        origin, yaw = self.position(name), self.yaw(name)
        R = rot_z(yaw)
        return [Box(origin + R @ np.asarray(c), np.asarray(h, dtype=float), yaw) for c, h in PART_BOXES[kind_of(name)]]

    def gripper_box(self) -> Box:
        """A box around the hand (above the TCP), for occlusion checks."""
        return Box(self.ee_m + np.array([0.0, 0.0, 0.06]), np.array([0.05, 0.06, 0.08]), 0.0)

    def occluders(self, exclude: Iterable[str]) -> list[Box]:
        """Boxes that may hide something: every other object (hollow ones and fixtures open
        at the top as their walls and floor, so what is inside them stays visible from
        above), and the hand."""
        skip = set(exclude)
        out: list[Box] = []
        for n in self.names():
            if n in skip:
                continue
            if kind_of(n) in HOLLOW_KINDS or kind_of(n) in OPEN_TOP_KINDS:
                out.extend(open_box(self.box(n)))
            elif kind_of(n) in PART_BOXES:
                out.extend(self.part_boxes(n))
            else:
                out.append(self.box(n))
        return out + self.fixture_parts(skip) + [self.gripper_box()]

    def fixture_parts(self, exclude: Iterable[str] = ()) -> list[Box]:
        """Moving parts of fixtures that stick out of their bodies (open drawers)."""
        skip = set(exclude)
        if any(d.cabinet in skip for d in drawers(self)):
            return []
        return [wall for box in open_drawer_boxes(self) for wall in open_box(box)]

    def visible_points(self, name: str, camera: CameraModel, points: np.ndarray | None = None,
                       margin: float = 0.04, ignore: Iterable[str] = ()) -> list[tuple[np.ndarray, float, float]]:
        """Points of an object's top face that the camera sees: ``(point, u, v)`` for each
        candidate inside the image (with ``margin``) and not behind another box."""
        pts = self.click_candidates(name, camera) if points is None else points
        uv, _depth = camera.project(pts)
        eye = camera.position_m
        occluders = [b for b in self.occluders([name, *ignore]) if not b.contains(eye)]
        out = []
        for p, (u, v) in zip(pts, uv, strict=True):
            if not camera.in_view(u, v, margin):
                continue
            if any(b.ray_hit(eye, p) for b in occluders):
                continue
            out.append((p, float(u), float(v)))
        return out

    def click_point(self, point_m: np.ndarray, camera: CameraModel, margin: float = 0.04,
                    ignore: Iterable[str] = ()) -> tuple[float, float] | None:
        """The pixel of a point (e.g. a spot on the table) when the camera sees it; else None."""
        p = np.asarray(point_m, dtype=float)
        (u, v), = camera.project(p[None])[0]
        if not camera.in_view(u, v, margin):
            return None
        if any(b.ray_hit(camera.position_m, p) for b in self.occluders(ignore) if not b.contains(camera.position_m)):
            return None
        return round(float(u), 3), round(float(v), 3)

    def click(self, name: str, camera: CameraModel, points: np.ndarray | None = None,
              ignore: Iterable[str] = ()) -> tuple[float, float] | None:
        """The pixel to click on an object: the visible top point nearest the middle of
        the visible ones (away from edges, so region growing stays on the object);
        None when nothing of it is visible."""
        visible = self.visible_points(name, camera, points, ignore=ignore)
        if not visible:
            return None
        hull_uv, _ = camera.project(self.box(name).corners())
        hull = _convex_hull(hull_uv * np.array([camera.width_px, camera.height_px]))
        best = max(visible, key=lambda item: _depth_inside(
            np.array([item[1] * camera.width_px, item[2] * camera.height_px]), hull))
        return round(best[1], 3), round(best[2], 3)


def _convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull of 2-D points (monotone chain)."""
    pts = sorted({(float(x), float(y)) for x, y in points if np.isfinite(x) and np.isfinite(y)})
    if len(pts) < 3:
        return np.array(pts)

    def cross(o: tuple, a: tuple, b: tuple) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def _depth_inside(point: np.ndarray, hull: np.ndarray) -> float:
    """Signed distance (pixels) from a point to a convex polygon's boundary: positive inside."""
    if len(hull) < 3:
        return 0.0
    depth = np.inf
    for i in range(len(hull)):
        a, b = hull[i], hull[(i + 1) % len(hull)]
        edge = b - a
        length = float(np.hypot(*edge)) or 1.0
        # left of a counter-clockwise edge is inside (image y points down: the sign flips)
        cross = (edge[0] * (point[1] - a[1]) - edge[1] * (point[0] - a[0])) / length
        depth = min(depth, cross)
    return float(depth)


def estimate_T_world_base(ee_world_m: Sequence[float], ee_base_m: Sequence[float]) -> np.ndarray:
    """The base pose from one tool position known in both frames (the base is assumed
    upright and not turned about z, as on every LIBERO and tabletop scene)."""
    T = np.eye(4)
    T[:3, 3] = np.asarray(ee_world_m, dtype=float) - np.asarray(ee_base_m, dtype=float)
    return T


def _turned_box(position: np.ndarray, turn: np.ndarray, offset: np.ndarray, half: np.ndarray) -> Box:
    """The upright box around an upright shape box (``offset``, ``half``, base axes) turned
    by ``turn`` about the object's origin at ``position``: its yaw along the turned axis that
    reaches farthest horizontally; half extents along that, across it and up."""
    axes = turn * half  # column i: the shape box's axis i, turned, as long as its half extent
    flat = axes[:2]
    k = int(np.argmax(np.linalg.norm(flat, axis=0)))
    yaw = math.atan2(float(flat[1, k]), float(flat[0, k]))
    along = np.array([math.cos(yaw), math.sin(yaw)])
    across = np.array([-along[1], along[0]])
    extents = np.array([np.abs(along @ flat).sum(), np.abs(across @ flat).sum(), np.abs(axes[2]).sum()])
    return Box(position + turn @ offset, extents, yaw)
