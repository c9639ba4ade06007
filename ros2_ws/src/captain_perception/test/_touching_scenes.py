"""Test scenes with touching objects, made by moving LIBERO objects with the simulator.

Only for tests and benchmarks: objects are moved through their free joints (privileged
simulator access) and the physics is stepped with the robot held still until they
settle, so contacts are physical (a bowl resting inside a plate, a bowl pressed against
a box).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _free_joint(driver: Any, name: str) -> tuple[int, int]:
    s = driver.scene
    body = dict(zip(s.entity_names, s.entity_bodies, strict=True))[name]
    m = s.model
    for j in range(m.njnt):
        b = int(m.jnt_bodyid[j])
        if b == body and int(m.jnt_type[j]) == 0:
            return int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
    raise KeyError(f"{name} has no free joint")


def object_position_world(driver: Any, name: str) -> np.ndarray:
    """World position of an object's free joint (its root body origin), metres."""
    adr, _ = _free_joint(driver, name)
    return driver.scene.data.qpos[adr:adr + 3].copy()


def move_object(driver: Any, name: str, position_world: np.ndarray) -> None:
    """Put an object's root body at a world position (orientation kept), velocity zero."""
    adr, dof = _free_joint(driver, name)
    d = driver.scene.data
    d.qpos[adr:adr + 3] = position_world
    d.qvel[dof:dof + 6] = 0.0


def settle(driver: Any, duration_s: float = 1.0) -> None:
    """Step the physics with the arm and fingers pinned until objects come to rest."""
    import mujoco

    s = driver.scene
    m, d = s.model, s.data
    pinned = np.concatenate([s.arm_qpos, s.finger_qpos])
    q0 = d.qpos[pinned].copy()
    dofs = np.concatenate([s.arm_dof, [int(m.jnt_dofadr[j]) for j in range(m.njnt)
                                       if int(m.jnt_qposadr[j]) in set(s.finger_qpos.tolist())]]).astype(int)
    for _ in range(int(duration_s / m.opt.timestep)):
        mujoco.mj_step(m, d)
        d.qpos[pinned] = q0
        d.qvel[dofs] = 0.0
    mujoco.mj_forward(m, d)


def put_on(driver: Any, name: str, support: str, drop_m: float = 0.03) -> None:
    """Drop ``name`` onto the middle of ``support`` and let it settle."""
    p = object_position_world(driver, name)
    q = object_position_world(driver, support)
    move_object(driver, name, np.array([q[0], q[1], p[2] + drop_m]))
    settle(driver)


def put_beside(driver: Any, name: str, other: str, direction_xy: tuple[float, float], distance_m: float) -> None:
    """Place ``name`` at ``distance_m`` from ``other`` along ``direction_xy``, then push it
    towards ``other`` in small steps until they touch, and settle."""
    import mujoco

    s = driver.scene
    m, d = s.model, s.data
    q = object_position_world(driver, other)
    u = np.asarray(direction_xy, float) / np.linalg.norm(direction_xy)
    p = object_position_world(driver, name)
    bodies_a = _subtree_bodies(m, dict(zip(s.entity_names, s.entity_bodies, strict=True))[name])
    bodies_b = _subtree_bodies(m, dict(zip(s.entity_names, s.entity_bodies, strict=True))[other])
    pos = np.array([q[0] + u[0] * distance_m, q[1] + u[1] * distance_m, p[2] + 0.002])
    for _ in range(200):
        move_object(driver, name, pos)
        mujoco.mj_forward(m, d)
        if _touching(m, d, bodies_a, bodies_b):
            break
        pos[:2] -= u * 0.001
    settle(driver, 0.5)


def touching(driver: Any, a: str, b: str) -> bool:
    """Whether objects ``a`` and ``b`` are in contact."""
    s = driver.scene
    bodies = dict(zip(s.entity_names, s.entity_bodies, strict=True))
    return _touching(s.model, s.data, _subtree_bodies(s.model, bodies[a]), _subtree_bodies(s.model, bodies[b]))


def _subtree_bodies(m: Any, root: int) -> set[int]:
    out = set()
    for b in range(m.nbody):
        j = b
        while j != 0 and j != root:
            j = int(m.body_parentid[j])
        if j == root:
            out.add(b)
    return out


def _touching(m: Any, d: Any, a: set[int], b: set[int], margin_m: float = 0.002) -> bool:
    for c in d.contact[:d.ncon]:
        b1, b2 = int(m.geom_bodyid[c.geom1]), int(m.geom_bodyid[c.geom2])
        if ((b1 in a and b2 in b) or (b1 in b and b2 in a)) and c.dist < margin_m:
            return True
    return False
