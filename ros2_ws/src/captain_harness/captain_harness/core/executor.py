"""Streaming a planned joint path to a driver at control rate, with guards and cancellation.

One ``advance()`` of the driver is one control period. Each period the executor sends
the next joint target, lets the driver advance with a ``ForceGuard`` (checked by the
driver at every physics substep or state update), reads the state and records it.
It stops when the guard trips (the driver then holds), when the driver reports a
fault, or when a cancel request arrives (it commands a hold before returning). After
the last target it keeps the goal commanded until the TCP settles or a timeout passes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from captain_backends.core.driver import ForceGuard, JointCommand, RobotDriver, RobotState
from captain_backends.core.errors import BackendError
from captain_harness.core.geometry import rotation_angle_rad
from captain_harness.core.kinematics import Kinematics

CancelSource = threading.Event | Callable[[], bool] | None
#: ``feedback(progress_0_to_1, state)`` called every few control periods.
FeedbackFn = Callable[[float, RobotState], None]

TARGET_REACHED = "target_reached"
CONTACT = "contact"
EMERGENCY_LIMIT = "emergency_limit"
CANCELLED = "cancelled"
TIMEOUT = "timeout"
DRIVER_FAULT = "driver_fault"


def _never() -> bool:
    return False


def _poller(source: CancelSource) -> Callable[[], bool]:
    """A cheap zero-argument check of a cancel source."""
    if source is None:
        return _never
    if isinstance(source, threading.Event):
        return source.is_set
    return source


def is_cancelled(source: CancelSource) -> bool:
    """True when the cancel source (an Event or a callable) asks to stop."""
    if source is None:
        return False
    if isinstance(source, threading.Event):
        return source.is_set()
    return bool(source())


@dataclass
class Recording:
    """What happened during one execution, sampled once per control period.

    Attributes:
        time_s: driver time of each sample.
        q: measured arm joint positions, rad (N, nq).
        force_n: contact force magnitude of the state, N.
        commanded: joint targets sent, rad (N, nq).
    """

    time_s: list[float] = field(default_factory=list)
    q: list[np.ndarray] = field(default_factory=list)
    force_n: list[float] = field(default_factory=list)
    commanded: list[np.ndarray] = field(default_factory=list)

    def add(self, state: RobotState, commanded: np.ndarray) -> None:
        """Append one sample."""
        self.time_s.append(state.time_s)
        self.q.append(state.joint_positions_rad)
        self.force_n.append(state.contact_force_n)
        self.commanded.append(commanded)

    def __len__(self) -> int:
        return len(self.time_s)


@dataclass
class ExecutionReport:
    """Outcome of one execution.

    Attributes:
        stopped_reason: ``target_reached``, ``contact``, ``emergency_limit``,
            ``cancelled``, ``timeout`` or ``driver_fault``.
        progress: fraction of the planned targets that were sent, 0..1.
        peak_force_n: the largest contact force the driver reported, N.
        guard_tripped_at_s: driver time of a guard trip, or None.
        duration_s: driver time that passed.
        final_state: the last state read.
        recording: per-period samples.
        physics_wall_s: wall time spent inside ``driver.advance``.
        message: a sentence on why it stopped (for non-target stops).
    """

    stopped_reason: str
    progress: float
    peak_force_n: float
    guard_tripped_at_s: float | None
    duration_s: float
    final_state: RobotState
    recording: Recording
    physics_wall_s: float
    message: str = ""


class MotionExecutor:
    """Sends joint targets to a driver period by period (see the module docstring).

    Args:
        driver: any ACTIVE ``RobotDriver``.
        kin: kinematics of the same robot (for the settle check).
        emergency_force_n: a guard trip whose peak exceeds this is an emergency stop.
    """

    def __init__(self, driver: RobotDriver, kin: Kinematics, emergency_force_n: float) -> None:
        self.driver = driver
        self.kin = kin
        self.emergency_force_n = emergency_force_n
        #: wall time the last ``run`` spent in ``send_command`` / ``read_state`` while
        #: streaming (not settling), s
        self.last_driver_io_wall_s = 0.0

    def run(
        self,
        targets: np.ndarray,
        *,
        guard: ForceGuard | None,
        guarded_mode: bool,
        cancel: CancelSource = None,
        feedback: FeedbackFn | None = None,
        state_every: int = 1,
        goal_T: np.ndarray | None = None,
        settle_timeout_s: float = 0.0,
        settle_position_m: float = 0.001,
        settle_rotation_rad: float = 0.01,
        gripper_fraction: float | None = None,
        start_state: RobotState | None = None,
        wrench_limit_n: float | None = None,
        tighten_guard_n: float | None = None,
    ) -> ExecutionReport:
        """Stream ``targets`` (N, nq), one per control period, then settle on ``goal_T``.

        Args:
            targets: joint targets, rad, command order.
            guard: the force guard passed to every ``advance`` (the driver checks it at
                every physics substep / state update).
            guarded_mode: a trip below the emergency force is reported as ``contact``
                (else every trip is an ``emergency_limit``).
            cancel: polled once per period; when set, the arm is held and the run ends
                with ``cancelled``.
            feedback: progress callback, called at every state read.
            state_every: read (and record) the state every this many periods, and
                always at the last one and on a guard trip (state reads can cost more
                than the rest of the loop).
            goal_T: the TCP goal (4x4, base frame) for settling; no settling if None.
            settle_timeout_s: the most time spent settling after the last target.
            settle_position_m / settle_rotation_rad: settling ends below these errors.
            gripper_fraction: jaw target sent with the first command (None: unchanged).
            start_state: the state read just before (saves one read).
            wrench_limit_n: stop (hold) when the net contact force on the hand
                (``wrench_base[:3]``) changes from its starting value by more than this,
                checked at every period (the state is then read every period); used
                while an object is held, whose contacts with the world are not robot
                contacts.
            tighten_guard_n: when set, the guard limit follows the contact force down
                (never up) at every state read: limit = min(limit, force + this). A
                motion that starts pressing on something starts with a loose guard and
                gets the normal one once it has left the contact.
        """
        driver = self.driver
        rec = Recording()
        state = start_state if start_state is not None else driver.read_state()
        t0 = state.time_s
        n = len(targets)
        peak = 0.0
        physics = 0.0
        perf = time.perf_counter
        sent = 0
        fraction = gripper_fraction
        wrench0 = np.asarray(state.wrench_base[:3], dtype=float)
        io = 0.0
        every = 1 if wrench_limit_n is not None else max(1, int(state_every))
        cancelled = _poller(cancel)
        send, advance, read = driver.send_command, driver.advance, driver.read_state
        try:
            for k in range(n):
                if cancelled():
                    driver.hold()
                    state = driver.read_state()
                    rec.add(state, state.joint_positions_rad)
                    return self._report(
                        CANCELLED,
                        sent / max(n, 1),
                        peak,
                        None,
                        state,
                        t0,
                        rec,
                        physics,
                        "cancel requested; the arm is holding",
                    )
                target = targets[k]
                t_a = perf()
                send(JointCommand(target, fraction))
                t_b = perf()
                report = advance(guard)
                t_c = perf()
                physics += t_c - t_b
                io += t_b - t_a
                fraction = None
                sent = k + 1
                if report.peak_contact_force_n > peak:
                    peak = report.peak_contact_force_n
                if not (report.guard_tripped or sent == n or sent % every == 0):
                    continue
                state = read()
                io += perf() - t_c
                rec.add(state, target)
                if report.guard_tripped:
                    return self._tripped(
                        guarded_mode,
                        guard,
                        report.guard_tripped_at_s,
                        sent / n,
                        peak,
                        state,
                        t0,
                        rec,
                        physics,
                    )
                if state.fault:
                    return self._report(
                        DRIVER_FAULT,
                        sent / n,
                        peak,
                        None,
                        state,
                        t0,
                        rec,
                        physics,
                        f"the driver stopped: {state.fault}",
                    )
                if wrench_limit_n is not None:
                    change = float(np.linalg.norm(np.asarray(state.wrench_base[:3]) - wrench0))
                    if change > wrench_limit_n:
                        driver.hold()
                        reason = CONTACT if guarded_mode else EMERGENCY_LIMIT
                        return self._report(
                            reason,
                            sent / n,
                            max(peak, change),
                            state.time_s,
                            state,
                            t0,
                            rec,
                            physics,
                            f"the load on the gripper changed by {change:.3g} N "
                            f"(> {wrench_limit_n:.3g} N): the held object or the hand touched "
                            "something",
                        )
                if tighten_guard_n is not None and guard is not None:
                    tighter = state.contact_force_n + tighten_guard_n
                    if tighter < guard.max_contact_force_n:
                        guard = replace(guard, max_contact_force_n=tighter)
                if feedback is not None:
                    feedback(sent / n, state)
        except BackendError as exc:
            return self._driver_error(exc, sent / max(n, 1), peak, t0, rec, physics)
        finally:
            self.last_driver_io_wall_s = io
        if goal_T is None or settle_timeout_s <= 0.0:
            return self._report(TARGET_REACHED, 1.0, peak, None, state, t0, rec, physics)
        # settle: keep the goal commanded until the TCP is there or the time is up
        goal_q = targets[-1] if n else state.joint_positions_rad
        period = float(driver.control_period_s)
        settle_steps = int(np.ceil(settle_timeout_s / period))
        try:
            for _ in range(settle_steps):
                T = self.kin.fk(state.joint_positions_rad)
                if (
                    np.linalg.norm(T[:3, 3] - goal_T[:3, 3]) <= settle_position_m
                    and rotation_angle_rad(T[:3, :3], goal_T[:3, :3]) <= settle_rotation_rad
                ):
                    break
                if is_cancelled(cancel):
                    driver.hold()
                    state = driver.read_state()
                    rec.add(state, state.joint_positions_rad)
                    return self._report(
                        CANCELLED,
                        1.0,
                        peak,
                        None,
                        state,
                        t0,
                        rec,
                        physics,
                        "cancel requested while settling; the arm is holding",
                    )
                t_a = perf()
                driver.send_command(JointCommand(goal_q))
                t_b = perf()
                report = driver.advance(guard)
                t_c = perf()
                state = driver.read_state()
                physics += t_c - t_b
                self.last_driver_io_wall_s += (t_b - t_a) + (perf() - t_c)
                rec.add(state, goal_q)
                if report.peak_contact_force_n > peak:
                    peak = report.peak_contact_force_n
                if report.guard_tripped:
                    return self._tripped(
                        guarded_mode, guard, report.guard_tripped_at_s, 1.0, peak, state, t0, rec, physics
                    )
                if state.fault:
                    return self._report(
                        DRIVER_FAULT,
                        1.0,
                        peak,
                        None,
                        state,
                        t0,
                        rec,
                        physics,
                        f"the driver stopped: {state.fault}",
                    )
        except BackendError as exc:
            return self._driver_error(exc, 1.0, peak, t0, rec, physics)
        return self._report(TARGET_REACHED, 1.0, peak, None, state, t0, rec, physics)

    def run_gripper(
        self,
        fraction: float,
        q_hold: np.ndarray,
        *,
        guard: ForceGuard | None,
        timeout_s: float,
        settle_m: float,
        cancel: CancelSource = None,
        min_time_s: float = 0.05,
    ) -> ExecutionReport:
        """Command the jaw to ``fraction`` (0 closed .. 1 open) while the arm holds
        ``q_hold``; ends when the opening stops changing (less than ``settle_m`` over two
        periods), after ``timeout_s``, on a guard trip (emergency) or on cancel."""
        driver = self.driver
        rec = Recording()
        state = driver.read_state()
        t0 = state.time_s
        period = float(driver.control_period_s)
        steps = max(1, int(np.ceil(timeout_s / period)))
        min_steps = max(2, int(np.ceil(min_time_s / period)))
        peak = 0.0
        physics = 0.0
        perf = time.perf_counter
        opening = [state.gripper_opening_m]
        driver.send_command(JointCommand(q_hold, float(fraction)))
        for k in range(steps):
            if is_cancelled(cancel):
                driver.hold()
                state = driver.read_state()
                return self._report(
                    CANCELLED,
                    k / steps,
                    peak,
                    None,
                    state,
                    t0,
                    rec,
                    physics,
                    "cancel requested; the jaw and arm are holding",
                )
            t_a = perf()
            report = driver.advance(guard)
            physics += perf() - t_a
            state = driver.read_state()
            rec.add(state, q_hold)
            opening.append(state.gripper_opening_m)
            peak = max(peak, report.peak_contact_force_n)
            if report.guard_tripped:
                return self._tripped(
                    False, guard, report.guard_tripped_at_s, (k + 1) / steps, peak, state, t0, rec, physics
                )
            if state.fault:
                return self._report(
                    DRIVER_FAULT,
                    (k + 1) / steps,
                    peak,
                    None,
                    state,
                    t0,
                    rec,
                    physics,
                    f"the driver stopped: {state.fault}",
                )
            if k + 1 >= min_steps and abs(opening[-1] - opening[-3]) < settle_m:
                return self._report(TARGET_REACHED, 1.0, peak, None, state, t0, rec, physics)
        return self._report(
            TARGET_REACHED,
            1.0,
            peak,
            None,
            state,
            t0,
            rec,
            physics,
            f"the jaw was still moving after {timeout_s:g} s",
        )

    def run_hold(
        self, duration_s: float, q_hold: np.ndarray, *, guard: ForceGuard | None, cancel: CancelSource = None
    ) -> ExecutionReport:
        """Keep ``q_hold`` commanded for ``duration_s`` (guarded, cancellable)."""
        driver = self.driver
        rec = Recording()
        state = driver.read_state()
        t0 = state.time_s
        period = float(driver.control_period_s)
        steps = round(duration_s / period)
        peak = 0.0
        physics = 0.0
        perf = time.perf_counter
        driver.send_command(JointCommand(q_hold))
        for k in range(steps):
            if is_cancelled(cancel):
                driver.hold()
                state = driver.read_state()
                return self._report(
                    CANCELLED,
                    k / steps,
                    peak,
                    None,
                    state,
                    t0,
                    rec,
                    physics,
                    "cancel requested; the arm is holding",
                )
            t_a = perf()
            report = driver.advance(guard)
            physics += perf() - t_a
            state = driver.read_state()
            rec.add(state, q_hold)
            peak = max(peak, report.peak_contact_force_n)
            if report.guard_tripped:
                return self._tripped(
                    False, guard, report.guard_tripped_at_s, (k + 1) / steps, peak, state, t0, rec, physics
                )
            if state.fault:
                return self._report(
                    DRIVER_FAULT,
                    (k + 1) / steps,
                    peak,
                    None,
                    state,
                    t0,
                    rec,
                    physics,
                    f"the driver stopped: {state.fault}",
                )
        return self._report(TARGET_REACHED, 1.0, peak, None, state, t0, rec, physics)

    def _driver_error(
        self, exc: Exception, progress: float, peak: float, t0: float, rec: Recording, physics: float
    ) -> ExecutionReport:
        state = self.driver.read_state()
        with contextlib.suppress(Exception):
            self.driver.hold()
        return self._report(DRIVER_FAULT, progress, peak, None, state, t0, rec, physics, f"the driver refused: {exc}")

    def _tripped(
        self,
        guarded_mode: bool,
        guard: ForceGuard | None,
        at_s: float | None,
        progress: float,
        peak: float,
        state: RobotState,
        t0: float,
        rec: Recording,
        physics: float,
    ) -> ExecutionReport:
        limit = guard.max_contact_force_n if guard is not None else float("nan")
        if guarded_mode and peak <= self.emergency_force_n:
            return self._report(
                CONTACT,
                progress,
                peak,
                at_s,
                state,
                t0,
                rec,
                physics,
                f"stopped at first contact (force {peak:.3g} N > guard {limit:.3g} N)",
            )
        return self._report(
            EMERGENCY_LIMIT,
            progress,
            peak,
            at_s,
            state,
            t0,
            rec,
            physics,
            f"stopped on the emergency force limit ({peak:.4g} N > {self.emergency_force_n:.3g} N)"
            if peak > self.emergency_force_n
            else f"stopped on the force limit ({peak:.4g} N > {limit:.3g} N)",
        )

    @staticmethod
    def _report(
        reason: str,
        progress: float,
        peak: float,
        at_s: float | None,
        state: RobotState,
        t0: float,
        rec: Recording,
        physics: float,
        message: str = "",
    ) -> ExecutionReport:
        return ExecutionReport(
            reason, float(progress), float(peak), at_s, float(state.time_s - t0), state, rec, physics, message
        )
