"""The motion primitives of the policy API: ``move_to``, ``hold``, ``recover``, ``release``
and the read-only ``check_motion`` and ``preview_motion``.

``MotionPrimitives`` works over any ``RobotDriver``. Register it (and its state calls)
with a ``RobotAPI``::

    prims = MotionPrimitives(driver, MotionConfig())
    prims.register(api)        # move_to, hold, recover, release, check_motion, preview_motion,
                               # get_robot_state, gripper_state, robot_geometry,
                               # read_motion_trajectory, transform_pose

Frames and units: positions in the robot base frame (z up), metres; quaternions
``[w, x, y, z]`` of the TCP frame (see ``kinematics``: z along the fingers, x the
jaw-closing axis; ``[0, 2**-0.5, 2**-0.5, 0]`` is a top-down grasp); speeds in m/s and
rad/s; forces in N.

Every primitive returns a ``CallOutcome`` (the result dict and its receipt) and never
raises. Physical calls are serialised by a lock and can be cancelled from another
thread (``request_cancel`` or ``cancel_scope``): the arm is then held and the call ends
with ``stopped_reason="cancelled"``.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from captain_backends.core.driver import ForceGuard, LifecycleState, RobotDriver, RobotState
from captain_harness.core import arguments
from captain_harness.core.api import primitive
from captain_harness.core.boundary import never_raises
from captain_harness.core.collision import SelfCollisionChecker
from captain_harness.core.errors import ArgumentError, HarnessError
from captain_harness.core.executor import (
    CANCELLED,
    CONTACT,
    TARGET_REACHED,
    TIMEOUT,
    CancelSource,
    ExecutionReport,
    FeedbackFn,
    MotionExecutor,
)
from captain_harness.core.geometry import matrix_to_quat, rotation_angle_rad, vector_norm
from captain_harness.core.kinematics import Kinematics
from captain_harness.core.motion_config import MotionConfig
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok
from captain_harness.core.state_calls import StateCalls
from captain_harness.core.sweep import PathPlan, plan_reverse, plan_sweep
from captain_harness.core.trajectory import MotionHistory, MotionRecord

MODES = ("guarded", "manipulation")
GRIPPER_COMMANDS = ("open", "close")
PREVIEW_KINDS = ("move_to", "recover", "release", "hold")

#: stop reason -> failure category of the result dict
STOP_CATEGORY: dict[str, FailureCategory] = {
    "contact": FailureCategory.CONTACT,
    "emergency_limit": FailureCategory.CONTROLLER_REJECTED,
    "ik_failed": FailureCategory.IK_FAILED,
    "self_collision": FailureCategory.SELF_COLLISION,
    "joint_limit": FailureCategory.JOINT_LIMIT,
    "workspace_limit": FailureCategory.WORKSPACE_LIMIT,
    "timeout": FailureCategory.TIMEOUT,
    "cancelled": FailureCategory.CANCELLED,
    "driver_fault": FailureCategory.DRIVER_FAULT,
    "nothing_to_recover": FailureCategory.NOTHING_TO_RECOVER,
}


def receipt(
    name: str, result: dict[str, Any], fields: list[tuple[str, Any]] | None = None, reason: str | None = None
) -> str:
    """The receipt line; a stop reason is shown after the category unless it repeats it."""
    notes = [reason] if reason and reason != result.get("failure_category") else None
    return format_receipt(name, result, fields, notes)


@dataclass(frozen=True)
class MoveRequest:
    """A validated ``move_to`` call.

    Attributes:
        position_m: TCP target, base frame (None: keep the current position).
        quaternion_wxyz: TCP orientation (None: keep the current orientation).
        speed_m_s / angular_rad_s / duration_s: pacing (None: defaults; see ``sweep``).
        mode: ``guarded`` or ``manipulation``.
        gripper: ``open`` / ``close`` for a jaw command, else None.
    """

    position_m: np.ndarray | None
    quaternion_wxyz: np.ndarray | None
    speed_m_s: float | None
    angular_rad_s: float | None
    duration_s: float | None
    mode: str
    gripper: str | None


class MotionPrimitives:
    """Motion and planning primitives over one driver (see the module docstring).

    Args:
        driver: a configured driver (ACTIVE for physical calls).
        config: thresholds, speeds and limits (``MotionConfig`` defaults when None).
    """

    def __init__(self, driver: RobotDriver, config: MotionConfig | None = None) -> None:
        self.driver = driver
        self.config = config or MotionConfig()
        description = driver.description()
        self.description = description
        # physical calls and read-only calls use separate models (calls may come from
        # different threads: an action server and services)
        self.kin = Kinematics(description)
        self.collision = SelfCollisionChecker(self.kin)
        self.planning_kin = Kinematics(description)
        self.planning_collision = SelfCollisionChecker(self.planning_kin)
        self.planning_lock = threading.Lock()
        self.executor = MotionExecutor(driver, self.kin, self.config.emergency_force_n)
        self.history = MotionHistory()
        self._action_lock = threading.Lock()
        self._cancel_lock = threading.Lock()
        self._cancel_event = threading.Event()
        self._cancel_source: CancelSource = None
        self._in_action = False
        self._feedback: FeedbackFn | None = None
        self._gripper_command: str | None = None
        self._arm_target: np.ndarray | None = None
        self.state_calls = StateCalls(self)

    # ------------------------------------------------------------ registration
    def register(self, api: Any) -> list[str]:
        """Register the motion primitives and the state calls with a ``RobotAPI``."""
        return api.register_object(self) + api.register_object(self.state_calls)

    def reset(self) -> None:
        """Forget the motion history, the jaw command and the held target (after the
        driver's scene was reset)."""
        self.history.clear()
        self._gripper_command = None
        self._arm_target = None

    # ------------------------------------------------------------ cancellation
    def request_cancel(self) -> bool:
        """Ask the running physical call to stop and hold; False when none is running."""
        with self._cancel_lock:
            if not self._in_action:
                return False
            self._cancel_event.set()
            return True

    @contextlib.contextmanager
    def cancel_scope(self, source: CancelSource) -> Iterator[None]:
        """Physical calls made inside poll ``source`` (an Event or a callable) too."""
        previous = self._cancel_source
        self._cancel_source = source
        try:
            yield
        finally:
            self._cancel_source = previous

    def tcp_pose(self, joint_positions_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position_m, quaternion_wxyz) of the TCP in the base frame at a joint
        configuration (thread-safe; for feedback messages)."""
        with self.planning_lock:
            T = self.planning_kin.fk(np.asarray(joint_positions_rad, dtype=float))
        return T[:3, 3].copy(), matrix_to_quat(T[:3, :3])

    def set_feedback(self, feedback: FeedbackFn | None) -> None:
        """``feedback(progress, state)`` is called every few control periods of a motion."""
        self._feedback = feedback

    def _cancelled(self) -> bool:
        if self._cancel_event.is_set():
            return True
        src = self._cancel_source
        if src is None:
            return False
        return src.is_set() if isinstance(src, threading.Event) else bool(src())

    def _cancel_check(self) -> Callable[[], bool]:
        """The cheapest poll of the cancel sources in effect for the coming action."""
        if self._cancel_source is None:
            return self._cancel_event.is_set
        return self._cancelled

    @contextlib.contextmanager
    def _action(self, name: str) -> Iterator[None]:
        if not self._action_lock.acquire(timeout=0.5):
            raise HarnessError(
                f"{name}: another motion is running; wait for it or cancel it",
                FailureCategory.CONTROLLER_REJECTED,
            )
        try:
            with self._cancel_lock:
                self._cancel_event.clear()
                self._in_action = True
            if self.driver.lifecycle_state is not LifecycleState.ACTIVE:
                raise HarnessError(
                    f"{name}: the robot driver is {self.driver.lifecycle_state.value}, "
                    "not active; motions are refused until it is activated",
                    FailureCategory.NOT_AVAILABLE,
                )
            yield
        finally:
            with self._cancel_lock:
                self._in_action = False
                self._cancel_event.clear()
            self._action_lock.release()

    def _safe_hold(self) -> None:
        if self.driver.lifecycle_state is LifecycleState.ACTIVE:
            self.driver.hold()

    # ------------------------------------------------------------------ helpers
    def held(self, state: RobotState) -> bool:
        """Whether the jaws hold something: the last jaw command closed them and they
        stopped above ``held_min_open_fraction`` (something is between the fingers)."""
        return bool(
            self._gripper_command == "close" and state.gripper_open_fraction > self.config.held_min_open_fraction
        )

    def _hold_target(self, state: RobotState) -> np.ndarray:
        q = np.asarray(state.joint_positions_rad, dtype=float)
        if self._arm_target is not None and float(np.max(np.abs(self._arm_target - q))) < 0.02:
            return self._arm_target
        return q

    def _guard(self, mode: str, state: RobotState) -> tuple[ForceGuard, float | None]:
        """(ForceGuard, wrench change limit in N or None) for a motion in ``mode``."""
        cfg = self.config
        held = self.held(state)
        if mode == "manipulation":
            return ForceGuard(cfg.emergency_force_n, ignore_finger_contacts=held), (
                cfg.emergency_force_n if held else None
            )
        if held:
            # the squeeze on the held object is not counted; other contacts may already
            # press (e.g. the object resting on something)
            other = max(0.0, float(state.contact_force_n) - float(np.sum(state.finger_forces_n)))
            limit = min(other + cfg.contact_threshold_n, cfg.emergency_force_n)
            return ForceGuard(limit, ignore_finger_contacts=True), cfg.contact_threshold_n
        limit = min(self._resting_force_n(state) + cfg.contact_threshold_n, cfg.emergency_force_n)
        return ForceGuard(limit, ignore_finger_contacts=False), None

    def _resting_force_n(self, state: RobotState) -> float:
        """The contact force the arm starts a motion with: the current reading, or, when
        the arm has not moved since the last call ended, the largest of that call's last
        readings (forces while pressing on something fluctuate from one reading to the
        next; a guard set from a low one would trip as soon as the arm moves)."""
        force = float(state.contact_force_n)
        rec = self.history.last_call
        if rec is not None and len(rec.q):
            q_now = np.asarray(state.joint_positions_rad).tolist()
            moved = max(abs(a - b) for a, b in zip(rec.q[-1].tolist(), q_now, strict=True))
            if moved < 0.005:
                force = max(force, max(rec.force_n[-5:].tolist()))
        return force

    def parse_move(
        self,
        position: Any,
        quaternion: Any,
        speed: Any,
        duration: Any,
        angular: Any,
        mode: Any,
        gripper: Any,
        call: str = "move_to",
    ) -> MoveRequest:
        """Validate ``move_to`` arguments (raises ``ArgumentError`` saying what to change)."""
        cfg = self.config
        if gripper is not None:
            g = arguments.as_choice("gripper", gripper, GRIPPER_COMMANDS)
            extra = [
                n
                for n, v in (
                    ("position", position),
                    ("quaternion", quaternion),
                    ("speed", speed),
                    ("duration", duration),
                    ("angular", angular),
                )
                if v is not None
            ]
            if extra:
                raise ArgumentError(
                    f"move_to takes either a pose or gripper=, not both (got gripper={g!r} and "
                    f"{', '.join(extra)}); make two calls"
                )
            if mode not in (None, "guarded", "manipulation"):
                arguments.as_choice("mode", mode, MODES)
            return MoveRequest(None, None, None, None, None, "guarded", g)
        if position is None and quaternion is None:
            raise ArgumentError(
                f"{call} needs position=[x, y, z] (m, base frame) and quaternion=[w, x, y, z]"
                + (", or gripper='open'/'close'" if call == "move_to" else "")
            )
        p = None if position is None else arguments.as_position("position", position)
        q = None if quaternion is None else arguments.as_quaternion("quaternion", quaternion)
        v = arguments.as_optional_float(
            "speed", speed, minimum=0.0, maximum=cfg.max_linear_speed_m_s, unit="m/s", exclusive_minimum=True
        )
        w = arguments.as_optional_float(
            "angular",
            angular,
            minimum=0.0,
            maximum=cfg.max_angular_speed_rad_s,
            unit="rad/s",
            exclusive_minimum=True,
        )
        d = arguments.as_optional_float(
            "duration",
            duration,
            minimum=0.0,
            maximum=cfg.max_sweep_duration_s,
            unit="s",
            exclusive_minimum=True,
        )
        m = "guarded" if mode is None else arguments.as_choice("mode", mode, MODES)
        return MoveRequest(p, q, v, w, d, m, None)

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

    def _state_every(self) -> int:
        period = float(self.driver.control_period_s)
        return max(1, round(self.config.state_sample_period_s / period))

    def _read_state(self) -> RobotState:
        return self.driver.read_state()

    # --------------------------------------------------------------- move_to
    @primitive(physical=True, group="motion")
    @never_raises("move_to")
    def move_to(
        self,
        position: Sequence[float] | None = None,
        quaternion: Sequence[float] | None = None,
        speed: float | None = None,
        duration: float | None = None,
        angular: float | None = None,
        mode: str = "guarded",
        gripper: str | None = None,
    ) -> CallOutcome:
        """Move the TCP on a straight line to a pose, or open/close the jaws.

        ``move_to(position, quaternion, speed=..., duration=..., angular=..., mode=...)``:
        a straight Cartesian sweep of the tool centre point (midway between the
        fingertips) to ``position`` [x, y, z] (m, robot base frame, z up) with the TCP
        orientation ``quaternion`` [w, x, y, z] (TCP z axis along the fingers, x the
        jaw-closing axis; ``[0, 2**-0.5, 2**-0.5, 0]`` points the gripper straight down
        with the jaws closing along the base y axis). The position moves on the line and
        the orientation turns on the shortest arc, both at a constant pace:
        ``speed`` m/s (default 0.05) and ``angular`` rad/s (default 0.5), whichever is
        slower governs. ``duration`` (s) alone sets the sweep's length; together with
        speed/angular it is the most the sweep may take. Omitting ``quaternion`` keeps
        the current orientation; omitting ``position`` turns in place.

        The whole path is solved by IK and checked for joint limits, self-collision and
        the workspace box before anything moves. ``mode="guarded"`` (default) stops at
        first contact (contact force above its starting value + 12 N);
        ``mode="manipulation"`` tolerates load (pushing, carrying, pressing) up to the
        emergency limit (80 N). The force peak at first contact grows with the approach
        speed (about 1 N per mm/s onto the simulated table), so descend onto surfaces at
        0.04 m/s or slower: faster guarded descents can stop on the emergency limit
        instead (``FAILED controller_rejected; emergency_limit``).

        ``move_to(gripper="open"|"close")``: one jaw command; reports the opening before
        and after and whether something is held.

        Value: ``stopped_reason`` (target_reached, contact, emergency_limit, ik_failed,
        self_collision, joint_limit, workspace_limit, timeout, cancelled),
        ``executed_distance_m``, ``max_observed_force_n``, ``end_effector_position_m``,
        ``end_effector_quaternion_wxyz``, ``position_error_m``, ``held``, ...
        """
        req = self.parse_move(position, quaternion, speed, duration, angular, mode, gripper)
        if req.gripper is not None:
            return self._gripper("move_to", req.gripper)
        with self._action("move_to"):
            state = self._read_state()
            plan = self._plan(self.kin, self.collision, req, state.joint_positions_rad)
            if not plan.ok:
                return self._plan_failure("move_to", plan)
            report, value = self._sweep("move_to", plan, req.mode, state)
            return self._motion_outcome("move_to", report, value, plan.message)

    def _gripper(self, name: str, command: str) -> CallOutcome:
        cfg = self.config
        with self._action(name):
            before = self._read_state()
            fraction = 1.0 if command == "open" else 0.0
            held_before = self.held(before)
            guard = ForceGuard(cfg.emergency_force_n, ignore_finger_contacts=True)
            q_hold = self._hold_target(before)
            report = self.executor.run_gripper(
                fraction,
                q_hold,
                guard=guard,
                timeout_s=cfg.gripper_timeout_s,
                settle_m=cfg.gripper_settle_m,
                cancel=self._cancel_check(),
            )
            self._gripper_command = command
            after = report.final_state
            self._record("gripper", "", before, report, sweep=False, goal_T=None, guard=guard)
            if report.stopped_reason != TARGET_REACHED:
                self._arm_target = np.array(after.joint_positions_rad, dtype=float)
            held = self.held(after)
            value = {
                "command": command,
                "stopped_reason": report.stopped_reason,
                "gripper_open_fraction_before": before.gripper_open_fraction,
                "gripper_open_fraction_after": after.gripper_open_fraction,
                "gripper_open_fraction": after.gripper_open_fraction,
                "gripper_opening_m_before": before.gripper_opening_m,
                "gripper_opening_m_after": after.gripper_opening_m,
                "held": held,
                "held_before": held_before,
                "finger_forces_n": after.finger_forces_n,
                "max_observed_force_n": report.peak_force_n,
                "duration_s": report.duration_s,
            }
            fields: list[tuple[str, Any]] = [
                ("gripper_open_fraction", (before.gripper_open_fraction, after.gripper_open_fraction))
            ]
            if command == "close":
                fields.append(("held", held))
            if report.stopped_reason != TARGET_REACHED:
                result = fail(
                    STOP_CATEGORY.get(report.stopped_reason, FailureCategory.INTERNAL_ERROR),
                    f"jaw command {command!r} stopped: {report.message or report.stopped_reason}",
                    executed=True,
                    value=value,
                )
                return CallOutcome(result, receipt(name, result, fields, report.stopped_reason))
            what = ("closed on something (held)" if held else "closed on nothing") if command == "close" else "opened"
            message = (
                f"jaws {what}: opening {before.gripper_opening_m * 1000:.1f} -> {after.gripper_opening_m * 1000:.1f} mm"
            )
            if report.message:
                message += f" ({report.message})"
            result = ok(value, executed=True, message=message)
            return CallOutcome(result, format_receipt(name, result, fields))

    # ------------------------------------------------------------------ hold
    @primitive(physical=True, group="motion")
    @never_raises("hold")
    def hold(self, duration_s: float | None = None) -> CallOutcome:
        """Keep the current pose for ``duration_s`` seconds (default 1.0, at most 30):
        position control holds, nothing moves unless pushed; stops on the emergency force
        limit. Value: ``duration_s``, ``drift_m`` (TCP movement), ``max_observed_force_n``,
        ``end_effector_position_m``."""
        cfg = self.config
        d = (
            cfg.hold_default_duration_s
            if duration_s is None
            else arguments.as_float("duration_s", duration_s, minimum=0.0, maximum=cfg.hold_max_duration_s, unit="s")
        )
        with self._action("hold"):
            start = self._read_state()
            guard = ForceGuard(cfg.emergency_force_n, ignore_finger_contacts=self.held(start))
            q_hold = self._hold_target(start)
            report = self.executor.run_hold(d, q_hold, guard=guard, cancel=self._cancelled,
                                            feedback=self._feedback, state_every=self._state_every())
            self._record("hold", "", start, report, sweep=False, goal_T=None, guard=guard)
            end = report.final_state
            p0 = self.kin.fk(start.joint_positions_rad)[:3, 3]
            p1 = self.kin.fk(end.joint_positions_rad)[:3, 3]
            value = {
                "stopped_reason": report.stopped_reason,
                "duration_s": report.duration_s,
                "drift_m": float(np.linalg.norm(p1 - p0)),
                "max_observed_force_n": report.peak_force_n,
                "end_effector_position_m": p1,
                "held": self.held(end),
            }
            if report.stopped_reason != TARGET_REACHED:
                self._arm_target = np.array(end.joint_positions_rad, dtype=float)
                result = fail(
                    STOP_CATEGORY.get(report.stopped_reason, FailureCategory.INTERNAL_ERROR),
                    f"hold stopped: {report.message or report.stopped_reason}",
                    executed=True,
                    value=value,
                )
                fields = [("max_observed_force_n", report.peak_force_n)]
                return CallOutcome(result, receipt("hold", result, fields, report.stopped_reason))
            result = ok(value, executed=True, message=f"held for {report.duration_s:.3g} s")
            return CallOutcome(result, format_receipt("hold", result))

    # --------------------------------------------------------------- recover
    def _parse_recover(self, max_distance_m: Any, max_duration_s: Any) -> tuple[float, float]:
        cfg = self.config
        dist = (
            cfg.recover_default_distance_m
            if max_distance_m is None
            else arguments.as_float(
                "max_distance_m",
                max_distance_m,
                minimum=0.0,
                maximum=cfg.recover_max_distance_m,
                unit="m",
                exclusive_minimum=True,
            )
        )
        dur = (
            cfg.recover_default_duration_s
            if max_duration_s is None
            else arguments.as_float(
                "max_duration_s",
                max_duration_s,
                minimum=0.0,
                maximum=cfg.max_sweep_duration_s,
                unit="s",
                exclusive_minimum=True,
            )
        )
        return dist, dur

    def _plan_recover(self, kin: Kinematics, dist: float, dur: float, q_now: np.ndarray) -> PathPlan:
        path = self.history.recover_path()
        if path is None:
            empty = kin.fk(q_now)
            return PathPlan(
                False,
                "nothing_to_recover",
                "no sweep has been executed yet, so there is no path to retrace; use move_to to back away",
                np.array([0.0]),
                q_now[None],
                0.0,
                0.0,
                empty,
                empty,
            )
        here = kin.fk(q_now)[:3, 3]
        end = kin.fk(path[-1])[:3, 3]
        gap = float(np.linalg.norm(here - end))
        if gap > 0.02:
            T = kin.fk(q_now)
            return PathPlan(
                False,
                "nothing_to_recover",
                f"the arm is {gap:.3g} m from where the last sweep ended (it moved since); recover "
                "only retraces the last sweep; use move_to instead",
                np.array([0.0]),
                q_now[None],
                0.0,
                0.0,
                T,
                T,
            )
        plan = plan_reverse(
            kin,
            self.config,
            path,
            q_now,
            max_distance_m=dist,
            max_duration_s=dur,
            speed_m_s=self.config.recover_speed_m_s,
        )
        if not plan.ok:
            plan.message = f"{plan.message}; use move_to to move elsewhere"
        return plan

    @primitive(physical=True, group="motion")
    @never_raises("recover")
    def recover(self, max_distance_m: float | None = None, max_duration_s: float | None = None) -> CallOutcome:
        """Back off along the last executed sweep (its measured joint path, in reverse) by
        at most ``max_distance_m`` of TCP travel (default 0.05 m) and at most
        ``max_duration_s`` (default 10 s), at 0.03 m/s, tolerating load up to the
        emergency limit. Repeated calls continue further back. Value:
        ``stopped_reason``, ``executed_distance_m``, ``remaining_path_m`` (what a further
        recover could still retrace), ``end_effector_position_m``."""
        dist, dur = self._parse_recover(max_distance_m, max_duration_s)
        with self._action("recover"):
            state = self._read_state()
            q_now = np.asarray(state.joint_positions_rad, dtype=float)
            plan = self._plan_recover(self.kin, dist, dur, q_now)
            if not plan.ok:
                return self._plan_failure("recover", plan)
            path = self.history.recover_path()
            guard = (ForceGuard(self.config.emergency_force_n, ignore_finger_contacts=self.held(state)), None)
            report, value = self._sweep(
                "recover", plan, "manipulation", state, guarded_mode=False, guard_override=guard
            )
            remaining = self._consume_recover_path(path, report.final_state.joint_positions_rad)
            value["remaining_path_m"] = remaining
            return self._motion_outcome("recover", report, value, plan.message)

    def _consume_recover_path(self, path: np.ndarray | None, q_end: np.ndarray) -> float:
        """Shorten the recover path to the part before ``q_end``; returns its TCP length."""
        if path is None or len(path) < 2:
            self.history.set_recover_path(None)
            return 0.0
        tcp = self.kin.tcp_positions(path)
        here = self.kin.fk(q_end)[:3, 3]
        k = int(np.argmin(np.linalg.norm(tcp - here, axis=1)))
        remaining = np.vstack((path[:k], np.asarray(q_end, float)[None])) if k > 0 else None
        self.history.set_recover_path(remaining)
        if remaining is None:
            return 0.0
        seg = np.linalg.norm(np.diff(np.vstack((tcp[:k], here[None])), axis=0), axis=1)
        return float(seg.sum())

    # --------------------------------------------------------------- release
    def _parse_release(self, retreat_m: Any, speed: Any) -> tuple[float, float]:
        cfg = self.config
        r = (
            cfg.release_retreat_m
            if retreat_m is None
            else arguments.as_float("retreat_m", retreat_m, minimum=0.0, maximum=0.3, unit="m")
        )
        v = (
            cfg.release_speed_m_s
            if speed is None
            else arguments.as_float(
                "speed",
                speed,
                minimum=0.0,
                maximum=cfg.max_linear_speed_m_s,
                unit="m/s",
                exclusive_minimum=True,
            )
        )
        return r, v

    def _retreat_request(self, kin: Kinematics, q_now: np.ndarray, retreat_m: float, speed: float) -> MoveRequest:
        T = kin.fk(q_now)
        goal = T[:3, 3] - retreat_m * T[:3, 2]
        return MoveRequest(goal, matrix_to_quat(T[:3, :3]), speed, None, None, "guarded", None)

    @primitive(physical=True, group="motion")
    @never_raises("release")
    def release(self, retreat_m: float | None = None, speed: float | None = None) -> CallOutcome:
        """Open the jaws, then back the TCP away along its own -z axis (out of the grasp,
        straight up for a top-down grasp) by ``retreat_m`` (default 0.05 m, 0 to only
        open) at ``speed`` (default 0.03 m/s), guarded. Value: jaw opening before/after,
        ``stopped_reason`` and ``executed_distance_m`` of the retreat."""
        retreat, speed_m_s = self._parse_release(retreat_m, speed)
        opened = self._gripper("release", "open")
        if not opened.result["success"]:
            return opened
        gv = opened.result["value"]
        fields: list[tuple[str, Any]] = [
            ("gripper_open_fraction", (gv["gripper_open_fraction_before"], gv["gripper_open_fraction_after"]))
        ]
        if retreat <= 0.0:
            return opened
        with self._action("release"):
            state = self._read_state()
            req = self._retreat_request(self.kin, np.asarray(state.joint_positions_rad, float), retreat, speed_m_s)
            plan = self._plan(self.kin, self.collision, req, state.joint_positions_rad)
            if not plan.ok:
                out = self._plan_failure("release", plan, extra=dict(gv))
                out.result["executed"] = True
                out.result["message"] = "the jaws opened, but the retreat " + out.result["message"].split(": ", 1)[-1]
                return out
            report, value = self._sweep("release", plan, "guarded", state)
            value.update(
                {
                    k: gv[k]
                    for k in (
                        "gripper_open_fraction_before",
                        "gripper_open_fraction_after",
                        "gripper_opening_m_before",
                        "gripper_opening_m_after",
                    )
                }
            )
            outcome = self._motion_outcome("release", report, value, f"jaws opened and backed away {retreat:g} m")
            if outcome.result["success"]:
                fields += [
                    ("executed_distance_m", value["executed_distance_m"]),
                    ("max_observed_force_n", value["max_observed_force_n"]),
                ]
                outcome = CallOutcome(outcome.result, format_receipt("release", outcome.result, fields))
            return outcome

    # ------------------------------------------------------- planning (read-only)
    def _planning_state(self) -> RobotState:
        return self.driver.read_state()

    @primitive(physical=False, group="planning")
    @never_raises("check_motion")
    def check_motion(
        self,
        position: Sequence[float] | None = None,
        quaternion: Sequence[float] | None = None,
        speed: float | None = None,
        duration: float | None = None,
        angular: float | None = None,
        mode: str = "guarded",
    ) -> CallOutcome:
        """Check, without moving, a ``move_to(position, quaternion, ...)`` from the current
        pose: whether the target is reachable at all (IK with restarts), whether the
        straight path passes every check (IK, joint limits, self-collision, workspace)
        and how long it takes. Value: ``reachable``, ``path_ok``, ``stopped_reason``
        (predicted), ``path_fraction`` of a failure, ``duration_s``, ``path_length_m``,
        ``rotation_deg``, ``goal_joint_positions_rad``, ``min_joint_limit_margin_rad``."""
        req = self.parse_move(position, quaternion, speed, duration, angular, mode, None, call="check_motion")
        state = self._planning_state()
        with self.planning_lock:
            kin, col = self.planning_kin, self.planning_collision
            plan = self._plan(kin, col, req, state.joint_positions_rad)
            reach = kin.solve_ik(
                plan.goal_T,
                np.asarray(state.joint_positions_rad, float),
                max_iterations=self.config.ik_max_iterations,
                restarts=self.config.ik_restarts,
                rng=np.random.default_rng(self.config.ik_seed),
                is_valid=lambda q: not col.in_collision(q),
            )
            margins = None
            if len(plan.q_waypoints):
                qw = plan.q_waypoints
                margins = float(np.min(np.minimum(qw - kin.lower_rad, kin.upper_rad - qw)))
        value = {
            "reachable": reach.success,
            "path_ok": plan.ok,
            "stopped_reason": plan.stop_reason,
            "path_fraction": plan.fail_fraction,
            "duration_s": plan.duration_s,
            "path_length_m": plan.path_length_m,
            "rotation_deg": math.degrees(plan.rotation_rad),
            "target_position_m": plan.goal_T[:3, 3],
            "target_quaternion_wxyz": matrix_to_quat(plan.goal_T[:3, :3]),
            "goal_joint_positions_rad": plan.goal_q if plan.ok else (reach.q if reach.success else None),
            "min_joint_limit_margin_rad": margins,
            "slowed_for_joint_velocity": plan.slowed_for_joint_velocity,
            "colliding_links": [list(p) for p in plan.colliding_links],
            "limited_joint": plan.limited_joint,
            "mode": req.mode,
        }
        fields = [
            ("reachable", reach.success),
            ("path_ok", plan.ok),
            ("duration_s", plan.duration_s),
            ("path_length_m", plan.path_length_m),
        ]
        if plan.ok:
            result = ok(value, message=plan.message)
            return CallOutcome(result, format_receipt("check_motion", result, fields))
        result = fail(STOP_CATEGORY.get(plan.stop_reason, FailureCategory.INTERNAL_ERROR), plan.message, value=value)
        return CallOutcome(result, receipt("check_motion", result, fields, plan.stop_reason))

    @primitive(physical=False, group="planning")
    @never_raises("preview_motion")
    def preview_motion(self, kind: str, args: dict[str, Any] | None = None) -> CallOutcome:
        """Predict, without moving, what a motion call would do: ``kind`` is "move_to",
        "recover", "release" or "hold" and ``args`` the keyword arguments that call would
        get, e.g. ``preview_motion("recover", {"max_distance_m": 0.02})`` or
        ``preview_motion("move_to", {"position": p, "quaternion": q, "speed": 0.03})``.
        ``success`` says whether the call would run to its end in free space;
        otherwise ``failure_category`` and the message say why not. Contacts with
        objects are not predicted. Value: ``stopped_reason``, ``predicted_position_m``,
        ``predicted_quaternion_wxyz``, ``duration_s``, ``distance_m``, ``rotation_deg``."""
        kind = arguments.as_choice("kind", kind, PREVIEW_KINDS)
        kwargs = arguments.as_mapping("args", args)
        target = {
            "move_to": self.move_to,
            "recover": self.recover,
            "release": self.release,
            "hold": self.hold,
        }[kind]
        try:
            inspect.signature(target).bind(**kwargs)
        except TypeError as exc:
            params = ", ".join(inspect.signature(target).parameters)
            raise ArgumentError(f"args do not fit {kind}({params}): {exc}") from None
        state = self._planning_state()
        q_now = np.asarray(state.joint_positions_rad, dtype=float)
        with self.planning_lock:
            kin = self.planning_kin
            T_now = kin.fk(q_now)
            value: dict[str, Any] = {"kind": kind}
            plan: PathPlan | None = None
            if kind == "move_to":
                req = self.parse_move(
                    kwargs.get("position"),
                    kwargs.get("quaternion"),
                    kwargs.get("speed"),
                    kwargs.get("duration"),
                    kwargs.get("angular"),
                    kwargs.get("mode", "guarded"),
                    kwargs.get("gripper"),
                )
                if req.gripper is not None:
                    value.update(
                        {
                            "stopped_reason": TARGET_REACHED,
                            "gripper": req.gripper,
                            "gripper_open_fraction_before": state.gripper_open_fraction,
                            "predicted_gripper_open_fraction": 1.0 if req.gripper == "open" else None,
                            "predicted_position_m": T_now[:3, 3],
                            "duration_s": None,
                            "note": "closing stops on whatever is between the jaws",
                        }
                    )
                else:
                    plan = self._plan(kin, self.planning_collision, req, q_now)
                    value["mode"] = req.mode
            elif kind == "recover":
                dist, dur = self._parse_recover(kwargs.get("max_distance_m"), kwargs.get("max_duration_s"))
                plan = self._plan_recover(kin, dist, dur, q_now)
            elif kind == "release":
                retreat, speed_m_s = self._parse_release(kwargs.get("retreat_m"), kwargs.get("speed"))
                value["predicted_gripper_open_fraction"] = 1.0
                if retreat > 0.0:
                    req = self._retreat_request(kin, q_now, retreat, speed_m_s)
                    plan = self._plan(kin, self.planning_collision, req, q_now)
                else:
                    value.update({"stopped_reason": TARGET_REACHED, "predicted_position_m": T_now[:3, 3]})
            else:
                cfg = self.config
                d = (
                    cfg.hold_default_duration_s
                    if kwargs.get("duration_s") is None
                    else arguments.as_float(
                        "duration_s",
                        kwargs["duration_s"],
                        minimum=0.0,
                        maximum=cfg.hold_max_duration_s,
                        unit="s",
                    )
                )
                value.update(
                    {
                        "stopped_reason": TARGET_REACHED,
                        "duration_s": d,
                        "predicted_position_m": T_now[:3, 3],
                        "predicted_quaternion_wxyz": matrix_to_quat(T_now[:3, :3]),
                    }
                )
        if plan is None:
            result = ok(value, message=f"{kind} would run")
            return CallOutcome(result, format_receipt("preview_motion", result, [("kind", kind)]))
        value.update(
            {
                "stopped_reason": plan.stop_reason,
                "predicted_position_m": plan.goal_T[:3, 3] if plan.ok else None,
                "predicted_quaternion_wxyz": matrix_to_quat(plan.goal_T[:3, :3]) if plan.ok else None,
                "duration_s": plan.duration_s,
                "distance_m": plan.path_length_m,
                "rotation_deg": math.degrees(plan.rotation_rad),
                "path_fraction": plan.fail_fraction,
                "start_position_m": plan.start_T[:3, 3],
            }
        )
        fields = [
            ("kind", kind),
            ("stopped_reason", plan.stop_reason),
            ("distance_m", plan.path_length_m),
            ("duration_s", plan.duration_s),
        ]
        if plan.ok:
            result = ok(value, message=f"{kind} would run: {plan.message}")
            return CallOutcome(result, format_receipt("preview_motion", result, fields))
        result = fail(
            STOP_CATEGORY.get(plan.stop_reason, FailureCategory.INTERNAL_ERROR),
            f"{kind} would not run: {plan.message}",
            value=value,
        )
        return CallOutcome(result, receipt("preview_motion", result, fields[2:], plan.stop_reason))
