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
from captain_harness.core.geometry import rotation_angle_rad, vector_norm
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
        final_tcp_T: ``T_base_tcp`` (4x4) of ``final_state`` when the run computed it
            (settling), else None.
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
    final_tcp_T: np.ndarray | None = None


@dataclass(frozen=True)
class _Stop:
    """Why ``MotionExecutor._cycle`` should stop after a state read."""

    reason: str
    message: str = ""
    at_s: float | None = None
    peak_n: float | None = None
    hold: bool = False


#: the goal was reached (settled TCP, jaw stopped)
_SETTLED = _Stop(TARGET_REACHED)


class _Run:
    """Book-keeping of one execution across its control periods."""

    __slots__ = ("guard", "io", "peak", "physics", "q_sent", "rec", "state", "t0")

    def __init__(self, rec: Recording, state: RobotState, guard: ForceGuard | None) -> None:
        self.rec = rec
        self.state = state
        self.guard = guard
        self.t0 = state.time_s
        self.peak = 0.0
        self.physics = 0.0
        self.io = 0.0
        self.q_sent: np.ndarray | None = None

    def update(
        self,
        peak: float,
        physics: float,
        io: float,
        guard: ForceGuard | None,
        state: RobotState,
        q_sent: np.ndarray | None,
    ) -> None:
        """Store the cycle's running values."""
        self.peak, self.physics, self.io, self.guard, self.state, self.q_sent = peak, physics, io, guard, state, q_sent

    def report(self, reason: str, progress: float, message: str = "", at_s: float | None = None) -> ExecutionReport:
        """The execution report as of now."""
        return ExecutionReport(
            reason,
            float(progress),
            float(self.peak),
            at_s,
            float(self.state.time_s - self.t0),
            self.state,
            self.rec,
            self.physics,
            message,
        )


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
        state = start_state if start_state is not None else driver.read_state()
        run = _Run(Recording(), state, guard)
        n = len(targets)
        commands: list[JointCommand | None] = [JointCommand(t) for t in targets]
        if n and gripper_fraction is not None:
            commands[0] = JointCommand(targets[0], gripper_fraction)
        wrench0 = np.asarray(state.wrench_base[:3], dtype=float)

        def on_state(state: RobotState, sent: int) -> _Stop | None:
            if wrench_limit_n is not None:
                change = float(np.linalg.norm(np.asarray(state.wrench_base[:3]) - wrench0))
                if change > wrench_limit_n:
                    return _Stop(
                        CONTACT if guarded_mode else EMERGENCY_LIMIT,
                        f"the load on the gripper changed by {change:.3g} N (> {wrench_limit_n:.3g} N): "
                        "the held object or the hand touched something",
                        at_s=state.time_s,
                        peak_n=change,
                        hold=True,
                    )
            if tighten_guard_n is not None and run.guard is not None:
                tighter = state.contact_force_n + tighten_guard_n
                if tighter < run.guard.max_contact_force_n:
                    run.guard = replace(run.guard, max_contact_force_n=tighter)
            if feedback is not None:
                feedback(sent / n, state)
            return None

        # the guard tightening alone runs inside the cycle (no callback per state read)
        inline_tighten = wrench_limit_n is None and not feedback
        checks = on_state if (wrench_limit_n is not None or feedback) else None
        every = 1 if wrench_limit_n is not None else max(1, int(state_every))
        end = self._cycle(
            run,
            commands,
            every=every,
            guarded_mode=guarded_mode,
            cancel=_poller(cancel),
            cancel_message="cancel requested; the arm is holding",
            total=n,
            on_state=checks,
            tighten_guard_n=tighten_guard_n if inline_tighten else None,
        )
        self.last_driver_io_wall_s = run.io
        if end is not None:
            return end
        if goal_T is None or settle_timeout_s <= 0.0:
            return run.report(TARGET_REACHED, 1.0)
        # settle: keep the goal commanded until the TCP is there or the time is up
        kin = self.kin
        last_fk: list = [None, None]  # (state, its T_base_tcp)

        def settled(state: RobotState, sent: int = 0) -> _Stop | None:
            T = kin.fk(state.joint_positions_rad)
            last_fk[0], last_fk[1] = state, T
            if (
                vector_norm(T[:3, 3] - goal_T[:3, 3]) <= settle_position_m
                and rotation_angle_rad(T[:3, :3], goal_T[:3, :3]) <= settle_rotation_rad
            ):
                return _SETTLED
            return None

        def with_tcp(report: ExecutionReport) -> ExecutionReport:
            if last_fk[0] is report.final_state:
                report.final_tcp_T = last_fk[1]
            return report

        if settled(run.state) is None:
            goal = JointCommand(targets[-1] if n else run.state.joint_positions_rad)
            steps = int(np.ceil(settle_timeout_s / float(driver.control_period_s)))
            end = self._cycle(
                run,
                [goal] * steps,
                every=1,
                guarded_mode=guarded_mode,
                cancel=_poller(cancel),
                cancel_message="cancel requested while settling; the arm is holding",
                total=None,
                on_state=settled,
            )
            self.last_driver_io_wall_s = run.io
            if end is not None:
                return with_tcp(end)
        return with_tcp(run.report(TARGET_REACHED, 1.0))

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
        state = driver.read_state()
        run = _Run(Recording(), state, guard)
        period = float(driver.control_period_s)
        steps = max(1, int(np.ceil(timeout_s / period)))
        min_steps = max(2, int(np.ceil(min_time_s / period)))
        opening = [state.gripper_opening_m]

        def jaw_stopped(state: RobotState, sent: int) -> _Stop | None:
            opening.append(state.gripper_opening_m)
            if sent >= min_steps and abs(opening[-1] - opening[-3]) < settle_m:
                return _SETTLED
            return None

        end = self._cycle(
            run,
            [JointCommand(q_hold, float(fraction))] + [None] * (steps - 1),
            every=1,
            guarded_mode=False,
            cancel=_poller(cancel),
            cancel_message="cancel requested; the jaw and arm are holding",
            total=steps,
            on_state=jaw_stopped,
        )
        if end is not None:
            return end
        return run.report(TARGET_REACHED, 1.0, f"the jaw was still moving after {timeout_s:g} s")

    def run_hold(
        self, duration_s: float, q_hold: np.ndarray, *, guard: ForceGuard | None, cancel: CancelSource = None,
        feedback: FeedbackFn | None = None, state_every: int = 1,
    ) -> ExecutionReport:
        """Keep ``q_hold`` commanded for ``duration_s`` (guarded, cancellable); the state is
        read every ``state_every`` periods and passed to ``feedback(progress, state)``."""
        driver = self.driver
        run = _Run(Recording(), driver.read_state(), guard)
        steps = round(duration_s / float(driver.control_period_s))

        def report_progress(state: RobotState, done: int) -> None:
            if feedback is not None:
                feedback(done / steps, state)

        end = self._cycle(
            run,
            [JointCommand(q_hold)] + [None] * (steps - 1) if steps > 0 else [],
            every=max(1, int(state_every)),
            guarded_mode=False,
            cancel=_poller(cancel),
            cancel_message="cancel requested; the arm is holding",
            total=steps,
            on_state=report_progress if feedback is not None else None,
        )
        return end if end is not None else run.report(TARGET_REACHED, 1.0)

    def _cycle(
        self,
        run: _Run,
        commands: list[JointCommand | None],
        *,
        every: int,
        guarded_mode: bool,
        cancel: Callable[[], bool],
        cancel_message: str,
        total: int | None,
        on_state: Callable[[RobotState, int], _Stop | None] | None,
        tighten_guard_n: float | None = None,
    ) -> ExecutionReport | None:
        """The control cycle shared by every execution: per period, poll ``cancel``, send
        the period's command (None: keep the last one), advance the driver under
        ``run.guard``; every ``every`` periods, at the last one and on a guard trip read the
        state, record it, and stop on a guard trip, a driver fault or when ``on_state``
        (called with the state and the number of periods done) returns a ``_Stop``.
        ``tighten_guard_n``: after those checks the guard limit follows the contact force
        down as in ``run`` (the same rule ``on_state`` may apply itself).

        Returns the report of a stop, or None when every command was sent (``run`` then
        holds the last state read). ``total`` is the period count that progress is a
        fraction of (None: progress 1.0).
        """
        driver = self.driver
        send, advance, read = driver.send_command, driver.advance, driver.read_state
        perf = time.perf_counter
        rec = run.rec
        add = rec.add
        add_time, add_q = rec.time_s.append, rec.q.append
        add_force, add_commanded = rec.force_n.append, rec.commanded.append
        peak, physics, io, guard, state = run.peak, run.physics, run.io, run.guard, run.state
        q_sent = run.q_sent if run.q_sent is not None else state.joint_positions_rad
        last = len(commands) - 1
        countdown = every
        k = 0
        try:
            for k, command in enumerate(commands):
                if cancel():
                    driver.hold()
                    state = read()
                    add(state, state.joint_positions_rad)
                    run.update(peak, physics, io, guard, state, q_sent)
                    return run.report(CANCELLED, k / total if total else 1.0, cancel_message)
                t_a = perf()
                if command is not None:
                    send(command)
                    q_sent = command.joint_positions_rad
                t_b = perf()
                report = advance(guard)
                t_c = perf()
                physics += t_c - t_b
                io += t_b - t_a
                if report.peak_contact_force_n > peak:
                    peak = report.peak_contact_force_n
                countdown -= 1
                if countdown and k != last and not report.guard_tripped:
                    continue
                countdown = every
                state = read()
                io += perf() - t_c
                add_time(state.time_s)
                add_q(state.joint_positions_rad)
                add_force(state.contact_force_n)
                add_commanded(q_sent)
                if report.guard_tripped:
                    run.update(peak, physics, io, guard, state, q_sent)
                    progress = (k + 1) / total if total else 1.0
                    return self._tripped(guarded_mode, run, report.guard_tripped_at_s, progress)
                if state.fault:
                    run.update(peak, physics, io, guard, state, q_sent)
                    progress = (k + 1) / total if total else 1.0
                    return run.report(DRIVER_FAULT, progress, f"the driver stopped: {state.fault}")
                if tighten_guard_n is not None and guard is not None:
                    tighter = state.contact_force_n + tighten_guard_n
                    if tighter < guard.max_contact_force_n:
                        guard = replace(guard, max_contact_force_n=tighter)
                if on_state is not None:
                    run.guard = guard
                    stop = on_state(state, k + 1)
                    guard = run.guard
                    if stop is not None:
                        run.update(peak, physics, io, guard, state, q_sent)
                        if stop.hold:
                            driver.hold()
                        if stop.peak_n is not None:
                            run.peak = max(peak, stop.peak_n)
                        progress = 1.0 if stop is _SETTLED else (k + 1) / total if total else 1.0
                        return run.report(stop.reason, progress, stop.message, stop.at_s)
        except BackendError as exc:
            run.update(peak, physics, io, guard, state, q_sent)
            return self._driver_error(exc, run, k / total if total else 1.0)
        run.update(peak, physics, io, guard, state, q_sent)
        return None

    def _driver_error(self, exc: Exception, run: _Run, progress: float) -> ExecutionReport:
        with contextlib.suppress(Exception):
            run.state = self.driver.read_state()
        with contextlib.suppress(Exception):
            self.driver.hold()
        return run.report(DRIVER_FAULT, progress, f"the driver refused: {exc}")

    def _tripped(self, guarded_mode: bool, run: _Run, at_s: float | None, progress: float) -> ExecutionReport:
        peak = run.peak
        limit = run.guard.max_contact_force_n if run.guard is not None else float("nan")
        if guarded_mode and peak <= self.emergency_force_n:
            return run.report(
                CONTACT, progress, f"stopped at first contact (force {peak:.3g} N > guard {limit:.3g} N)", at_s
            )
        return run.report(
            EMERGENCY_LIMIT,
            progress,
            f"stopped on the emergency force limit ({peak:.4g} N > {self.emergency_force_n:.3g} N)"
            if peak > self.emergency_force_n
            else f"stopped on the force limit ({peak:.4g} N > {limit:.3g} N)",
            at_s,
        )
