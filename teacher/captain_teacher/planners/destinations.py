"""Where a relation goal puts an object: the object or region named by the goal, the
object the code clicks and measures for it, and where the teacher aims.

Goal arguments are LIBERO names: objects (``plate_1``), regions of objects or fixtures
(``basket_1_contain_region``, ``flat_stove_1_cook_region``, ``wooden_cabinet_1_top_side``)
or regions of the table (``main_table_stove_front_region``). A region of an object is
reached by clicking that object; a region of the table by clicking the object it is
named after (the stove, the plate).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from captain_teacher.boxes import rot_z
from captain_teacher.objects import kind_of, label_of
from captain_teacher.scene import SceneView

#: Region centres in their parent's body frame (m), where LIBERO's region sites sit.
REGION_OFFSETS_M: dict[str, tuple[float, float, float]] = {
    "contain_region": (0.0, 0.0, 0.072),
    "cook_region": (0.15, 0.0, 0.0),
    "back_contain_region": (0.034, -0.001, 0.086),
    "heating_region": (0.0, 0.01, 0.096),
    "top_side": (0.004, 0.016, 0.222),
    "wine_rack_top_region": (0.0, -0.08, 0.217),
}
#: Regions of the table, in the simulator world frame (m): the table does not move.
TABLE_REGIONS_WORLD_M: dict[str, tuple[float, float, float]] = {
    "main_table_stove_front_region": (-0.05, 0.21, 0.895),
    "living_room_table_plate_right_region": (0.15, 0.1, 0.41),
}
#: Half sizes (x, y) of regions, m (LIBERO's site sizes).
REGION_HALF_XY_M: dict[str, tuple[float, float]] = {
    "contain_region": (0.061, 0.061),
    "cook_region": (0.075, 0.075),
    "back_contain_region": (0.028, 0.062),
    "heating_region": (0.12, 0.084),
    "top_side": (0.125, 0.094),
    "top_region": (0.03, 0.076),
    "middle_region": (0.03, 0.076),
    "bottom_region": (0.03, 0.076),
    "wine_rack_top_region": (0.101, 0.022),
    "main_table_stove_front_region": (0.04, 0.04),
    "living_room_table_plate_right_region": (0.05, 0.05),
}
#: Shifts of the aim inside a region, in the parent's body frame (m), where the region's
#: centre is not the middle of the space between the walls (the caddy's back compartment
#: is 2 cm off its walls' middle).
REGION_AIM_SHIFT_M: dict[str, tuple[float, float, float]] = {
    "back_contain_region": (0.0, 0.02, 0.0),
}
#: Half sizes (x, y) of the area an object's centre must end over, per destination object
#: whose rule is not LIBERO's 3 cm (m): the MuJoCo tabletop's ``On`` asks for the centre
#: over the plate's 8 cm radius or within a cube's half size.
OBJECT_HALF_XY_M: dict[str, tuple[float, float]] = {
    "plate": (0.08, 0.08),
    "red_cube": (0.02, 0.02),
    "blue_cube": (0.02, 0.02),
    "green_cube": (0.02, 0.02),
}
#: A region narrower than this (half width, m) is a slot: a flat object goes in with its
#: thin side across it.
SLOT_HALF_WIDTH_M = 0.035
#: The aim's shifts inside a region (toward the robot, side by side) stop this far inside
#: its edges: LIBERO tests the object's origin against the region, m.
AIM_EDGE_MARGIN_M = 0.02
#: The same margin in a region at the edge of reach (``SHARE_ACROSS_REACH_FROM_M``), m: a
#: centimetre nearer the robot is what the arm lacks there (an object released 1.5 cm above
#: its support lands within a few millimetres of the aim).
FAR_AIM_EDGE_MARGIN_M = 0.01
CONTAINER_KINDS = frozenset({"basket", "caddy", "microwave", "drawer_cabinet"})
#: A region whose shorter side is at least this share of its longer one is square: objects
#: sharing it may be set side by side along either side.
SQUARE_REGION_RATIO = 0.9
#: From this far from the base (m; where a top-down hand nears the end of its reach, as
#: ``grasping.REACH_TILT_FROM_M``) objects sharing a square region are set side by side
#: across the reach direction: along it, the farther one is out of reach (LIBERO-PRO's
#: swapped stove puts its cook region's far half 0.9 m from the base).
SHARE_ACROSS_REACH_FROM_M = 0.75


@dataclass(frozen=True)
class Destination:
    """Where one relation goal puts its object.

    Attributes:
        goal_arg: the goal's destination name.
        click: the object clicked and measured for it.
        relation: ``"on"`` or ``"in"``.
        container: the object goes inside something (release low, inside its walls).
        region: the goal names a region rather than an object (the aim is then an offset
            from the clicked object's measured centre).
    """

    goal_arg: str
    click: str
    relation: str
    container: bool
    region: bool
    spot_m: tuple[float, float, float] | None = None
    share: tuple[int, int] = (0, 1)
    #: half the distance between neighbouring aims when several objects share a region, m
    #: (None: from the region's size alone)
    share_spread_m: float | None = None
    #: this object's aim from the region's centre when several objects go into one basket,
    #: base frame xy (m); None: the centre
    corner_m: tuple[float, float] | None = None

    @property
    def label(self) -> str:
        """Words for the destination."""
        return "free spot on the table" if self.spot_m is not None else label_of(self.click)

    def region_key(self) -> str:
        """The key of this region in the offset and size tables."""
        if self.goal_arg in TABLE_REGIONS_WORLD_M:
            return self.goal_arg
        if self.goal_arg.startswith("wine_rack") and self.goal_arg.endswith("top_region"):
            return "wine_rack_top_region"
        rest = self.goal_arg[len(self.click):].lstrip("_")
        return rest

    def aim_m(self, scene: SceneView) -> np.ndarray:
        """Where the object's centre should end up, base frame (host truth)."""
        if self.spot_m is not None:
            return np.asarray(self.spot_m, dtype=float)
        if not self.region:
            return scene.position(self.click)
        shift = np.zeros(3)
        if self.click and self.region_key() in REGION_AIM_SHIFT_M:
            shift = rot_z(scene.yaw(self.click)) @ np.asarray(REGION_AIM_SHIFT_M[self.region_key()])
        toward, share = self._toward_robot(scene), self._share_offset(scene)
        if self._shared():  # side by side: the shift toward the robot may not push the outer ones out
            axis = self.share_axis(scene)
            along = float(toward[:2] @ axis[:2])
            room = max(0.0, max(self.half_xy_m()) - self._edge_margin(scene) - self.spread_m())
            toward = toward - axis * (along - float(np.clip(along, -room, room)))
        extra = toward + share
        if self.click:  # both shifts together keep the aim the edge margin inside the region
            R = rot_z(scene.yaw(self.click))
            limit = np.maximum(np.asarray(self.half_xy_m()) - self._edge_margin(scene), 0.0)
            local = R[:2, :2].T @ extra[:2]
            extra = np.append(R[:2, :2] @ np.clip(local, -limit, limit), 0.0)
        return self.region_center_m(scene) + extra + shift

    def slot_axis(self, scene: SceneView) -> np.ndarray | None:
        """The across direction (unit, base frame xy) of a narrow region such as the caddy's
        compartments; None when the region is not a slot."""
        if not self.region or not self.click:
            return None
        hx, hy = self.half_xy_m()
        if min(hx, hy) >= SLOT_HALF_WIDTH_M or max(hx, hy) < 1.6 * min(hx, hy):
            return None
        local = np.array([1.0, 0.0, 0.0]) if hx < hy else np.array([0.0, 1.0, 0.0])
        return (rot_z(scene.yaw(self.click)) @ local)[:2]

    def _share_offset(self, scene: SceneView) -> np.ndarray:
        """Side-by-side aims when several objects go to one region (``share`` = (index, count))."""
        if self.corner_m is not None:
            return np.array([*self.corner_m, 0.0])
        if not self._shared():
            return np.zeros(3)
        index, count = self.share
        t = (index - (count - 1) / 2.0) * (2.0 * self.spread_m() / (count - 1))
        return self.share_axis(scene) * t

    def _shared(self) -> bool:
        """Whether objects are set side by side here: a region several objects go to, not a
        container (dropped into a basket, they settle against its walls: aimed off its middle
        they land on the rim)."""
        return self.share[1] > 1 and not self.container

    def spread_m(self) -> float:
        """How far the outer aims of a shared region are from its centre, m."""
        hx, hy = self.half_xy_m()
        return self.share_spread_m if self.share_spread_m is not None else min(max(hx, hy) * 0.55, 0.045)

    def share_axis(self, scene: SceneView) -> np.ndarray:
        """The direction (unit, base frame) along which objects sharing the region are set
        side by side: the region's longer side; in a square region whose farther aim along
        that side would be ``SHARE_ACROSS_REACH_FROM_M`` or more from the base, the side
        that keeps the farther aim nearer the base (across the reach direction)."""
        hx, hy = self.half_xy_m()
        yaw = scene.yaw(self.click) if self.click else 0.0
        longer, shorter = (rot_z(yaw)[:, 0], rot_z(yaw)[:, 1]) if hx >= hy else (rot_z(yaw)[:, 1], rot_z(yaw)[:, 0])
        if min(hx, hy) < SQUARE_REGION_RATIO * max(hx, hy):
            return longer
        centre, spread = self.region_center_m(scene)[:2], self.spread_m()

        def farther(axis: np.ndarray) -> float:
            return max(float(np.hypot(*(centre + s * spread * axis[:2]))) for s in (-1.0, 1.0))

        along = farther(longer)
        return shorter if along >= SHARE_ACROSS_REACH_FROM_M and farther(shorter) < along else longer

    def region_center_m(self, scene: SceneView) -> np.ndarray:
        """Centre of the goal's region, base frame (for a drawer: the middle of the part of
        its floor that is out of the cabinet)."""
        from captain_teacher.fixtures import drawer_for_region

        drawer = drawer_for_region(scene, self.goal_arg)
        if drawer is not None:
            return drawer.inside_center_m(scene)
        snap = scene.snapshot
        if getattr(snap, "destination", "") == self.goal_arg and snap.goal_position_m is not None:
            return scene.to_base(snap.goal_position_m)
        key = self.region_key()
        if key in TABLE_REGIONS_WORLD_M:
            return scene.to_base(TABLE_REGIONS_WORLD_M[key])
        offset = np.asarray(REGION_OFFSETS_M.get(key, (0.0, 0.0, 0.0)))
        return scene.position(self.click) + rot_z(scene.yaw(self.click)) @ offset

    def _far(self, scene: SceneView) -> bool:
        """Whether the region's centre is ``SHARE_ACROSS_REACH_FROM_M`` or more from the base."""
        return float(np.hypot(*self.region_center_m(scene)[:2])) >= SHARE_ACROSS_REACH_FROM_M

    def _edge_margin(self, scene: SceneView) -> float:
        """How far inside the region's edges the aim's shifts stop, m: ``AIM_EDGE_MARGIN_M``,
        ``FAR_AIM_EDGE_MARGIN_M`` in a region at the edge of reach."""
        return FAR_AIM_EDGE_MARGIN_M if self._far(scene) else AIM_EDGE_MARGIN_M

    def _toward_robot(self, scene: SceneView) -> np.ndarray:
        """A shift of the aim toward the robot inside large, far regions (easier to reach)."""
        center = self.region_center_m(scene)
        if self.container or float(np.hypot(*center[:2])) < 0.62 or self.is_drawer(scene):
            return np.zeros(3)
        hx, hy = self.half_xy_m()
        yaw = scene.yaw(self.click) if self.click else 0.0
        toward = -center[:2] / float(np.hypot(*center[:2]))
        local = rot_z(yaw)[:2, :2].T @ toward
        step = min(0.45 * hx / max(abs(local[0]), 1e-6), 0.45 * hy / max(abs(local[1]), 1e-6), 0.07)
        if self._far(scene):  # out at the edge of reach: to the near edge
            step = 0.07  # (``aim_m`` keeps the aim the edge margin inside the region)
        if step < 0.02:
            return np.zeros(3)
        return np.array([toward[0] * step, toward[1] * step, 0.0])

    def release_top(self, scene: SceneView) -> str:
        """Source for the height the released object's bottom must clear: the measured top
        of the destination, or the walls of a drawer."""
        from captain_teacher.fixtures import drawer_for_region

        drawer = drawer_for_region(scene, self.goal_arg)
        if drawer is not None:
            return f"{drawer.wall_top_m(scene) + 0.005:.3f}"
        return 'd["top_z_m"]'

    def is_drawer(self, scene: SceneView) -> bool:
        """Whether the destination is inside a drawer."""
        from captain_teacher.fixtures import drawer_for_region

        return drawer_for_region(scene, self.goal_arg) is not None

    def half_xy_m(self) -> tuple[float, float]:
        """Half size of the aim area: a region's, or the 3 cm LIBERO allows on an object
        (the tabletop's own rule for its objects, ``OBJECT_HALF_XY_M``)."""
        if self.spot_m is not None:
            return (0.05, 0.05)
        if not self.region:
            return OBJECT_HALF_XY_M.get(self.goal_arg, (0.03, 0.03))
        return REGION_HALF_XY_M.get(self.region_key(), (0.03, 0.03))


def destination_for(goal_arg: str, relation: str, scene: SceneView) -> Destination:
    """The destination of a relation goal (see the module docstring)."""
    names = scene.names()
    if goal_arg in names:
        return Destination(goal_arg, goal_arg, relation, kind_of(goal_arg) in CONTAINER_KINDS, False)
    parents = [n for n in names if goal_arg.startswith(n)]
    if parents:
        parent = max(parents, key=len)
        inside = relation == "in" or kind_of(parent) in ("basket",)
        return Destination(goal_arg, parent, relation, inside and kind_of(parent) in CONTAINER_KINDS, True)
    # a table region: click the object it is named after, else the nearest one
    aim = None
    if goal_arg in TABLE_REGIONS_WORLD_M:
        aim = scene.to_base(TABLE_REGIONS_WORLD_M[goal_arg])
    named = [n for n in names if label_of(n).split()[-1] in goal_arg]
    if named:
        ref = min(named, key=lambda n: float(np.linalg.norm(scene.position(n)[:2] - aim[:2])) if aim is not None
                  else 0.0)
    elif aim is not None:
        ref = min(names, key=lambda n: float(np.linalg.norm(scene.position(n)[:2] - aim[:2])))
    else:
        ref = names[0]
    return Destination(goal_arg, ref, relation, False, True)


def spot_destination(spot_m: np.ndarray) -> Destination:
    """A free point on the table as a destination (for setting something aside)."""
    return Destination("table", "", "on", False, False, tuple(float(v) for v in spot_m))


#: Gap left between objects set side by side in one region, m.
SHARE_GAP_M = 0.03
#: Margin kept between a shared region's edge and the outer aims, m.
SHARE_EDGE_MARGIN_M = 0.02


def share_spread_m(dest: Destination, objects: list[str], scene: SceneView) -> float:
    """Half the distance between neighbouring aims for ``objects`` sharing ``dest``'s region:
    wide enough that their outlines (along the share axis) keep ``SHARE_GAP_M`` apart, but
    the outer aims stay ``SHARE_EDGE_MARGIN_M`` inside the region; never less than the
    region-only default."""
    hx, hy = dest.half_xy_m()
    default = min(max(hx, hy) * 0.55, 0.045)
    axis = dest.share_axis(scene)
    reach = 0.0
    for name in objects:
        box = scene.box(name)
        local = rot_z(box.yaw_rad)[:2, :2].T @ axis[:2]
        reach = max(reach, float(np.abs(local) @ box.half_m[:2]))
    wanted = reach + SHARE_GAP_M / 2.0
    return max(default, min(wanted, max(hx, hy) - SHARE_EDGE_MARGIN_M))


#: Inside a basket the objects' footprints stay this far inside its region's edges, m.
CORNER_MARGIN_M = 0.005


def basket_corners(dest: Destination, objects: list[str], scene: SceneView) -> list[tuple[float, float]]:
    """Aims (offsets from the region's centre, base frame xy, m) for ``objects`` going into
    one basket: opposite corners of its region, each as far out as the object's footprint
    (along the basket's sides, at its present yaw) allows with ``CORNER_MARGIN_M`` to spare.
    Dropped on its middle, the second lands on the first and hides it from every camera."""
    hx, hy = dest.half_xy_m()
    R = rot_z(scene.yaw(dest.click))[:2, :2]
    out = []
    for k, name in enumerate(objects):
        box = scene.box(name)
        local_axes = R.T @ rot_z(box.yaw_rad)[:2, :2]  # the object's axes in the basket's frame
        reach = np.abs(local_axes) @ box.half_m[:2]
        room = np.maximum(np.array([hx, hy]) - reach - CORNER_MARGIN_M, 0.0)
        sign = 1.0 if k % 2 == 0 else -1.0
        off = R @ (sign * room)
        out.append((float(off[0]), float(off[1])))
    return out
