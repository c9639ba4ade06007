"""Wide-layout random starts: LIBERO's movable objects re-placed, seeded and collision-free.

Starting from an official initial state, every movable object that rests on the arena
surface (the BDDL initial state puts it ``On`` a table or floor region) is moved
horizontally by up to ``spread_m`` (uniform in a disc) and turned about the vertical by
up to ``yaw_rad``; objects that start on or in another movable object ride along with
it. Objects on or in fixtures (cabinet tops, drawers, stoves) stay where LIBERO put
them.

A placement is accepted when

* the object's centre stays within the arm's reach: ``min_reach_m..max_reach_m`` from
  the robot base horizontally, and at least ``min_forward_m`` in front of it;
* its horizontal bounding circle keeps ``clearance_m`` from every other re-placed
  group (the same test LIBERO's own placement samplers use);
* MuJoCo finds no contact between it and anything but its support (fixtures, other
  objects, the robot);

and the layout as a whole is accepted when, after ``settle_s`` of physics with the arm
holding, no object dropped by more than 2 cm (fell off the table) or tipped over by
more than 30 degrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from captain_backends.core.libero.errors import LayoutError

#: BDDL names of the surfaces objects rest on (part of the arena, not movable fixtures).
ARENA_SURFACES = frozenset({"main_table", "floor", "kitchen_table", "living_room_table", "study_table",
                            "coffee_table", "countertop"})


@dataclass(frozen=True)
class LayoutLimits:
    """Acceptance limits of a random layout (metres, radians, seconds)."""

    spread_m: float = 0.15
    yaw_rad: float = 0.5
    min_reach_m: float = 0.30
    max_reach_m: float = 0.80
    min_forward_m: float = 0.15
    clearance_m: float = 0.01
    settle_s: float = 0.3
    max_drop_m: float = 0.02
    max_tilt_rad: float = np.deg2rad(30.0)


@dataclass(frozen=True)
class ObjectGroup:
    """An object resting on the arena surface and the objects riding on it."""

    base: str
    members: tuple[str, ...]


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2.0), 0.0, 0.0, np.sin(yaw / 2.0)])


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def object_groups(domain: Any) -> tuple[ObjectGroup, ...]:
    """Groups of movable objects from the BDDL initial state (see the module docstring)."""
    objects = domain.objects_dict
    fixtures = domain.fixtures_dict
    regions = domain.parsed_problem["regions"]
    carrier: dict[str, str] = {}
    on_surface: list[str] = []
    for term in domain.parsed_problem["initial_state"]:
        if len(term) != 3 or term[0] not in ("on", "in") or term[1] not in objects:
            continue
        obj, where = term[1], term[2]
        if where in objects:
            carrier[obj] = where
        elif where in regions:
            target = regions[where]["target"]
            if target in objects:
                carrier[obj] = target
            elif term[0] == "on" and (target in ARENA_SURFACES or target not in fixtures):
                on_surface.append(obj)

    def root(name: str) -> str:
        seen = set()
        while name in carrier and name not in seen:
            seen.add(name)
            name = carrier[name]
        return name

    groups = []
    for base in sorted(on_surface):
        members = tuple(sorted(o for o in objects if root(o) == base))
        groups.append(ObjectGroup(base, members))
    return tuple(groups)


class LayoutSampler:
    """Samples wide layouts for one LIBERO scene.

    Args:
        domain: LIBERO's BDDL domain (``env.env``).
        model / data: the scene's MuJoCo model and data.
        robot_base_xy: the robot base position in the world, m.
        limits: acceptance limits.
        robot_geom_mask / fixture_geom_mask: per geom, whether it belongs to the robot
            (mount included) / to a fixture; re-placed objects must touch neither.
    """

    def __init__(self, domain: Any, model: Any, data: Any, robot_base_xy: np.ndarray,
                 limits: LayoutLimits, robot_geom_mask: np.ndarray, fixture_geom_mask: np.ndarray) -> None:
        self.model = model
        self.data = data
        self.limits = limits
        self.base_xy = np.asarray(robot_base_xy, dtype=float)
        self.groups = object_groups(domain)
        self.qpos_adr: dict[str, int] = {}
        self.qvel_adr: dict[str, int] = {}
        self.body_of: dict[str, int] = {}
        geom_owner = np.full(model.ngeom, -1, dtype=np.int32)
        # every movable object owns its geoms, re-placed or not
        for index, name in enumerate(sorted(domain.objects_dict)):
            body = int(domain.obj_body_id[name])
            subtree = [b for b in range(model.nbody) if self._descends(b, body)]
            geom_owner[np.isin(model.geom_bodyid, subtree)] = index
            self.body_of[name] = body
        self.member_index = {name: i for i, name in enumerate(sorted(domain.objects_dict))}
        for name in sorted({m for g in self.groups for m in g.members}):
            joint = model.joint(domain.objects_dict[name].joints[-1])
            self.qpos_adr[name] = int(joint.qposadr[0])
            self.qvel_adr[name] = int(joint.dofadr[0])
        self.geom_owner = geom_owner
        self.robot_geom_mask = np.asarray(robot_geom_mask, dtype=bool)
        self.fixture_geom_mask = np.asarray(fixture_geom_mask, dtype=bool)
        self.radius = {name: self._horizontal_radius(self.body_of[name]) for name in self.qpos_adr}

    def _descends(self, body: int, ancestor: int) -> bool:
        while body != 0:
            if body == ancestor:
                return True
            body = int(self.model.body_parentid[body])
        return ancestor == 0

    def _horizontal_radius(self, body: int) -> float:
        m, d = self.model, self.data
        centre = d.xpos[body][:2]
        radius = 0.0
        subtree = [b for b in range(m.nbody) if self._descends(b, body)]
        for g in np.flatnonzero(np.isin(m.geom_bodyid, subtree)):
            if m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0:
                continue
            radius = max(radius, float(np.linalg.norm(d.geom_xpos[g][:2] - centre) + m.geom_rbound[g]))
        return radius

    # ------------------------------------------------------------------ sampling
    def _pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        adr = self.qpos_adr[name]
        return self.data.qpos[adr:adr + 3].copy(), self.data.qpos[adr + 3:adr + 7].copy()

    def _set_pose(self, name: str, position: np.ndarray, quat: np.ndarray) -> None:
        adr = self.qpos_adr[name]
        self.data.qpos[adr:adr + 3] = position
        self.data.qpos[adr + 3:adr + 7] = quat / np.linalg.norm(quat)
        self.data.qvel[self.qvel_adr[name]:self.qvel_adr[name] + 6] = 0.0

    def _in_reach(self, xy: np.ndarray) -> bool:
        rel = xy - self.base_xy
        r = float(np.linalg.norm(rel))
        lim = self.limits
        return lim.min_reach_m <= r <= lim.max_reach_m and rel[0] >= lim.min_forward_m

    def _collides(self, group: ObjectGroup) -> bool:
        """True when the group touches anything but its support and itself."""
        import mujoco

        mujoco.mj_forward(self.model, self.data)
        own = {self.member_index[m] for m in group.members}
        n = self.data.ncon
        if n == 0:
            return False
        g1 = self.data.contact.geom1[:n]
        g2 = self.data.contact.geom2[:n]
        for a, b in ((g1, g2), (g2, g1)):
            mine = np.isin(self.geom_owner[a], list(own))
            other_owner = self.geom_owner[b]
            hits_object = mine & (other_owner >= 0) & ~np.isin(other_owner, list(own))
            hits_robot = mine & self.robot_geom_mask[b]
            hits_fixture = mine & (other_owner < 0) & self.fixture_geom_mask[b]
            if np.any(hits_object | hits_robot | hits_fixture):
                return True
        return False

    def sample(self, rng: np.random.Generator, settle: Any, attempts: int) -> dict[str, Any]:
        """Re-place the groups in ``data`` (which holds an official state); ``settle(t)``
        runs ``t`` seconds of physics with the arm holding. Returns a summary.

        Raises:
            LayoutError: no acceptable layout within ``attempts`` tries.
        """
        import mujoco

        if not self.groups:
            return {"moved": {}}
        start_qpos = self.data.qpos.copy()
        start_qvel = self.data.qvel.copy()
        for attempt in range(attempts):
            self.data.qpos[:] = start_qpos
            self.data.qvel[:] = start_qvel
            moved = self._place_all(rng)
            if moved is None:
                continue
            mujoco.mj_forward(self.model, self.data)
            placed = {name: self._pose(name) for g in self.groups for name in g.members}
            settle(self.limits.settle_s)
            if self._stable(placed):
                return {"moved": moved, "attempts": attempt + 1,
                        "displacements": self._displacements(start_qpos, placed)}
        self.data.qpos[:] = start_qpos
        self.data.qvel[:] = start_qvel
        mujoco.mj_forward(self.model, self.data)
        raise LayoutError(
            f"no collision-free random layout in {attempts} attempts; lower layout_spread_m "
            f"(now {self.limits.spread_m} m) or raise layout_attempts"
        )

    def max_object_speed(self) -> float:
        """The largest linear speed of a movable object that a layout may move, m/s."""
        if not self.qvel_adr:
            return 0.0
        return max(float(np.linalg.norm(self.data.qvel[a:a + 3])) for a in self.qvel_adr.values())

    def _displacements(self, start_qpos: np.ndarray,
                       placed: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, dict[str, float]]:
        """Per re-placed object: where it was put relative to its official position
        (world x/y, metres; yaw about the vertical, radians; riders included)."""
        out = {}
        for name, (pos, quat) in sorted(placed.items()):
            adr = self.qpos_adr[name]
            before, q0 = start_qpos[adr:adr + 3], start_qpos[adr + 3:adr + 7]
            yaw = _yaw_of(quat) - _yaw_of(q0)
            out[name] = {"dx_m": round(float(pos[0] - before[0]), 4), "dy_m": round(float(pos[1] - before[1]), 4),
                         "yaw_rad": round(float(np.arctan2(np.sin(yaw), np.cos(yaw))), 4)}
        return out

    def _place_all(self, rng: np.random.Generator) -> dict[str, tuple[float, float, float]] | None:
        lim = self.limits
        original = {name: self._pose(name) for g in self.groups for name in g.members}
        # Park every group far away, then bring them back one at a time.
        for k, group in enumerate(self.groups):
            for name in group.members:
                pos, quat = original[name]
                self._set_pose(name, pos + np.array([0.0, 0.0, 50.0 + 5.0 * k]), quat)
        centres: dict[str, tuple[np.ndarray, float]] = {}
        moved: dict[str, tuple[float, float, float]] = {}
        for gi in rng.permutation(len(self.groups)):
            group = self.groups[int(gi)]
            c0 = original[group.base][0]
            radius = max(np.linalg.norm(original[m][0][:2] - c0[:2]) + self.radius[m] for m in group.members)
            for _ in range(50):
                r = lim.spread_m * np.sqrt(rng.uniform())
                phi = rng.uniform(0.0, 2.0 * np.pi)
                shift = np.array([r * np.cos(phi), r * np.sin(phi), 0.0])
                yaw = rng.uniform(-lim.yaw_rad, lim.yaw_rad)
                centre = c0 + shift
                if not self._in_reach(centre[:2]):
                    continue
                if any(np.linalg.norm(centre[:2] - c[:2]) < radius + rc + lim.clearance_m
                       for c, rc in centres.values()):
                    continue
                c, s_ = np.cos(yaw), np.sin(yaw)
                rot = np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]])
                for name in group.members:
                    pos, quat = original[name]
                    self._set_pose(name, centre + rot @ (pos - c0), _quat_mul(_yaw_quat(yaw), quat))
                if self._collides(group):
                    continue
                centres[group.base] = (centre, radius)
                moved[group.base] = (float(shift[0]), float(shift[1]), float(yaw))
                break
            else:
                return None
        return moved

    def _stable(self, placed: dict[str, tuple[np.ndarray, np.ndarray]]) -> bool:
        lim = self.limits
        for name, (pos, quat) in placed.items():
            now_pos, now_quat = self._pose(name)
            if pos[2] - now_pos[2] > lim.max_drop_m:
                return False
            if _tilt(quat, now_quat) > lim.max_tilt_rad:
                return False
        return True


def _yaw_of(quat: np.ndarray) -> float:
    w, x, y, z = quat
    return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def _z_axis(quat: np.ndarray) -> np.ndarray:
    w, x, y, z = quat
    return np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])


def _tilt(before: np.ndarray, after: np.ndarray) -> float:
    a, b = _z_axis(before), _z_axis(after)
    return float(np.arccos(np.clip(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0)))
