"""Planning of straight Cartesian sweeps: timing, straightness and the prechecks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from captain_backends.core.tabletop.panda_model import panda_model_files
from captain_harness.core.collision import SelfCollisionChecker
from captain_harness.core.geometry import (
    matrix_to_quat,
    quat_angle_rad,
    quat_multiply,
    rotation_about_axis,
    slerp,
)
from captain_harness.core.kinematics import Kinematics
from captain_harness.core.motion_config import MotionConfig
from captain_harness.core.sweep import TimeScaling, plan_reverse, plan_sweep

DOWN = np.array([0.0, 2**-0.5, 2**-0.5, 0.0])


@pytest.fixture(scope="module")
def kin() -> Kinematics:
    return Kinematics(panda_model_files().description)


@pytest.fixture(scope="module")
def col(kin) -> SelfCollisionChecker:
    return SelfCollisionChecker(kin)


@pytest.fixture(scope="module")
def cfg() -> MotionConfig:
    return MotionConfig()


def test_time_scaling_is_a_monotone_trapezoid() -> None:
    ts = TimeScaling(duration_s=2.0, accel_s=0.25)
    t = np.linspace(0.0, 2.0, 2001)
    s = ts.s(t)
    assert s[0] == 0.0 and s[-1] == pytest.approx(1.0)
    assert np.all(np.diff(s) >= 0.0)
    rate = np.diff(s) / np.diff(t)
    assert rate.max() == pytest.approx(ts.peak_rate(), rel=1e-3)
    assert rate[len(rate) // 2] == pytest.approx(1.0 / 1.75, rel=1e-6)  # constant in the middle


def test_sweep_is_straight_with_slerped_orientation_at_the_requested_speed(kin, col, cfg) -> None:
    home = kin.home_rad
    start = kin.fk(home)
    goal_p = start[:3, 3] + np.array([0.05, 0.25, -0.12])
    goal_q = quat_multiply(rotation_about_axis([0, 0, 1], 0.6), DOWN)
    plan = plan_sweep(kin, col, cfg, home, goal_p, goal_q, speed_m_s=0.08, angular_rad_s=0.5)
    assert plan.ok, plan.message
    length = float(np.linalg.norm(goal_p - start[:3, 3]))
    assert plan.duration_s == pytest.approx(length / 0.08 + cfg.accel_time_s, rel=1e-6)
    dt = 0.002
    targets = plan.joint_targets(dt)
    positions = kin.tcp_positions(targets)
    a, d = start[:3, 3], goal_p - start[:3, 3]
    along = np.clip((positions - a) @ d / (d @ d), 0.0, 1.0)
    off_line = np.linalg.norm(positions - (a + along[:, None] * d), axis=1)
    assert off_line.max() < 0.001
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=1) / dt
    assert speed.max() < 0.08 * 1.05
    q0 = matrix_to_quat(start[:3, :3])
    worst = max(
        quat_angle_rad(matrix_to_quat(kin.fk(q)[:3, :3]), slerp(q0, goal_q, float(s)))
        for q, s in zip(targets[::25], along[::25], strict=True)
    )
    assert math.degrees(worst) < 0.5
    end = kin.fk(targets[-1])
    assert np.linalg.norm(end[:3, 3] - goal_p) < 1e-4


def test_duration_alone_sets_the_pace_and_with_speed_is_a_limit(kin, col, cfg) -> None:
    home = kin.home_rad
    goal = kin.fk(home)[:3, 3] + np.array([0.0, 0.1, 0.0])
    exact = plan_sweep(kin, col, cfg, home, goal, DOWN, duration_s=4.0)
    assert exact.ok and exact.duration_s == pytest.approx(4.0)
    paced = plan_sweep(kin, col, cfg, home, goal, DOWN, speed_m_s=0.05, duration_s=30.0)
    assert paced.ok and paced.duration_s == pytest.approx(0.1 / 0.05 + cfg.accel_time_s, rel=1e-6)
    too_short = plan_sweep(kin, col, cfg, home, goal, DOWN, speed_m_s=0.01, duration_s=3.0)
    assert not too_short.ok and too_short.stop_reason == "timeout" and "duration" in too_short.message
    too_fast = plan_sweep(kin, col, cfg, home, goal, DOWN, duration_s=0.2)
    assert not too_fast.ok and too_fast.stop_reason == "timeout"


def test_prechecks_refuse_workspace_reach_and_joint_limits(kin, col, cfg) -> None:
    home = kin.home_rad
    below = plan_sweep(kin, col, cfg, home, np.array([0.5, 0.0, -0.6]), DOWN)
    assert below.stop_reason == "workspace_limit" and len(below.q_waypoints) == 0
    far = plan_sweep(kin, col, cfg, home, np.array([0.95, 0.6, 0.9]), DOWN)
    assert far.stop_reason == "ik_failed" and 0.0 < far.fail_fraction < 1.0
    # winding the wrist 172 deg the other way passes joint 7's limit; the message offers
    # the equivalent grasp turned 180 deg
    wound = quat_multiply(rotation_about_axis([0, 0, 1], -3.0), DOWN)
    plan = plan_sweep(kin, col, cfg, home, kin.fk(home)[:3, 3], wound)
    assert plan.stop_reason == "joint_limit" and plan.limited_joint == kin.joint_names[-1]
    flipped = quat_multiply(wound, np.array([0.0, 0.0, 0.0, 1.0]))
    retry = plan_sweep(kin, col, cfg, home, kin.fk(home)[:3, 3], flipped)
    assert retry.ok, retry.message


def test_precheck_refuses_a_path_into_self_collision(kin, col, cfg) -> None:
    rng = np.random.default_rng(11)
    for _ in range(2000):
        q_goal = kin.random_configuration(rng)
        if not col.in_collision(q_goal):
            continue
        q_start = kin.clamp(q_goal + rng.normal(scale=0.15, size=kin.nq))
        if col.in_collision(q_start):
            continue
        T = kin.fk(q_goal)
        if not np.all((T[:3, 3] > cfg.workspace_min_m) & (T[:3, 3] < cfg.workspace_max_m)):
            continue
        plan = plan_sweep(kin, col, cfg, q_start, T[:3, 3], matrix_to_quat(T[:3, :3]), speed_m_s=0.05)
        if plan.stop_reason == "self_collision":
            assert plan.colliding_links and not plan.ok
            assert plan.fail_fraction is not None and "hit itself" in plan.message
            return
        assert plan.stop_reason != "target_reached" or not col.in_collision(plan.goal_q)
    pytest.fail("no path into self-collision was refused")


def _distance_to_polyline(p: np.ndarray, line: np.ndarray) -> float:
    a, b = line[:-1], line[1:]
    d = b - a
    t = np.clip(np.einsum("ij,ij->i", p - a, d) / np.maximum(np.einsum("ij,ij->i", d, d), 1e-18), 0.0, 1.0)
    return float(np.min(np.linalg.norm(a + t[:, None] * d - p, axis=1)))


def test_reverse_retraces_a_recorded_path(kin, cfg) -> None:
    home = kin.home_rad
    path = np.array([home + np.array([0.0, 0.004 * k, 0.0, -0.004 * k, 0.0, 0.0, 0.0]) for k in range(60)])
    tcp = kin.tcp_positions(path)
    total = float(np.sum(np.linalg.norm(np.diff(tcp, axis=0), axis=1)))
    plan = plan_reverse(kin, cfg, path, path[-1], max_distance_m=0.03, max_duration_s=10.0, speed_m_s=0.03)
    assert plan.ok and plan.path_length_m == pytest.approx(min(0.03, total), abs=1e-9)
    back = kin.tcp_positions(plan.joint_targets(0.01))
    assert max(_distance_to_polyline(p, tcp) for p in back) < 0.0005
    assert np.linalg.norm(back[-1] - tcp[-1]) == pytest.approx(0.03, abs=0.002)
    # the duration bound shortens the distance instead of refusing
    short = plan_reverse(kin, cfg, path, path[-1], max_distance_m=0.05, max_duration_s=0.5, speed_m_s=0.03)
    assert short.ok and short.path_length_m == pytest.approx(0.03 * (0.5 - cfg.accel_time_s), rel=1e-6)
    nothing = plan_reverse(kin, cfg, path[:1], path[0], max_distance_m=0.05, max_duration_s=5.0, speed_m_s=0.03)
    assert not nothing.ok and nothing.stop_reason == "nothing_to_recover"
