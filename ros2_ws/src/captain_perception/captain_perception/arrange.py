"""Scene arrangements made by moving LIBERO objects with the simulator: tests and benchmarks only.

Objects are moved through their free joints (privileged simulator access) and the physics
is stepped with the robot held still until they settle, so contacts are physical (a bowl
resting inside a plate, a box lying in a basket, a bowl pressed against another one).
Nothing here may be used at run time.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _bodies(driver: Any) -> dict[str, int]:
    s = driver.scene
    return dict(zip(s.entity_names, s.entity_bodies, strict=True))


def _free_joint(driver: Any, name: str) -> tuple[int, int]:
    s = driver.scene
    body = _bodies(driver)[name]
    m = s.model
    for j in range(m.njnt):
        if int(m.jnt_bodyid[j]) == body and int(m.jnt_type[j]) == 0:
            return int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
    raise KeyError(f"{name} has no free joint")


def object_position_world(driver: Any, name: str) -> np.ndarray:
    """World position of an object's free joint (its root body origin), metres."""
    adr, _ = _free_joint(driver, name)
    return driver.scene.data.qpos[adr:adr + 3].copy()


def move_object(driver: Any, name: str, position_world: np.ndarray, quaternion_wxyz: Any = None) -> None:
    """Put an object's root body at a world position (metres) and, when given, orientation
    (w, x, y, z; else kept), velocity zero."""
    adr, dof = _free_joint(driver, name)
    d = driver.scene.data
    d.qpos[adr:adr + 3] = position_world
    if quaternion_wxyz is not None:
        d.qpos[adr + 3:adr + 7] = quaternion_wxyz
    d.qvel[dof:dof + 6] = 0.0


def settle(driver: Any, duration_s: float = 1.0) -> None:
    """Step the physics with the arm and fingers pinned until objects come to rest."""
    import mujoco

    s = driver.scene
    m, d = s.model, s.data
    pinned = np.concatenate([s.arm_qpos, s.finger_qpos])
    q0 = d.qpos[pinned].copy()
    fingers = set(s.finger_qpos.tolist())
    dofs = np.concatenate([s.arm_dof, [int(m.jnt_dofadr[j]) for j in range(m.njnt)
                                       if int(m.jnt_qposadr[j]) in fingers]]).astype(int)
    for _ in range(int(duration_s / m.opt.timestep)):
        mujoco.mj_step(m, d)
        d.qpos[pinned] = q0
        d.qvel[dofs] = 0.0
    mujoco.mj_forward(m, d)


def put_on(driver: Any, name: str, support: str, drop_m: float = 0.03,
           offset_xy_m: tuple[float, float] = (0.0, 0.0)) -> None:
    """Drop ``name`` onto the middle of ``support`` (plus ``offset_xy_m``) and let it settle.

    The middle is the support's free-joint origin, or its body origin for a fixture.

    The object is lifted ``drop_m`` above its own height or just above the support's top,
    whichever is higher, so it falls into a basket rather than inside its wall.
    """
    p = object_position_world(driver, name)
    try:
        q = object_position_world(driver, support)
    except KeyError:  # a fixture (the stove, a cabinet): its body's origin
        q = driver.scene.data.xpos[_bodies(driver)[support]].copy()
    top = _top_z_world(driver, support)
    low = _bottom_z_world(driver, name) - p[2]  # lowest point relative to the root body
    z = max(p[2] + drop_m, top - low + 0.01)
    move_object(driver, name, np.array([q[0] + offset_xy_m[0], q[1] + offset_xy_m[1], z]))
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
    bodies = _bodies(driver)
    bodies_a = _subtree_bodies(m, bodies[name])
    bodies_b = _subtree_bodies(m, bodies[other])
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
    bodies = _bodies(driver)
    return _touching(s.model, s.data, _subtree_bodies(s.model, bodies[a]), _subtree_bodies(s.model, bodies[b]))


def _geom_z_world(driver: Any, name: str) -> np.ndarray:
    s = driver.scene
    m, d = s.model, s.data
    sub = _subtree_bodies(m, _bodies(driver)[name])
    gs = [g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in sub]
    # bounding spheres: a coarse but safe vertical extent
    return np.array([[d.geom_xpos[g][2] - m.geom_rbound[g], d.geom_xpos[g][2] + m.geom_rbound[g]] for g in gs])


def _top_z_world(driver: Any, name: str) -> float:
    return float(_geom_z_world(driver, name)[:, 1].max())


def _bottom_z_world(driver: Any, name: str) -> float:
    return float(_geom_z_world(driver, name)[:, 0].min())


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


def contacts_of(driver: Any, name: str, names: list[str]) -> list[str]:
    """Which of ``names`` touch object ``name`` (contacts within 2 mm)."""
    s = driver.scene
    bodies = _bodies(driver)
    mine = _subtree_bodies(s.model, bodies[name])
    return [n for n in names if n != name and n in bodies
            and _touching(s.model, s.data, mine, _subtree_bodies(s.model, bodies[n]))]
