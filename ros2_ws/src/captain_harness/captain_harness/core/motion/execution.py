"""Planning and executing one straight sweep: the plan of a ``MoveRequest``, its
execution by the guarded control cycle, the motion record, and the result dict and
receipt of either a refused plan or an executed motion (shared by ``move_to``,
``recover`` and ``release``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from captain_backends.core.driver import ForceGuard, RobotState
from captain_harness.core.collision import SelfCollisionChecker
from captain_harness.core.executor import CANCELLED, CONTACT, TARGET_REACHED, TIMEOUT, ExecutionReport
from captain_harness.core.geometry import matrix_to_quat, rotation_angle_rad, vector_norm
from captain_harness.core.kinematics import Kinematics
from captain_harness.core.motion.base import STOP_CATEGORY, MotionBase, receipt
from captain_harness.core.motion.request import MoveRequest
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok
from captain_harness.core.sweep import PathPlan, plan_sweep
from captain_harness.core.trajectory import MotionRecord


class SweepExecution(MotionBase):
    """Plan, execute and report straight sweeps (see the module docstring)."""

    def _plan(
        self, kin: Kinematics, collision: SelfCollisionChecker, req: MoveRequest, q_start: np.ndarray
    ) -> PathPlan:
        position, quat = req.position_m, req.quaternion_wxyz
        if position is None or quat is None:
            T = kin.fk(q_start)
            position = position if position is not None else T[:3, 3]
            quat = quat if quat is not None else matrix_to_quat(T[:3, :3])
        return plan_sweep(
            kin,
            collision,
            self.config,
            q_start,
            position,
            quat,
            speed_m_s=req.speed_m_s,
            angular_rad_s=req.angular_rad_s,
            duration_s=req.duration_s,
        )

    def _plan_failure(self, name: str, plan: PathPlan, extra: dict[str, Any] | None = None) -> CallOutcome:
        value = {
            "stopped_reason": plan.stop_reason,
            "executed_distance_m": 0.0,
            "max_observed_force_n": 0.0,
            "path_fraction": plan.fail_fraction,
            "path_length_m": plan.path_length_m,
            "colliding_links": [list(p) for p in plan.colliding_links],
            "limited_joint": plan.limited_joint,
        }
        value.update(extra or {})
        result = fail(
            STOP_CATEGORY.get(plan.stop_reason, FailureCategory.INTERNAL_ERROR),
            f"{name} refused before moving: {plan.message}",
            value=value,
        )
        fields: list[tuple[str, Any]] = []
        if plan.fail_fraction is not None and plan.stop_reason in (
            "ik_failed",
            "joint_limit",
            "self_collision",
        ):
            fields.append(("path_fraction", round(plan.fail_fraction, 3)))
        return CallOutcome(result, receipt(name, result, fields, plan.stop_reason))

    def _executed_distance(
        self, q_start: np.ndarray, report: ExecutionReport, kin: Kinematics, record: MotionRecord | None = None
    ) -> float:
        """TCP path length of the execution (at most about 60 samples of it), m. ``record``
        (the record of this execution) lends its joint array when every sample is used and
        keeps the TCP positions computed here."""
        qs = report.recording.q
        if not qs:
            return 0.0
        step = max(1, len(qs) // 60)
        if step == 1 and record is not None and len(record.q) == len(qs) + 1:
            p = record.tcp_positions(kin)
        else:
            picks = [q_start, *qs[step - 1 :: step]]
            if picks[-1] is not qs[-1]:
                picks.append(qs[-1])
            p = kin.tcp_positions(np.asarray(picks))
        d = p[1:] - p[:-1]
        d *= d
        # np.linalg.norm(d, axis=1).sum(), bit for bit (numpy sums the three squares in order)
        return float(np.sqrt(d[:, 0] + d[:, 1] + d[:, 2]).sum())

    def _record(
        self,
        call: str,
        mode: str,
        start: RobotState,
        report: ExecutionReport,
        *,
        sweep: bool,
        goal_T: np.ndarray | None,
        guard: ForceGuard | None,
        goal_quat: np.ndarray | None = None,
    ) -> MotionRecord:
        rec = report.recording
        q = np.array([start.joint_positions_rad, *rec.q], dtype=float)
        if goal_T is not None and goal_quat is None:
            goal_quat = matrix_to_quat(goal_T[:3, :3])
        record = MotionRecord(
            call=call,
            mode=mode,
            stopped_reason=report.stopped_reason,
            time_s=np.array([start.time_s, *rec.time_s]),
            q=q,
            force_n=np.array([start.contact_force_n, *rec.force_n]),
            max_observed_force_n=report.peak_force_n,
            goal_position_m=None if goal_T is None else goal_T[:3, 3].copy(),
            goal_quaternion_wxyz=None if goal_T is None else goal_quat,
            guard_force_n=None if guard is None else guard.max_contact_force_n,
        )
        self.history.record(record, sweep=sweep)
        return record

    def _after_motion(self, report: ExecutionReport, goal_q: np.ndarray | None) -> None:
        if report.stopped_reason == TARGET_REACHED and goal_q is not None:
            self._arm_target = np.array(goal_q, dtype=float)
        else:
            self._arm_target = np.array(report.final_state.joint_positions_rad, dtype=float)

    def _sweep(
        self,
        name: str,
        plan: PathPlan,
        mode: str,
        state: RobotState,
        *,
        settle: bool = True,
        guarded_mode: bool | None = None,
        guard_override: tuple[ForceGuard, float | None] | None = None,
    ) -> tuple[ExecutionReport, dict]:
        """Execute a checked plan; returns the report and the value entries of the result."""
        cfg = self.config
        guard, wrench_limit = guard_override or self._guard(mode, state)
        targets = plan.joint_targets(float(self.driver.control_period_s))
        report = self.executor.run(
            targets,
            guard=guard,
            guarded_mode=(mode == "guarded") if guarded_mode is None else guarded_mode,
            cancel=self._cancel_check(),
            feedback=self._feedback,
            state_every=self._state_every(),
            goal_T=plan.goal_T if settle else None,
            settle_timeout_s=cfg.settle_timeout_s,
            settle_position_m=cfg.settle_position_m,
            settle_rotation_rad=cfg.settle_rotation_rad,
            start_state=state,
            wrench_limit_n=wrench_limit,
            tighten_guard_n=self.config.contact_threshold_n if mode == "guarded" and guarded_mode is None else None,
        )
        final = report.final_state
        goal_T = plan.goal_T
        T = report.final_tcp_T if report.final_tcp_T is not None else self.kin.fk(final.joint_positions_rad)
        perr = vector_norm(T[:3, 3] - goal_T[:3, 3])
        rerr = rotation_angle_rad(T[:3, :3], goal_T[:3, :3])
        if report.stopped_reason == TARGET_REACHED and (
            perr > cfg.position_tolerance_m or rerr > cfg.rotation_tolerance_rad
        ):
            report.stopped_reason = TIMEOUT
            report.message = (
                f"the arm ended {perr * 1000:.3g} mm / {math.degrees(rerr):.3g} deg from the target "
                f"after settling for {cfg.settle_timeout_s:g} s (blocked, or a load it cannot "
                "carry at this stiffness)"
            )
        goal_quat = matrix_to_quat(goal_T[:3, :3])
        record = self._record(name, mode, state, report, sweep=True, goal_T=goal_T, guard=guard, goal_quat=goal_quat)
        self._after_motion(report, plan.goal_q)
        distance = self._executed_distance(state.joint_positions_rad, report, self.kin, record)
        value = {
            "stopped_reason": report.stopped_reason,
            "executed_distance_m": distance,
            "max_observed_force_n": report.peak_force_n,
            "progress": report.progress,
            "duration_s": report.duration_s,
            "planned_duration_s": plan.duration_s,
            "path_length_m": plan.path_length_m,
            "mode": mode,
            "force_limit_n": guard.max_contact_force_n,
            "target_position_m": goal_T[:3, 3],
            "target_quaternion_wxyz": goal_quat,
            "end_effector_position_m": T[:3, 3],
            "end_effector_quaternion_wxyz": matrix_to_quat(T[:3, :3]),
            "position_error_m": perr,
            "rotation_error_deg": math.degrees(rerr),
            "gripper_open_fraction": final.gripper_open_fraction,
            "held": self.held(final),
            "slowed_for_joint_velocity": plan.slowed_for_joint_velocity,
        }
        if report.stopped_reason in (CONTACT, "emergency_limit"):
            value["contact_position_m"] = T[:3, 3]
        return report, value

    def _motion_outcome(self, name: str, report: ExecutionReport, value: dict, ok_message: str) -> CallOutcome:
        reason = report.stopped_reason
        dist = value["executed_distance_m"]
        force = value["max_observed_force_n"]
        diagnostics = {
            "physics_wall_s": report.physics_wall_s,
            "driver_io_wall_s": self.executor.last_driver_io_wall_s,
        }
        if reason == TARGET_REACHED:
            result = ok(value, executed=True, message=ok_message, diagnostics=diagnostics)
            fields = [
                ("stopped_reason", reason),
                ("executed_distance_m", dist),
                ("max_observed_force_n", force),
            ]
            return CallOutcome(result, format_receipt(name, result, fields))
        hint = {
            CONTACT: ' To push through or carry a load use mode="manipulation"; recover() backs off along the path.',
            "emergency_limit": " The arm is holding; back off with recover(max_distance_m=..., "
            "max_duration_s=...) before trying again.",
            CANCELLED: " The arm is holding.",
            TIMEOUT: " Check for an obstacle; recover() backs off along the path.",
        }.get(reason, "")
        message = f"{name} stopped after {dist:.4g} m: {report.message or reason}.{hint}"
        result = fail(
            STOP_CATEGORY.get(reason, FailureCategory.INTERNAL_ERROR),
            message,
            executed=True,
            value=value,
            diagnostics=diagnostics,
        )
        fields = (
            [("max_observed_force_n", force)]
            if reason == "emergency_limit"
            else [("executed_distance_m", dist), ("max_observed_force_n", force)]
        )
        return CallOutcome(result, receipt(name, result, fields, reason))
