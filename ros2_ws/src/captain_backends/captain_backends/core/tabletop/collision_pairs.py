"""Self-collision pairs that a collision checker may skip, written as an SRDF.

Computed from the robot-only MuJoCo model in the way MoveIt's setup assistant does:

* ``Adjacent``: a body and its nearest ancestor that carries collision geometry
  (bodies without geometry, such as ``robot0_right_hand``, are looked through);
* ``Default``: pairs in contact at the home configuration;
* ``Never``: pairs never closer than ``margin_m`` over ``samples`` random
  configurations (MuJoCo's convex-hull distances, which are conservative: the hulls
  contain the meshes).

Link names are MJCF body names, which Pinocchio uses as frame names.
"""

from __future__ import annotations

import itertools
from xml.sax.saxutils import quoteattr

import numpy as np


def _collision_geoms_by_body(model) -> dict[int, list[int]]:
    bodies: dict[int, list[int]] = {}
    for g in range(model.ngeom):
        if model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0:
            continue
        bodies.setdefault(int(model.geom_bodyid[g]), []).append(g)
    return bodies


def _nearest_collision_ancestor(model, body: int, with_geoms: dict[int, list[int]]) -> int | None:
    parent = int(model.body_parentid[body])
    while parent != 0:
        if parent in with_geoms:
            return parent
        parent = int(model.body_parentid[parent])
    return None


def disabled_collision_pairs(model, arm_joint_ids: list[int], home_rad: np.ndarray,
                             samples: int = 20000, margin_m: float = 0.005,
                             seed: int = 0) -> list[tuple[str, str, str]]:
    """``(body_a, body_b, reason)`` for every robot body pair a checker may skip.

    Args:
        model: the robot-only MuJoCo model.
        arm_joint_ids: ids of the arm joints (sampled within their limits).
        home_rad: the home configuration of those joints.
        samples: random configurations used for the ``Never`` test.
        margin_m: pairs that come closer than this in any sample stay enabled.
        seed: random seed (the result is deterministic).
    """
    import mujoco

    data = mujoco.MjData(model)
    with_geoms = _collision_geoms_by_body(model)
    names = {b: model.body(b).name for b in with_geoms}
    pairs: dict[tuple[int, int], str] = {}
    for body in with_geoms:
        parent = _nearest_collision_ancestor(model, body, with_geoms)
        if parent is not None:
            pairs[tuple(sorted((body, parent)))] = "Adjacent"

    candidates = [p for p in itertools.combinations(sorted(with_geoms), 2) if p not in pairs]
    # Joints other than the arm's (the fingers) are sampled within their ranges too.
    joint_ids = list(range(model.njnt))
    arm_qadr = model.jnt_qposadr[arm_joint_ids]
    lo = model.jnt_range[joint_ids, 0]
    hi = model.jnt_range[joint_ids, 1]
    qadr = model.jnt_qposadr[joint_ids]

    def min_distance(a: int, b: int, distmax: float) -> float:
        best = distmax
        for ga in with_geoms[a]:
            for gb in with_geoms[b]:
                best = min(best, mujoco.mj_geomDistance(model, data, ga, gb, distmax, None))
        return best

    data.qpos[:] = 0.0
    data.qpos[qadr] = np.clip(0.0, lo, hi)
    data.qpos[arm_qadr] = home_rad
    mujoco.mj_kinematics(model, data)
    for a, b in candidates:
        if min_distance(a, b, 0.01) < 0.0:
            pairs[(a, b)] = "Default"

    remaining = [p for p in candidates if p not in pairs]
    rng = np.random.default_rng(seed)
    for _ in range(samples):
        if not remaining:
            break
        data.qpos[qadr] = rng.uniform(lo, hi)
        mujoco.mj_kinematics(model, data)
        remaining = [p for p in remaining if min_distance(p[0], p[1], margin_m + 0.01) >= margin_m]
    for p in remaining:
        pairs[p] = "Never"
    return sorted((names[a], names[b], reason) for (a, b), reason in pairs.items())


def srdf_text(robot_name: str, pairs: list[tuple[str, str, str]]) -> str:
    """An SRDF document listing ``pairs`` as ``<disable_collisions>``."""
    lines = ['<?xml version="1.0"?>', f"<robot name={quoteattr(robot_name)}>"]
    lines += [f"  <disable_collisions link1={quoteattr(a)} link2={quoteattr(b)} reason={quoteattr(r)}/>"
              for a, b, r in pairs]
    lines.append("</robot>")
    return "\n".join(lines) + "\n"
