"""The state every motion primitive shares: the driver, the kinematic models, the motion
history, the one-physical-call-at-a-time lock and cancellation, and the force guard a
motion starts with.

``MotionBase`` is the root of the motion primitives' classes (``execution``, ``move_to``,
``hold``, ``recover``, ``release``, ``planning``); ``MotionPrimitives`` (the package)
combines them. Frames and units as in the package docstring.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from captain_backends.core.driver import ForceGuard, LifecycleState, RobotDriver, RobotState
from captain_harness.core.collision import SelfCollisionChecker
from captain_harness.core.errors import HarnessError
from captain_harness.core.executor import CancelSource, FeedbackFn, MotionExecutor
from captain_harness.core.geometry import matrix_to_quat
from captain_harness.core.kinematics import Kinematics
from captain_harness.core.motion_config import MotionConfig
from captain_harness.core.results import FailureCategory, format_receipt
from captain_harness.core.state_calls import StateCalls
from captain_harness.core.trajectory import MotionHistory

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


class MotionBase:
    """The state the motion primitives share over one driver (see the module docstring).

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

    def hold_after_fault(self) -> str:
        """After an unexpected error in a physical primitive (called by the boundary,
        ``boundary.py``): command a hold when the driver is active; returns what happened,
        for the failure message (a failing hold raises)."""
        state = self.driver.lifecycle_state
        if state is not LifecycleState.ACTIVE:
            return f"the driver is {state.value}, so no hold was commanded"
        self.driver.hold()
        return "the arm was commanded to hold where it is"

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

    def _state_every(self) -> int:
        period = float(self.driver.control_period_s)
        return max(1, round(self.config.state_sample_period_s / period))

    def _read_state(self) -> RobotState:
        return self.driver.read_state()

    def _planning_state(self) -> RobotState:
        return self.driver.read_state()
