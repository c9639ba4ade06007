"""Contact forces between the robot and the rest of the world, read from MuJoCo.

``mj_contactForce`` gives each contact's force in its contact frame (normal first).
The robot's geoms are split into the arm, the hand and the two fingers; "world" is
every geom that is not the robot's (table, pedestal, floor, objects).

* ``robot_world_force_n``: the guarded quantity, the sum of the force magnitudes of
  all robot-world contacts; called at every physics substep, so it is kept lean.
* ``ContactSummary`` (``summarize``): finger-pad normal forces, the external wrench on
  the hand and which movable bodies each finger touches; taken once per state read.

MuJoCo's contact normal points from ``geom1`` to ``geom2`` and the contact force
pushes ``geom2`` along it; the force on the robot is therefore ``-f`` when the robot
geom is ``geom1`` and ``+f`` when it is ``geom2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ContactSummary:
    """Robot-world contacts at one instant.

    Attributes:
        total_force_n: sum of the force magnitudes of all robot-world contacts, N.
        finger_forces_n: normal force on the left and right finger, N.
        force_world_n: net contact force on the hand and fingers, world axes, N.
        torque_world_nm: net contact torque on the hand and fingers about the
            reference point passed to ``summarize``, world axes, N·m.
        left_touching / right_touching: body ids of the non-robot bodies touching the
            left / right finger.
        body_pairs: (body_a, body_b) pairs, a < b, of all contacts between non-robot
            bodies.
    """

    total_force_n: float
    finger_forces_n: np.ndarray
    force_world_n: np.ndarray
    torque_world_nm: np.ndarray
    left_touching: frozenset[int]
    right_touching: frozenset[int]
    body_pairs: frozenset[tuple[int, int]]


def _as_slice(ids) -> slice | np.ndarray:
    ids = np.asarray(ids, dtype=int)
    if ids.size and np.array_equal(ids, np.arange(ids[0], ids[0] + ids.size)):
        return slice(int(ids[0]), int(ids[0]) + ids.size)
    return ids


class ContactReader:
    """Classifies geoms once and reads robot-world contact forces.

    Args:
        model: the MuJoCo model.
        robot_body_ids: every body of the robot (arm, hand, fingers).
        hand_body_ids: the hand and finger bodies (for the wrench).
        left_finger_body_ids / right_finger_body_ids: bodies of each finger.
        arm_dof_ids: the arm's dofs; when given, ``robot_world_force_n`` returns 0 at
            once while no constraint force acts on them (the common, contact-free case).
    """

    def __init__(self, model, robot_body_ids, hand_body_ids, left_finger_body_ids,
                 right_finger_body_ids, arm_dof_ids=None) -> None:
        geom_body = np.asarray(model.geom_bodyid)
        self._arm_dofs = _as_slice(arm_dof_ids) if arm_dof_ids is not None else None
        self.robot = np.isin(geom_body, list(robot_body_ids))
        self.hand = np.isin(geom_body, list(hand_body_ids))
        left = np.isin(geom_body, list(left_finger_body_ids))
        right = np.isin(geom_body, list(right_finger_body_ids))
        self.finger = left | right
        self.side = np.zeros(model.ngeom, dtype=np.int8)
        self.side[left] = 1
        self.side[right] = 2
        # Geoms of bodies that can move (not welded to the world) and are not the robot.
        self.movable = (np.asarray(model.body_weldid)[geom_body] != 0) & ~self.robot
        self.geom_body = geom_body
        self._f6 = np.zeros(6)

    def robot_world_force_n(self, model, data, ignore_finger_object_contacts: bool = False) -> float:
        """Sum of the force magnitudes of the robot-world contacts now, N.

        Args:
            ignore_finger_object_contacts: skip contacts between a finger and a movable
                object (a grasped object's squeeze); fingers touching fixtures (the
                table) still count.
        """
        if data.ncon == 0:
            return 0.0
        # Fast path: a contact force on any robot geom acts on the arm's joints, so
        # when their constraint forces are exactly zero no robot contact has force.
        if self._arm_dofs is not None and not data.qfrc_constraint[self._arm_dofs].any():
            return 0.0
        geom = data.contact.geom
        robot = self.robot[geom]
        selected = robot[:, 0] != robot[:, 1]
        if ignore_finger_object_contacts:
            finger = self.finger[geom]
            movable = self.movable[geom]
            selected &= ~((finger[:, 0] & movable[:, 1]) | (finger[:, 1] & movable[:, 0]))
        rows = selected.nonzero()[0]
        if rows.size == 0:
            return 0.0
        import mujoco

        total = 0.0
        f6 = self._f6
        for i in rows.tolist():
            mujoco.mj_contactForce(model, data, i, f6)
            total += math.sqrt(f6[0] * f6[0] + f6[1] * f6[1] + f6[2] * f6[2])
        return total

    def finger_touching(self, data) -> tuple[frozenset[int], frozenset[int]]:
        """Body ids of the non-robot bodies the left / right finger touches now."""
        if data.ncon == 0:
            return frozenset(), frozenset()
        geom = data.contact.geom
        side = self.side[geom]
        rows = side.any(axis=1).nonzero()[0]
        if rows.size == 0:
            return frozenset(), frozenset()
        left: set[int] = set()
        right: set[int] = set()
        sides, geoms = side[rows].tolist(), geom[rows].tolist()
        robots = self.robot[geom[rows]].tolist()
        for (s0, s1), (g0, g1), (r0, r1) in zip(sides, geoms, robots, strict=True):
            if s0 and not r1:
                (left if s0 == 1 else right).add(int(self.geom_body[g1]))
            if s1 and not r0:
                (left if s1 == 1 else right).add(int(self.geom_body[g0]))
        return frozenset(left), frozenset(right)

    def body_pairs(self, data) -> frozenset[tuple[int, int]]:
        """(body_a, body_b), a < b, of every contact between two non-robot bodies."""
        if data.ncon == 0:
            return frozenset()
        geom = data.contact.geom
        bodies = self.geom_body[geom]
        robot = self.robot[geom]
        keep = ~(robot[:, 0] | robot[:, 1]) & (bodies[:, 0] != bodies[:, 1])
        pairs = np.sort(bodies[keep], axis=1)
        return frozenset(map(tuple, pairs.tolist()))

    def summarize(self, model, data, reference_point_world: np.ndarray,
                  with_body_pairs: bool = True) -> ContactSummary:
        """Everything about the current contacts that a state read or snapshot needs
        (``body_pairs`` is left empty unless ``with_body_pairs``)."""
        import mujoco

        total = 0.0
        fingers = np.zeros(2)
        force = np.zeros(3)
        torque = np.zeros(3)
        left: set[int] = set()
        right: set[int] = set()
        if data.ncon:
            contact = data.contact
            geom = contact.geom
            robot = self.robot[geom]
            f6 = self._f6
            for i in (robot[:, 0] != robot[:, 1]).nonzero()[0].tolist():
                mujoco.mj_contactForce(model, data, i, f6)
                robot_is_first = bool(robot[i, 0])
                robot_geom, other = (geom[i, 0], geom[i, 1]) if robot_is_first else (geom[i, 1], geom[i, 0])
                total += float(np.linalg.norm(f6[:3]))
                f_world = contact.frame[i].reshape(3, 3).T @ f6[:3]
                if robot_is_first:
                    f_world = -f_world
                side = int(self.side[robot_geom])
                if side:
                    fingers[side - 1] += float(f6[0])
                    (left if side == 1 else right).add(int(self.geom_body[other]))
                if self.hand[robot_geom]:
                    force += f_world
                    torque += np.cross(contact.pos[i] - reference_point_world, f_world)
        pairs = self.body_pairs(data) if with_body_pairs else frozenset()
        return ContactSummary(total, fingers, force, torque, frozenset(left), frozenset(right), pairs)
