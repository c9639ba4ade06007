"""Contact forces between the robot and the world, read at every physics substep.

Every geom of the scene is classified once: arm link, hand (palm), left finger, right
finger, mount, or world; world geoms also carry the index of the LIBERO object (movable
object or fixture) they belong to. After each ``mj_step2`` the driver reads, from
MuJoCo's contact list and ``mj_contactForce``:

* the summed magnitude of the contact forces of robot geoms against the world, N, and
  the same without the fingers' contacts with LIBERO objects and fixtures (what a force
  guard with ``ignore_finger_contacts`` watches while the fingers hold or pull
  something; the fingers touching the table or floor still count);
* the normal force on each finger, N;
* the external wrench on the tool (hand and fingers) about the tool centre point, in the
  world frame, N and N·m;
* which objects touch each finger (an object is *held* when both fingers touch it).

MuJoCo's contact force acts on ``geom2`` (and its opposite on ``geom1``); the contact
frame's first row is the normal, pointing from ``geom1`` to ``geom2``. Robot-robot and
robot-mount contacts are not external and are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

WORLD, ARM, HAND, LEFT_FINGER, RIGHT_FINGER, MOUNT = 0, 1, 2, 3, 4, 5


@dataclass
class ContactReading:
    """Robot-world contact quantities of one physics substep (world frame)."""

    total_force_n: float = 0.0
    without_finger_grasp_n: float = 0.0
    finger_forces_n: np.ndarray = field(default_factory=lambda: np.zeros(2))
    tool_wrench_world: np.ndarray = field(default_factory=lambda: np.zeros(6))
    left_objects: frozenset[int] = frozenset()
    right_objects: frozenset[int] = frozenset()

    @property
    def held_objects(self) -> frozenset[int]:
        """Indices of objects touched by both fingers."""
        return self.left_objects & self.right_objects


def _subtree_bodies(model: Any, root: int) -> list[int]:
    return [b for b in range(model.nbody) if _has_ancestor(model, b, root)]


def _has_ancestor(model: Any, body: int, ancestor: int) -> bool:
    while True:
        if body == ancestor:
            return True
        if body == 0:
            return False
        body = int(model.body_parentid[body])


class ContactClassifier:
    """Geom classes and per-substep force readings for one LIBERO scene.

    Args:
        model: the MuJoCo model.
        robot_root: the robot's root body id (``robot0_base``).
        hand_bodies / left_finger_bodies / right_finger_bodies: body ids.
        mount_root: root body of the robot's mount (static, ignored), or None.
        object_roots: root body id of every LIBERO object, in a fixed order; the index
            in this sequence is the object index used by the readings.
        tcp_site: site id of the tool centre point.
    """

    def __init__(self, model: Any, robot_root: int, hand_bodies: list[int], left_finger_bodies: list[int],
                 right_finger_bodies: list[int], mount_root: int | None, object_roots: list[int],
                 tcp_site: int) -> None:
        self.tcp_site = tcp_site
        body_class = np.full(model.nbody, WORLD, dtype=np.int8)
        for b in _subtree_bodies(model, robot_root):
            body_class[b] = ARM
        for b in hand_bodies:
            body_class[b] = HAND
        for b in left_finger_bodies:
            body_class[b] = LEFT_FINGER
        for b in right_finger_bodies:
            body_class[b] = RIGHT_FINGER
        for b in _subtree_bodies(model, mount_root) if mount_root is not None else ():
            body_class[b] = MOUNT
        body_object = np.full(model.nbody, -1, dtype=np.int32)
        for index, root in enumerate(object_roots):
            for b in _subtree_bodies(model, root):
                body_object[b] = index
        self.geom_class = body_class[model.geom_bodyid]
        self.geom_object = body_object[model.geom_bodyid]
        self._is_robot = (self.geom_class != WORLD) & (self.geom_class != MOUNT)
        self._is_world = self.geom_class == WORLD
        self._force = np.zeros(6)

    def read(self, model: Any, data: Any) -> ContactReading:
        """The robot-world contact quantities of the current contact list (call after
        ``mj_step2``, when ``efc_force`` matches ``data.contact``)."""
        import mujoco

        reading = ContactReading()
        n = data.ncon
        if n == 0:
            return reading
        contact = data.contact
        g1 = contact.geom1[:n]
        g2 = contact.geom2[:n]
        robot1 = self._is_robot[g1] & self._is_world[g2]
        robot2 = self._is_robot[g2] & self._is_world[g1]
        indices = np.flatnonzero(robot1 | robot2)
        if indices.size == 0:
            return reading
        p_tcp = data.site_xpos[self.tcp_site]
        left, right = set(), set()
        f = self._force
        for i in indices:
            i = int(i)
            if contact.efc_address[i] < 0:
                continue
            mujoco.mj_contactForce(model, data, i, f)
            frame = contact.frame[i].reshape(3, 3)
            force_on_geom2 = frame.T @ f[:3]
            if robot2[i]:
                robot_geom, world_geom, force = int(g2[i]), int(g1[i]), force_on_geom2
            else:
                robot_geom, world_geom, force = int(g1[i]), int(g2[i]), -force_on_geom2
            magnitude = float(np.linalg.norm(force))
            kind = self.geom_class[robot_geom]
            reading.total_force_n += magnitude
            obj = int(self.geom_object[world_geom])
            if kind in (LEFT_FINGER, RIGHT_FINGER):
                side = 0 if kind == LEFT_FINGER else 1
                reading.finger_forces_n[side] += abs(float(f[0]))
                if obj >= 0 and f[0] > 0.0:
                    (left if side == 0 else right).add(obj)
            if obj < 0 or kind not in (LEFT_FINGER, RIGHT_FINGER):
                reading.without_finger_grasp_n += magnitude
            if kind in (HAND, LEFT_FINGER, RIGHT_FINGER):
                reading.tool_wrench_world[:3] += force
                reading.tool_wrench_world[3:] += np.cross(contact.pos[i] - p_tcp, force)
        reading.left_objects = frozenset(left)
        reading.right_objects = frozenset(right)
        return reading
