"""Pinocchio kinematics and coal self-collision on the tabletop's Panda description,
checked against MuJoCo on the same model file."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from captain_backends.core.tabletop.panda_model import panda_model_files
from captain_harness.core.collision import SelfCollisionChecker, shipped_srdf, suggest_disabled_pairs
from captain_harness.core.geometry import pose_matrix, rotation_angle_rad
from captain_harness.core.kinematics import Kinematics

TCP_SITE = "gripper0_grip_site"


@pytest.fixture(scope="module")
def description():
    return panda_model_files().description


@pytest.fixture(scope="module")
def kin(description) -> Kinematics:
    return Kinematics(description)


@pytest.fixture(scope="module")
def checker(kin) -> SelfCollisionChecker:
    return SelfCollisionChecker(kin)


@pytest.fixture(scope="module")
def mj(description):
    model = mujoco.MjModel.from_xml_path(str(description.model_path))
    return model, mujoco.MjData(model)


def _mj_set(mj, description, q_arm: np.ndarray, finger_m: float = 0.02) -> None:
    model, data = mj
    for name, v in zip(description.arm_joint_names, q_arm, strict=True):
        data.qpos[model.joint(name).qposadr[0]] = v
    data.qpos[model.joint("gripper0_finger_joint1").qposadr[0]] = finger_m
    data.qpos[model.joint("gripper0_finger_joint2").qposadr[0]] = -finger_m
    mujoco.mj_kinematics(model, data)


def test_fk_matches_mujoco_grip_site(kin, mj, description) -> None:
    model, data = mj
    rng = np.random.default_rng(0)
    for _ in range(50):
        q = kin.random_configuration(rng)
        _mj_set(mj, description, q)
        T = kin.fk(q)
        site = model.site(TCP_SITE).id
        assert np.allclose(T[:3, 3], data.site_xpos[site], atol=1e-9)
        assert np.allclose(T[:3, :3], data.site_xmat[site].reshape(3, 3), atol=1e-9)


def test_tcp_frame_convention_top_down_at_home(kin, mj, description) -> None:
    """At robosuite's home the gripper points down; the published top-down quaternion is
    within a few degrees of it and its x axis is the finger-to-finger (jaw) axis."""
    T = kin.fk(kin.home_rad)
    top_down = pose_matrix(T[:3, 3], [0, 2**-0.5, 2**-0.5, 0])
    assert math.degrees(rotation_angle_rad(T[:3, :3], top_down[:3, :3])) < 10.0
    model, data = mj
    _mj_set(mj, description, kin.home_rad)
    pads = [data.geom_xpos[model.geom(f"gripper0_finger{i}_pad_collision").id] for i in (1, 2)]
    jaw = (pads[0] - pads[1]) / np.linalg.norm(pads[0] - pads[1])
    assert abs(float(jaw @ T[:3, 0])) > 0.99
    midpoint = 0.5 * (pads[0] + pads[1])
    assert np.linalg.norm(midpoint - T[:3, 3]) < 0.01  # TCP between the finger pads


def test_ik_reaches_100_random_reachable_poses(kin, checker) -> None:
    rng = np.random.default_rng(7)
    poses = []
    while len(poses) < 100:
        q = kin.random_configuration(rng)
        T = kin.fk(q)
        p = T[:3, 3]
        # over the table, fingers pointing horizontally or downwards, collision-free
        if (
            0.25 < p[0] < 0.75
            and abs(p[1]) < 0.4
            and -0.1 < p[2] < 0.45
            and T[2, 2] <= 0.0
            and not checker.in_collision(q)
        ):
            poses.append(T)
    converged = 0
    for T in poses:
        res = kin.solve_ik(T, kin.home_rad, restarts=16, rng=rng, is_valid=lambda q: not checker.in_collision(q))
        converged += res.success
        T_reached = kin.fk(res.q)
        assert np.linalg.norm(T_reached[:3, 3] - T[:3, 3]) < 0.005
        assert math.degrees(rotation_angle_rad(T_reached[:3, :3], T[:3, :3])) < 3.0
        assert kin.within_limits(res.q) and not checker.in_collision(res.q)
    assert converged >= 98  # any others end within 5 mm / 3 deg but above the 0.1 mm IK tolerance


def test_ik_reports_unreachable_targets(kin) -> None:
    T = pose_matrix([1.6, 0.0, 0.3], [0, 2**-0.5, 2**-0.5, 0])
    res = kin.solve_ik(T, kin.home_rad, restarts=2)
    assert not res.success and res.reason in ("no_convergence", "joint_limit")
    assert res.position_error_m > 0.5


def test_self_collision_agrees_with_mujoco_hull_distances(kin, checker, mj, description) -> None:
    model, data = mj
    geoms_of: dict[str, list[int]] = {}
    for g in range(model.ngeom):
        if model.geom_contype[g] or model.geom_conaffinity[g]:
            geoms_of.setdefault(model.body(model.geom_bodyid[g]).name, []).append(g)
    pairs = [(checker.body_of[i], checker.body_of[j]) for i, j in checker._pairs]
    rng = np.random.default_rng(3)
    agreed = checked = 0
    for _ in range(400):
        q = kin.random_configuration(rng)
        _mj_set(mj, description, q)
        dmin = min(
            mujoco.mj_geomDistance(model, data, ga, gb, 0.05, None)
            for a, b in pairs
            for ga in geoms_of[a]
            for gb in geoms_of[b]
        )
        if abs(dmin) < 0.003:
            continue  # too close to call between two hull implementations
        checked += 1
        agreed += (dmin < 0) == checker.in_collision(q)
    assert checked > 300
    assert agreed == checked


def test_home_is_free_and_a_folded_arm_collides(kin, checker) -> None:
    assert not checker.in_collision(kin.home_rad)
    folded = np.array([0.0, 1.7, 0.0, -3.0, 0.0, 3.7, 0.0])  # hand folded back onto the upper arm
    assert checker.in_collision(kin.clamp(folded))
    assert checker.colliding_links(kin.clamp(folded))


def test_shipped_srdf_applies_to_prefixed_names(kin) -> None:
    srdf = shipped_srdf("panda")
    assert srdf is not None
    c = SelfCollisionChecker(kin, srdf_path=srdf)
    never = [p for p in c.disabled if p.reason == "Never"]
    assert never and all(p.link1.startswith(("robot0_", "gripper0_")) for p in never)
    assert c.active_pair_count < 45
    suggested = suggest_disabled_pairs(kin, samples=200)
    adjacent = {frozenset((p.link1, p.link2)) for p in suggested if p.reason == "Adjacent"}
    assert frozenset(("robot0_link6", "gripper0_right_gripper")) in adjacent
