"""The read-only state calls of the policy API: ``get_robot_state``, ``gripper_state``,
``robot_geometry``, ``read_motion_trajectory`` and ``transform_pose``.

They read the driver's latest state and the harness's own records; nothing moves.
Positions are in the robot base frame (z up), metres; quaternions ``[w, x, y, z]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from captain_harness.core import arguments
from captain_harness.core.boundary import primitive
from captain_harness.core.geometry import matrix_to_quat, pose_inverse, pose_matrix, pose_parts
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok

if TYPE_CHECKING:
    from captain_harness.core.motion import MotionPrimitives

FRAMES = ("base", "world", "tcp", "flange")

TCP_FRAME_TEXT = {
    "origin": "midway between the fingertips (tool centre point)",
    "z_axis": "approach direction: out of the palm along the fingers",
    "x_axis": "jaw-closing axis (from one finger to the other)",
    "y_axis": "z cross x",
    "top_down_quaternion_wxyz": [0.0, 2**-0.5, 2**-0.5, 0.0],
    "top_down_note": "[0, 2**-0.5, 2**-0.5, 0] points the TCP z axis straight down with the jaws closing "
    "along the base y axis; [0, cos(pi/8), sin(pi/8), 0] is the same grasp turned 45 deg "
    "about the vertical",
}



class StateCalls:
    """State and geometry queries over the motion primitives' driver and records."""

    def __init__(self, prims: MotionPrimitives) -> None:
        self.prims = prims
        self._reach_cache: tuple[np.ndarray, float] | None = None

    def _reach(self, kin: Any) -> tuple[np.ndarray, float]:
        """(shoulder position, largest TCP distance from it over random configurations), m."""
        if self._reach_cache is None:
            import pinocchio as pin

            model, data = kin.model, kin.data
            pin.forwardKinematics(model, data, pin.neutral(model))
            shoulder = (
                kin.T_base_model[:3, :3] @ data.oMi[min(2, model.njoints - 1)].translation + kin.T_base_model[:3, 3]
            )
            rng = np.random.default_rng(0)
            qs = np.array([kin.random_configuration(rng) for _ in range(400)])
            reach = float(np.max(np.linalg.norm(kin.tcp_positions(qs) - shoulder, axis=1)))
            self._reach_cache = (shoulder, reach)
        return self._reach_cache

    # ------------------------------------------------------------------ state
    @primitive(physical=False, group="state")
    def get_robot_state(self) -> CallOutcome:
        """The arm's current state. Value: ``end_effector_position_m`` [x, y, z] (TCP, base
        frame, m), ``end_effector_quaternion_wxyz``, ``joint_positions_rad``,
        ``joint_velocities_rad_s``, ``gripper_opening_m``, ``gripper_open_fraction``,
        ``held``, ``contact_force_n``, ``wrench_base`` [fx, fy, fz, tx, ty, tz] (N, N·m),
        ``min_joint_limit_margin_rad``, ``time_s``, ``fault``."""
        p = self.prims
        state = p.driver.read_state()
        with p.planning_lock:
            kin = p.planning_kin
            q = np.asarray(state.joint_positions_rad, dtype=float)
            T = kin.fk(q)
            margin = float(np.min(np.minimum(q - kin.lower_rad, kin.upper_rad - q)))
        value = {
            "end_effector_position_m": T[:3, 3],
            "end_effector_quaternion_wxyz": matrix_to_quat(T[:3, :3]),
            "joint_names": list(kin.joint_names),
            "joint_positions_rad": q,
            "joint_velocities_rad_s": state.joint_velocities_rad_s,
            "gripper_opening_m": state.gripper_opening_m,
            "gripper_open_fraction": state.gripper_open_fraction,
            "held": p.held(state),
            "contact_force_n": state.contact_force_n,
            "wrench_base": state.wrench_base,
            "finger_forces_n": state.finger_forces_n,
            "min_joint_limit_margin_rad": margin,
            "time_s": state.time_s,
            "fault": state.fault,
        }
        result = ok(value)
        fields = [
            ("end_effector_position_m", np.round(T[:3, 3], 4)),
            ("gripper_open_fraction", state.gripper_open_fraction),
            ("held", value["held"]),
        ]
        return CallOutcome(result, format_receipt("get_robot_state", result, fields))

    @primitive(physical=False, group="state")
    def gripper_state(self) -> CallOutcome:
        """The jaws now. Value: ``gripper_opening_m`` (distance between the finger pads),
        ``gripper_open_fraction`` (0 closed .. 1 open), ``held`` (closed on something),
        ``finger_forces_n`` (normal force on each pad, N), ``last_command``
        ("open", "close" or None), ``max_opening_m``."""
        p = self.prims
        state = p.driver.read_state()
        value = {
            "gripper_opening_m": state.gripper_opening_m,
            "gripper_open_fraction": state.gripper_open_fraction,
            "held": p.held(state),
            "finger_forces_n": state.finger_forces_n,
            "last_command": p._gripper_command,
            "max_opening_m": p.description.gripper_max_opening_m,
        }
        result = ok(value)
        fields = [
            ("gripper_open_fraction", state.gripper_open_fraction),
            ("opening_m", state.gripper_opening_m),
            ("held", value["held"]),
        ]
        return CallOutcome(result, format_receipt("gripper_state", result, fields))

    @primitive(physical=False, group="state")
    def robot_geometry(self) -> CallOutcome:
        """The robot's frames, limits and motion settings: the TCP frame convention
        (``tcp_frame``), ``T_flange_tcp``, joint names and limits, the home pose, the
        maximum jaw opening, the workspace box (base frame), the motion defaults (speeds,
        contact threshold, emergency force limit) and the control period."""
        p = self.prims
        d = p.description
        cfg = p.config
        with p.planning_lock:
            kin = p.planning_kin
            home_T = kin.fk(kin.home_rad)
            shoulder, reach = self._reach(kin)
        value = {
            "robot": d.name,
            "base_frame": d.base_frame,
            "units": "metres, radians, seconds, newtons; positions in the base frame, z up",
            "quaternion_order": "[w, x, y, z]",
            "tcp_frame": TCP_FRAME_TEXT,
            "flange_frame": d.flange_frame,
            "T_flange_tcp": np.asarray(d.T_flange_tcp),
            "T_world_base": np.asarray(d.T_world_base),
            "joint_names": list(d.arm_joint_names),
            "joint_lower_rad": d.joint_lower_rad,
            "joint_upper_rad": d.joint_upper_rad,
            "joint_velocity_limit_rad_s": d.joint_velocity_limit_rad_s,
            "home_joint_positions_rad": d.home_joint_positions_rad,
            "home_tcp_position_m": home_T[:3, 3],
            "home_tcp_quaternion_wxyz": matrix_to_quat(home_T[:3, :3]),
            "gripper_max_opening_m": d.gripper_max_opening_m,
            "workspace_box_m": {"min": list(cfg.workspace_min_m), "max": list(cfg.workspace_max_m)},
            "shoulder_position_m": shoulder,
            "approximate_reach_m": reach,
            "control_period_s": float(p.driver.control_period_s),
            "motion_defaults": {
                "speed_m_s": cfg.default_linear_speed_m_s,
                "angular_rad_s": cfg.default_angular_speed_rad_s,
                "max_speed_m_s": cfg.max_linear_speed_m_s,
                "max_angular_rad_s": cfg.max_angular_speed_rad_s,
                "guarded_contact_threshold_n": cfg.contact_threshold_n,
                "emergency_force_n": cfg.emergency_force_n,
                "target_tolerance_m": cfg.position_tolerance_m,
                "target_tolerance_deg": math.degrees(cfg.rotation_tolerance_rad),
                "recover_speed_m_s": cfg.recover_speed_m_s,
            },
            "self_collision_pairs_checked": p.collision.active_pair_count,
        }
        result = ok(value)
        fields = [
            ("robot", d.name),
            ("gripper_max_opening_m", d.gripper_max_opening_m),
            ("control_period_s", float(p.driver.control_period_s)),
        ]
        return CallOutcome(result, format_receipt("robot_geometry", result, fields))

    @primitive(physical=False, group="state")
    def read_motion_trajectory(self, max_samples: int | None = None) -> CallOutcome:
        """The last executed arm sweep (of move_to, recover or release; holds and jaw
        commands do not replace it), sampled at most ``max_samples`` times (default 40),
        measured once per 50 ms: ``call``, ``mode``,
        ``stopped_reason``, ``executed_distance_m``, ``max_observed_force_n``,
        ``guard_force_n``, start/end/goal positions, and ``samples`` with ``time_s``,
        ``tcp_position_m``, ``tcp_quaternion_wxyz`` and ``force_n`` per sample. Also
        ``recoverable_distance_m``: how far ``recover`` can still back off."""
        p = self.prims
        n = (
            p.config.trajectory_summary_samples
            if max_samples is None
            else arguments.as_int("max_samples", max_samples, minimum=2, maximum=1000)
        )
        rec = p.history.last
        if rec is None:
            result = fail(FailureCategory.NOT_FOUND, "no arm sweep has been executed yet in this episode")
            return CallOutcome(result, format_receipt("read_motion_trajectory", result))
        with p.planning_lock:
            kin = p.planning_kin
            value = rec.summary(kin, n)
            path = p.history.recover_path()
            if path is not None:
                tcp = kin.tcp_positions(path)
                value["recoverable_distance_m"] = float(np.sum(np.linalg.norm(np.diff(tcp, axis=0), axis=1)))
            else:
                value["recoverable_distance_m"] = 0.0
        result = ok(value)
        fields = [
            ("call", rec.call),
            ("stopped_reason", rec.stopped_reason),
            ("samples", len(value["samples"]["time_s"])),
            ("executed_distance_m", value["executed_distance_m"]),
        ]
        return CallOutcome(result, format_receipt("read_motion_trajectory", result, fields))

    @primitive(physical=False, group="state")
    def transform_pose(
        self,
        position: Sequence[float],
        quaternion: Sequence[float] | None = None,
        from_frame: str = "base",
        to_frame: str = "tcp",
    ) -> CallOutcome:
        """Express a point (and optionally an orientation) given in ``from_frame`` in
        ``to_frame``. Frames: "base" (robot base, z up), "world" (simulator world),
        "tcp" (the current tool centre point: z along the fingers, x the jaw axis),
        "flange" (the current hand mount). E.g. ``transform_pose([0, 0, 0.05],
        from_frame="tcp", to_frame="base")`` is the base-frame point 5 cm beyond the
        fingertips. Value: ``position_m`` and ``quaternion_wxyz`` (if given) in ``to_frame``."""
        p = arguments.as_position("position", position)
        q = None if quaternion is None else arguments.as_quaternion("quaternion", quaternion)
        src = arguments.as_choice("from_frame", from_frame, FRAMES)
        dst = arguments.as_choice("to_frame", to_frame, FRAMES)
        prims = self.prims
        state = prims.driver.read_state()
        with prims.planning_lock:
            kin = prims.planning_kin
            qj = np.asarray(state.joint_positions_rad, dtype=float)
            T_base = {
                "base": np.eye(4),
                "world": pose_inverse(np.asarray(prims.description.T_world_base, float)),
                "tcp": kin.fk(qj),
                "flange": kin.fk_flange(qj),
            }
        T_src = pose_matrix(p, q if q is not None else np.array([1.0, 0, 0, 0]))
        T = pose_inverse(T_base[dst]) @ T_base[src] @ T_src
        pos, quat = pose_parts(T)
        value = {"position_m": pos, "from_frame": src, "to_frame": dst}
        if q is not None:
            value["quaternion_wxyz"] = quat
        result = ok(value)
        return CallOutcome(result, format_receipt("transform_pose", result, [("position_m", np.round(pos, 4))]))
