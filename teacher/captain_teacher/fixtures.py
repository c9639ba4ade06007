"""Parts of LIBERO's fixtures the teacher needs but the snapshot does not list: the walls
of an open drawer (so a grasp inside it keeps its fingers off them) and the drawer
handles, each from the cabinet's pose and the drawer's joint position.

Both LIBERO cabinets (wooden and white) share one drawer model. In the cabinet's body
frame (metres): a drawer's inside spans x in [-0.101, 0.101] and y in [-0.064, 0.087]
when closed; opening moves it by the joint position along y (negative: out, toward the
front, which faces local -y); its floor and the top of its walls depend on the level;
the handle is a bar along x at y = -0.102 in front of the drawer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from captain_teacher.boxes import Box, rot_z
from captain_teacher.objects import kind_of

if TYPE_CHECKING:
    from captain_teacher.scene import SceneView

LEVELS = ("top", "middle", "bottom")
#: Per level: (floor z, wall top z, handle z) in the cabinet frame, m.
DRAWER_Z_M = {"top": (0.159, 0.216, 0.184), "middle": (0.089, 0.146, 0.114), "bottom": (0.021, 0.077, 0.045)}
INSIDE_X_M = (-0.101, 0.101)
INSIDE_Y_M = (-0.064, 0.087)
HANDLE_Y_M = -0.102
HANDLE_HALF_LENGTH_M = 0.044
WALL_HALF_M = 0.004
#: The cabinet's front face (closed drawer fronts) in its body frame, m.
CABINET_FRONT_Y_M = -0.078


@dataclass(frozen=True)
class Drawer:
    """One drawer: its cabinet, level, joint name and position (m, negative = open)."""

    cabinet: str
    level: str
    joint: str
    position_m: float

    def with_position(self, position_m: float) -> Drawer:
        """The same drawer at another joint position."""
        return Drawer(self.cabinet, self.level, self.joint, float(position_m))

    def _frame(self, scene: SceneView) -> tuple[np.ndarray, float]:
        return scene.position(self.cabinet), scene.yaw(self.cabinet)

    def to_base(self, scene: SceneView, local: np.ndarray) -> np.ndarray:
        """A point of the (moved) drawer, given in the closed cabinet's frame, in the base frame."""
        origin, yaw = self._frame(scene)
        p = np.asarray(local, dtype=float) + np.array([0.0, self.position_m, 0.0])
        return origin + rot_z(yaw) @ p

    def pull_direction(self, scene: SceneView) -> np.ndarray:
        """Unit horizontal direction in which the drawer opens, base frame."""
        _origin, yaw = self._frame(scene)
        return (rot_z(yaw) @ np.array([0.0, -1.0, 0.0]))[:2]

    def handle_m(self, scene: SceneView) -> np.ndarray:
        """Middle of the handle bar, base frame."""
        return self.to_base(scene, np.array([0.0, HANDLE_Y_M, DRAWER_Z_M[self.level][2]]))

    def inside_center_m(self, scene: SceneView) -> np.ndarray:
        """Middle of the part of the drawer's floor that sticks out of the cabinet (what is
        reachable from above), base frame."""
        front_inside = INSIDE_Y_M[0] + self.position_m
        # clear of the handles of the drawers above, which stick out of the cabinet's face
        y = 0.5 * (front_inside + HANDLE_Y_M - 0.01) if self.position_m < -0.05 else 0.5 * sum(INSIDE_Y_M)
        return self.to_base(scene, np.array([0.003, y - self.position_m, DRAWER_Z_M[self.level][0]]))

    def wall_top_m(self, scene: SceneView) -> float:
        """Height of the drawer's walls, base frame."""
        return float(self.to_base(scene, np.array([0.0, 0.0, DRAWER_Z_M[self.level][1]]))[2])

    def walls(self, scene: SceneView) -> list[Box]:
        """The four walls as boxes, base frame."""
        _origin, yaw = self._frame(scene)
        floor, top, _ = DRAWER_Z_M[self.level]
        zc, zh = 0.5 * (floor + top), 0.5 * (top - floor)
        (x0, x1), (y0, y1) = INSIDE_X_M, INSIDE_Y_M
        w = WALL_HALF_M
        specs = [((x0 - w, 0.5 * (y0 + y1)), (w, 0.5 * (y1 - y0) + w)),
                 ((x1 + w, 0.5 * (y0 + y1)), (w, 0.5 * (y1 - y0) + w)),
                 ((0.0, y0 - w), (0.5 * (x1 - x0) + w, w)),
                 ((0.0, y1 + w), (0.5 * (x1 - x0) + w, w))]
        return [Box(self.to_base(scene, np.array([cx, cy, zc])), np.array([hx, hy, zh]), yaw)
                for (cx, cy), (hx, hy) in specs]


def drawers(scene: SceneView) -> list[Drawer]:
    """Every drawer of every cabinet in the scene."""
    out = []
    joints = scene.snapshot.articulated_joints
    for name in scene.names():
        if kind_of(name) != "drawer_cabinet":
            continue
        for level in LEVELS:
            joint = f"{name}_{level}_level"
            if joint in joints:
                out.append(Drawer(name, level, joint, float(joints[joint])))
    return out


def drawer_for_region(scene: SceneView, region: str) -> Drawer | None:
    """The drawer a region name refers to (``wooden_cabinet_1_top_region`` -> the top drawer)."""
    for d in drawers(scene):
        if region == f"{d.cabinet}_{d.level}_region":
            return d
    return None


def open_drawer_walls(scene: SceneView, min_open_m: float = 0.03) -> list[Box]:
    """Walls of every drawer open by more than ``min_open_m``."""
    return [w for d in drawers(scene) if d.position_m < -min_open_m for w in d.walls(scene)]


def open_drawer_boxes(scene: SceneView, min_open_m: float = 0.03) -> list[Box]:
    """The part of every open drawer that sticks out of its cabinet, as one box each."""
    return [drawer_box(scene, d) for d in drawers(scene) if d.position_m < -min_open_m]


def drawer_box(scene: SceneView, d: Drawer) -> Box:
    """The part of a drawer that sticks out of its cabinet, as a box."""
    if True:
        _origin, yaw = d._frame(scene)
        floor, top, _ = DRAWER_Z_M[d.level]
        y_front = INSIDE_Y_M[0] - WALL_HALF_M * 2 + d.position_m
        y_back = CABINET_FRONT_Y_M
        center_local = np.array([0.0, 0.5 * (y_front + y_back) - d.position_m, 0.5 * (floor + top) - 0.01])
        half = np.array([INSIDE_X_M[1] + 2 * WALL_HALF_M, 0.5 * (y_back - y_front), 0.5 * (top - floor) + 0.01])
    return Box(d.to_base(scene, center_local), half, yaw)
