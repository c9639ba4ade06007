"""Planning of straight Cartesian sweeps and of reversals along a recorded path.

A sweep moves the TCP on the straight line from its current position to the target
while the orientation follows the shortest rotation (slerp), both driven by one path
parameter ``s`` in [0, 1] with a trapezoidal speed profile. The path is solved by IK at
waypoints a few centimetres apart, each seeded with the joints extrapolated from the
previous waypoints (on a smooth path IK then mostly confirms the prediction), and
checked before anything moves: IK success, joint limits, joint jumps (a change of IK
branch), self-collision, the workspace box and the joint velocity limits. Between
waypoints the joint targets are interpolated linearly at the control rate.

All poses are in the robot base frame (metres, radians); times in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from captain_harness.core.collision import SelfCollisionChecker
from captain_harness.core.geometry import pose_matrix, pose_parts, quat_multiply, rotation_angle_rad, vector_norm
from captain_harness.core.kinematics import Kinematics
from captain_harness.core.motion_config import MotionConfig

TARGET_REACHED = "target_reached"
IK_FAILED = "ik_failed"
JOINT_LIMIT = "joint_limit"
SELF_COLLISION = "self_collision"
WORKSPACE_LIMIT = "workspace_limit"
TIMEOUT = "timeout"


@dataclass(frozen=True)
class TimeScaling:
    """Trapezoidal profile of the path parameter: ``s(0)=0``, ``s(duration_s)=1``, ramps of
    ``accel_s`` at both ends and constant speed between."""

    duration_s: float
    accel_s: float

    def s(self, t_s: np.ndarray) -> np.ndarray:
        """Path parameter at times ``t_s`` (clipped to [0, 1])."""
        T, ta = self.duration_s, self.accel_s
        t = np.minimum(np.maximum(np.asarray(t_s, dtype=float), 0.0), T)
        if T <= 0.0:
            return np.ones_like(t)
        if ta <= 1e-9:
            return t / T
        v = 1.0 / (T - ta)
        a = v / ta
        return np.where(t < ta, 0.5 * a * t * t, np.where(t > T - ta, 1.0 - 0.5 * a * (T - t) ** 2, v * (t - 0.5 * ta)))

    def peak_rate(self) -> float:
        """Largest ds/dt, 1/s."""
        return 1.0 / max(self.duration_s - self.accel_s, 1e-9)


@dataclass
class PathPlan:
    """A checked joint path and its timing.

    Attributes:
        ok: every check passed; ``stop_reason`` is then ``"target_reached"``.
        stop_reason: ``target_reached`` or the failing check (``ik_failed``,
            ``joint_limit``, ``self_collision``, ``workspace_limit``, ``timeout``).
        message: what failed and what to change.
        fail_fraction: path fraction (0..1) where a check failed, else None.
        s_waypoints / q_waypoints: the path parameter and joint configuration (rad,
            command order) of each waypoint, (K,) and (K, nq); up to the failure.
        timing: the time scaling (None when planning failed before timing).
        path_length_m / rotation_rad: TCP travel and rotation of the whole request.
        start_T / goal_T: TCP poses (4x4, base frame) of the path ends.
        slowed_for_joint_velocity: the requested speed would exceed a joint velocity
            limit and the sweep was slowed.
        colliding_links: the colliding links when ``stop_reason == "self_collision"``.
        limited_joint: the joint at its limit when ``stop_reason == "joint_limit"``.
        details: extra numbers for diagnostics.
    """

    ok: bool
    stop_reason: str
    message: str
    s_waypoints: np.ndarray
    q_waypoints: np.ndarray
    path_length_m: float
    rotation_rad: float
    start_T: np.ndarray
    goal_T: np.ndarray
    timing: TimeScaling | None = None
    fail_fraction: float | None = None
    slowed_for_joint_velocity: bool = False
    colliding_links: tuple[tuple[str, str], ...] = ()
    limited_joint: str = ""
    details: dict = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        """Planned duration (0 when the plan failed before timing)."""
        return self.timing.duration_s if self.timing is not None else 0.0

    @property
    def goal_q(self) -> np.ndarray:
        """The last waypoint's configuration."""
        return self.q_waypoints[-1]

    def joint_targets(self, period_s: float) -> np.ndarray:
        """Joint targets (N, nq) at ``t = period_s, 2 period_s, ..., duration``: the
        command of each control period (the last one is the goal)."""
        assert self.timing is not None
        n = max(1, math.ceil(self.timing.duration_s / period_s - 1e-9))
        t = np.arange(1, n + 1) * period_s
        s = self.timing.s(t)
        s[-1] = 1.0
        return interpolate_waypoints(self.s_waypoints, self.q_waypoints, s)


def interpolate_waypoints(s_wp: np.ndarray, q_wp: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Piecewise-linear joint interpolation of waypoints (s_wp increasing) at ``s``."""
    idx = np.searchsorted(s_wp, s, side="right")
    idx -= 1
    np.minimum(np.maximum(idx, 0, out=idx), len(s_wp) - 2, out=idx)
    s0 = s_wp[idx]
    idx1 = idx + 1
    w = s - s0
    w /= np.maximum(s_wp[idx1] - s0, 1e-12)
    np.minimum(np.maximum(w, 0.0, out=w), 1.0, out=w)
    w = w[:, None]
    out = q_wp[idx]
    out *= 1.0 - w
    q1 = q_wp[idx1]
    q1 *= w
    out += q1
    return out


def _timing_for(
    length_m: float,
    angle_rad: float,
    cfg: MotionConfig,
    speed_m_s: float | None,
    angular_rad_s: float | None,
    duration_s: float | None,
) -> tuple[TimeScaling | None, str]:
    """Time scaling of a sweep, or (None, message) when the request cannot be timed.

    Semantics: ``speed`` / ``angular`` set the pace (defaults when omitted). ``duration``
    alone sets the sweep's exact length; given together with a speed it is the most the
    sweep may take.
    """
    paced = speed_m_s is not None or angular_rad_s is not None or duration_s is None
    v = speed_m_s if speed_m_s is not None else cfg.default_linear_speed_m_s
    w = angular_rad_s if angular_rad_s is not None else cfg.default_angular_speed_rad_s
    if paced:
        cruise = max(length_m / v, angle_rad / w, 1e-3)
        ta = min(cfg.accel_time_s, cruise)
        total = cruise + ta
        if duration_s is not None and total > duration_s + 1e-9:
            return None, (
                f"the sweep needs {total:.3g} s at speed {v:g} m/s / angular {w:g} rad/s "
                f"({length_m:.4g} m, {angle_rad:.3g} rad) but duration={duration_s:g} s; "
                "raise duration or the speed"
            )
    else:
        assert duration_s is not None
        total = duration_s
        ta = min(cfg.accel_time_s, total / 3.0)
        peak_v = length_m / max(total - ta, 1e-9)
        peak_w = angle_rad / max(total - ta, 1e-9)
        if peak_v > cfg.max_linear_speed_m_s or peak_w > cfg.max_angular_speed_rad_s:
            need = max(length_m / cfg.max_linear_speed_m_s, angle_rad / cfg.max_angular_speed_rad_s) + ta
            return None, (
                f"duration={duration_s:g} s is too short for {length_m:.4g} m / {angle_rad:.3g} rad "
                f"within the speed limits ({cfg.max_linear_speed_m_s:g} m/s, "
                f"{cfg.max_angular_speed_rad_s:g} rad/s); use duration >= {need:.3g}"
            )
    if total > cfg.max_sweep_duration_s:
        return None, (
            f"the sweep would take {total:.3g} s, more than the limit {cfg.max_sweep_duration_s:g} s; "
            "raise speed or split the motion"
        )
    return TimeScaling(total, ta), ""


class _LinePoses:
    """Poses on the straight line from (p0, q0) to (p1, q1): position linear in ``s``,
    orientation by slerp on the shorter arc (plain floats: this runs per waypoint)."""

    def __init__(self, p0: np.ndarray, p1: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> None:
        q0 = q0 / vector_norm(q0)
        q1 = q1 / vector_norm(q1)
        d = float(np.dot(q0, q1))
        if d < 0.0:
            q1, d = -q1, -d
        self.p0 = p0.tolist()
        self.dp = (p1 - p0).tolist()
        self.q0 = q0.tolist()
        self.q1 = q1.tolist()
        self.theta = math.acos(min(1.0, d))
        self.sin_theta = math.sin(self.theta)

    def xyzquat(self, s: float) -> list[float]:
        """The pose at ``s`` as ``[x, y, z, qx, qy, qz, qw]`` (metres; unit quaternion, scalar
        last: Pinocchio's XYZQUAT order), plain floats."""
        if self.sin_theta < 1e-6:
            a, b = 1.0 - s, s
        else:
            a = math.sin((1.0 - s) * self.theta) / self.sin_theta
            b = math.sin(s * self.theta) / self.sin_theta
        (w0, x0, y0, z0), (w1, x1, y1, z1) = self.q0, self.q1
        w, x, y, z = a * w0 + b * w1, a * x0 + b * x1, a * y0 + b * y1, a * z0 + b * z1
        n = math.sqrt(w * w + x * x + y * y + z * z)
        (px, py, pz), (dx, dy, dz) = self.p0, self.dp
        return [px + s * dx, py + s * dy, pz + s * dz, x / n, y / n, z / n, w / n]

    def parts(self, s: float) -> tuple[list[float], list[float]]:
        """(position [x, y, z], rotation matrix row-major, 9 values) at ``s``, plain floats."""
        px, py, pz, x, y, z, w = self.xyzquat(s)
        position = [px, py, pz]
        rotation = [
            1 - 2 * (y * y + z * z),
            2 * (x * y - z * w),
            2 * (x * z + y * w),
            2 * (x * y + z * w),
            1 - 2 * (x * x + z * z),
            2 * (y * z - x * w),
            2 * (x * z - y * w),
            2 * (y * z + x * w),
            1 - 2 * (x * x + y * y),
        ]
        return position, rotation

    def at(self, s: float) -> np.ndarray:
        """4x4 pose at path parameter ``s`` in [0, 1]."""
        position, r = self.parts(s)
        return np.array(
            [
                [r[0], r[1], r[2], position[0]],
                [r[3], r[4], r[5], position[1]],
                [r[6], r[7], r[8], position[2]],
                [0.0, 0.0, 0.0, 1.0],
            ]
        )


def _in_box(p: np.ndarray, cfg: MotionConfig) -> bool:
    return all(lo <= v <= hi for lo, v, hi in zip(cfg.workspace_min_m, p.tolist(), cfg.workspace_max_m, strict=True))


def _box_text(cfg: MotionConfig) -> str:
    lo, hi = cfg.workspace_min_m, cfg.workspace_max_m
    return f"x [{lo[0]:g}, {hi[0]:g}], y [{lo[1]:g}, {hi[1]:g}], z [{lo[2]:g}, {hi[2]:g}] m (base frame)"


def _fmt_vec(v: np.ndarray) -> str:
    return "[" + ", ".join(f"{x:.4g}" for x in v) + "]"


def _stretch_for_joint_velocity(plan: PathPlan, kin: Kinematics, cfg: MotionConfig) -> None:
    """Lengthen the timing so that no joint exceeds ``joint_velocity_fraction`` of its limit."""
    timing = plan.timing
    assert timing is not None
    dq_ds = np.abs(np.diff(plan.q_waypoints, axis=0)) / np.maximum(np.diff(plan.s_waypoints), 1e-12)[:, None]
    peak = (
        float(np.max(dq_ds / (cfg.joint_velocity_fraction * kin.velocity_limit_rad_s)) * timing.peak_rate())
        if len(dq_ds)
        else 0.0
    )
    plan.details["peak_joint_velocity_fraction"] = peak * cfg.joint_velocity_fraction
    if peak > 1.0:
        cruise = (timing.duration_s - timing.accel_s) * peak
        plan.timing = TimeScaling(cruise + timing.accel_s, timing.accel_s)
        plan.slowed_for_joint_velocity = True
        plan.details["peak_joint_velocity_fraction"] = cfg.joint_velocity_fraction


def plan_sweep(
    kin: Kinematics,
    collision: SelfCollisionChecker,
    cfg: MotionConfig,
    q_start: np.ndarray,
    goal_position_m: np.ndarray,
    goal_quaternion_wxyz: np.ndarray,
    *,
    speed_m_s: float | None = None,
    angular_rad_s: float | None = None,
    duration_s: float | None = None,
) -> PathPlan:
    """Plan and check the straight TCP sweep from the pose at ``q_start`` to the goal.

    Returns a ``PathPlan``; ``ok`` is False with the failing check's ``stop_reason`` and
    a message saying what to change when any check fails. Nothing moves.
    """
    q_start = kin.clamp(np.asarray(q_start, dtype=float))
    start_T = kin.fk(q_start)
    goal_T = pose_matrix(goal_position_m, goal_quaternion_wxyz)
    p0, q0 = pose_parts(start_T)
    p1 = np.asarray(goal_position_m, dtype=float)
    length = vector_norm(p1 - p0)
    angle = rotation_angle_rad(start_T[:3, :3], goal_T[:3, :3])
    empty = np.empty((0, kin.nq))

    def failed(
        reason: str,
        message: str,
        fraction: float | None,
        s_wp: list[float] | None = None,
        q_wp: list[np.ndarray] | None = None,
        **extra: object,
    ) -> PathPlan:
        plan = PathPlan(
            False,
            reason,
            message,
            np.array(s_wp or []),
            np.array(q_wp) if q_wp else empty,
            length,
            angle,
            start_T,
            goal_T,
            fail_fraction=fraction,
        )
        for k, v in extra.items():
            setattr(plan, k, v)
        return plan

    if not _in_box(p1, cfg):
        return failed(
            WORKSPACE_LIMIT,
            f"target position {_fmt_vec(p1)} is outside the workspace box {_box_text(cfg)}; choose a target inside it",
            1.0,
        )
    timing, why = _timing_for(length, angle, cfg, speed_m_s, angular_rad_s, duration_s)
    if timing is None:
        return failed(TIMEOUT, why, 0.0)

    n_seg = max(2, math.ceil(length / cfg.waypoint_spacing_m), math.ceil(angle / cfg.waypoint_spacing_rad))
    step = 1.0 / n_seg  # the values of np.linspace(0, 1, n_seg + 1)
    s_values = [k * step for k in range(n_seg)] + [1.0]
    s_wp: list[float] = [0.0]
    q_wp: list[np.ndarray] = [q_start]
    q_prev = q_start
    margin = cfg.joint_limit_margin_rad
    line = _LinePoses(p0, p1, q0, np.asarray(goal_quaternion_wxyz, dtype=float))
    lower_l, upper_l = kin.lower_rad.tolist(), kin.upper_rad.tolist()
    lo_l = [v + margin for v in lower_l]
    hi_l = [v - margin for v in upper_l]
    poses = [line.xyzquat(v) for v in s_values]
    max_step = cfg.max_joint_step_rad
    max_iterations = cfg.ik_max_iterations
    solve, target_pose = kin.solve_near, kin.target_pose
    ik_solves = 0
    qpl = q_prev.tolist()
    qpl_prev: list[float] | None = None
    # IK, joint limits and jumps waypoint by waypoint; self-collision of the solved waypoints
    # after (a loop of each keeps its code hot). A failure of the first loop is reported
    # when no earlier waypoint collides, exactly as if the checks ran waypoint by waypoint.
    ik_failure: PathPlan | None = None
    tol_p_final, tol_r_final = cfg.ik_position_tolerance_m, cfg.ik_rotation_tolerance_rad
    tol_p_path, tol_r_path = 5 * tol_p_final, 5 * tol_r_final
    for i in range(1, n_seg + 1):
        s = s_values[i]
        final = i == n_seg
        tol_p = tol_p_final if final else tol_p_path
        tol_r = tol_r_final if final else tol_r_path
        target = target_pose(poses[i])
        # The waypoints are evenly spaced on a smooth path: the joints extrapolated linearly
        # from the last two are usually within tolerance already, and IK only has to confirm
        # them (plain floats, clamped to the joint limits).
        extrapolated = qpl if qpl_prev is None else [2.0 * v - u for v, u in zip(qpl, qpl_prev, strict=True)]
        seed = np.array(
            [lo if x < lo else hi if x > hi else x for x, lo, hi in zip(extrapolated, lower_l, upper_l, strict=True)]
        )
        q = solve(
            target,
            seed,
            max_iterations=max_iterations,
            position_tolerance_m=tol_p,
            rotation_tolerance_rad=tol_r,
            seed_within_limits=True,
        )
        ik_solves += 1
        if q is None and len(q_wp) > 1:  # from the last waypoint itself
            q = solve(
                target, q_prev, max_iterations=max_iterations, position_tolerance_m=tol_p, rotation_tolerance_rad=tol_r
            )
            ik_solves += 1
        if q is None:
            # the last attempt again, for its diagnosis (limited joint)
            T = line.at(s)
            res = kin.solve_ik(
                T,
                q_prev if len(q_wp) > 1 else seed,
                max_iterations=max_iterations,
                position_tolerance_m=tol_p,
                rotation_tolerance_rad=tol_r,
            )
            pct = f"{100 * s:.0f}% of the way ({_fmt_vec(T[:3, 3])})"
            if res.reason == "joint_limit":
                ik_failure = failed(
                    JOINT_LIMIT,
                    _joint_limit_message(kin, res.limited_joint, goal_quaternion_wxyz, pct, final),
                    s,
                    s_wp,
                    q_wp,
                    limited_joint=res.limited_joint,
                )
            else:
                ik_failure = failed(IK_FAILED, _ik_message(kin, cfg, q_start, goal_T, pct, final), s, s_wp, q_wp)
            break
        ql = q.tolist()
        inside = all(lo <= v <= hi for lo, v, hi in zip(lo_l, ql, hi_l, strict=True))
        jump = max(abs(a - b) for a, b in zip(ql, qpl, strict=True))
        if not inside:
            pct = f"{100 * s:.0f}% of the way"
            joint = kin.joint_at_limit(q, margin + 1e-6)
            ik_failure = failed(
                JOINT_LIMIT,
                _joint_limit_message(kin, joint, goal_quaternion_wxyz, pct, final),
                s,
                s_wp,
                q_wp,
                limited_joint=joint,
            )
            break
        if jump > max_step:
            pct = f"{100 * s:.0f}% of the way"
            ik_failure = failed(
                IK_FAILED,
                f"the straight path needs a joint flip of {jump:.2f} rad at {pct} "
                "(a singular or wrist-flipping configuration); approach the target from another "
                "direction or orientation, or go through an intermediate pose",
                s,
                s_wp,
                q_wp,
            )
            break
        s_wp.append(s)
        q_wp.append(q)
        q_prev, qpl, qpl_prev = q, ql, qpl
    in_collision = collision.in_collision
    for j in range(1, len(q_wp)):
        q = q_wp[j]
        if in_collision(q):
            pct = f"{100 * s_wp[j]:.0f}% of the way"
            links = tuple(collision.colliding_links(q))
            names = ", ".join(f"{a}-{b}" for a, b in links) or "two links"
            return failed(
                SELF_COLLISION,
                f"the arm would hit itself ({names}) at {pct}; choose another "
                "orientation or approach, or go through an intermediate pose",
                s_wp[j],
                s_wp[:j],
                q_wp[:j],
                colliding_links=links,
            )
    if ik_failure is not None:
        return ik_failure
    plan = PathPlan(
        True,
        TARGET_REACHED,
        "",
        np.array(s_wp),
        np.array(q_wp),
        length,
        angle,
        start_T,
        goal_T,
        timing=timing,
    )
    plan.details["ik_solves"] = ik_solves
    _stretch_for_joint_velocity(plan, kin, cfg)
    if duration_s is not None and plan.duration_s > duration_s + 1e-9 and (speed_m_s or angular_rad_s):
        return failed(
            TIMEOUT,
            f"the joints' speed limits stretch the sweep to {plan.duration_s:.3g} s, "
            f"more than duration={duration_s:g} s; raise duration",
            0.0,
        )
    plan.message = f"straight sweep of {length:.4g} m and {math.degrees(angle):.3g} deg in {plan.duration_s:.3g} s" + (
        " (slowed to respect joint speed limits)" if plan.slowed_for_joint_velocity else ""
    )
    return plan


def _joint_limit_message(kin: Kinematics, joint: str, goal_quaternion_wxyz: np.ndarray, pct: str, final: bool) -> str:
    where = "at the target" if final else f"at {pct}"
    if joint == kin.joint_names[-1]:
        flipped = quat_multiply(goal_quaternion_wxyz, np.array([0.0, 0.0, 0.0, 1.0]))
        flipped = -flipped if flipped[0] < 0 else flipped
        hint = (
            "the jaws are symmetric: the same grasp turned 180 deg about the TCP z axis, quaternion "
            f"{_fmt_vec(flipped)}, needs no wrist wind-up"
        )
    else:
        hint = "choose a target nearer the middle of the workspace or another orientation"
    name = joint or "a joint"
    return f"{name} would pass its limit {where}; {hint}"


def _ik_message(
    kin: Kinematics, cfg: MotionConfig, q_start: np.ndarray, goal_T: np.ndarray, pct: str, final: bool
) -> str:
    reach = kin.solve_ik(
        goal_T,
        q_start,
        max_iterations=cfg.ik_max_iterations,
        restarts=cfg.ik_restarts,
        rng=np.random.default_rng(cfg.ik_seed),
    )
    dist = float(np.linalg.norm(goal_T[:3, 3]))
    if not reach.success:
        return (
            f"no joint solution for the target pose ({dist:.3g} m from the base origin; "
            f"pose error {reach.position_error_m * 1000:.3g} mm / "
            f"{math.degrees(reach.rotation_error_rad):.3g} "
            "deg at best); move it closer to the robot or change the orientation"
        )
    return (
        f"the target is reachable but the straight path loses its IK solution at {pct}; "
        "go through an intermediate pose or approach from another direction"
    )


def plan_reverse(
    kin: Kinematics,
    cfg: MotionConfig,
    q_path: np.ndarray,
    q_now: np.ndarray,
    *,
    max_distance_m: float,
    max_duration_s: float,
    speed_m_s: float,
) -> PathPlan:
    """Plan a retrace of a recorded joint path (oldest first) backwards from its end.

    The reversal covers at most ``max_distance_m`` of TCP travel and at most
    ``max_duration_s`` (the distance is shortened to fit); it starts from ``q_now``
    (normally the end of the path) and follows the recorded configurations exactly.
    """
    start_T = kin.fk(q_now)
    q_rev = np.vstack((np.asarray(q_now, float)[None], np.asarray(q_path, float)[::-1]))
    tcp = kin.tcp_positions(q_rev)
    seg = np.linalg.norm(np.diff(tcp, axis=0), axis=1)
    arc = np.concatenate(([0.0], np.cumsum(seg)))
    ta = cfg.accel_time_s
    time_bound_m = max(0.0, speed_m_s * (max_duration_s - ta))
    dist = min(max_distance_m, float(arc[-1]), time_bound_m)
    if dist < 1e-4:
        why = (
            "max_duration_s is too short for any motion"
            if time_bound_m < 1e-4 and arc[-1] >= 1e-4
            else "the recorded path is already fully reversed"
        )
        return PathPlan(False, "nothing_to_recover", why, np.array([0.0]), q_rev[:1], 0.0, 0.0, start_T, start_T)
    k_end = int(np.searchsorted(arc, dist, side="left"))
    k_end = min(k_end, len(arc) - 1)
    q_sel = q_rev[: k_end + 1].copy()
    a_sel = arc[: k_end + 1].copy()
    if a_sel[-1] > dist + 1e-9 and k_end >= 1:
        w = (dist - a_sel[-2]) / max(a_sel[-1] - a_sel[-2], 1e-12)
        q_sel[-1] = q_sel[-2] * (1 - w) + q_rev[k_end] * w
        a_sel[-1] = dist
    keep = np.concatenate(([True], np.diff(a_sel) > 1e-7))
    q_sel, a_sel = q_sel[keep], a_sel[keep]
    if len(a_sel) < 2:
        return PathPlan(
            False,
            "nothing_to_recover",
            "the recorded path is already fully reversed",
            np.array([0.0]),
            q_rev[:1],
            0.0,
            0.0,
            start_T,
            start_T,
        )
    s = a_sel / a_sel[-1]
    goal_T = kin.fk(q_sel[-1])
    cruise = max(dist / speed_m_s, 1e-3)
    timing = TimeScaling(cruise + min(ta, cruise), min(ta, cruise))
    angle = rotation_angle_rad(start_T[:3, :3], goal_T[:3, :3])
    plan = PathPlan(True, TARGET_REACHED, "", s, q_sel, dist, angle, start_T, goal_T, timing=timing)
    _stretch_for_joint_velocity(plan, kin, cfg)
    plan.details["recorded_path_m"] = float(arc[-1])
    plan.message = f"reversal of {dist:.4g} m along the last executed path in {plan.duration_s:.3g} s"
    return plan
