"""The driver conformance kit: pytest checks of a driver against the driver interface.

Subclass ``DriverConformance`` in a test module under a name pytest collects
(``TestMyArm``), name the driver and its options, and override the hooks that apply.
Each check builds its own driver, so one failing check leaves the others meaningful.

Checks (the contract of ``captain_backends.core.driver``):

* ``test_registered_by_entry_point``: the name resolves through the ``captain.drivers``
  entry points to the class ``make_driver`` builds.
* ``test_typed_config_rejects_unknown_options``: the class declares a typed config
  (``config_type``) and an unknown option is refused with every valid one listed.
* ``test_lifecycle_transitions``: UNCONFIGURED -> INACTIVE -> ACTIVE -> INACTIVE ->
  FINALIZED; calls in the wrong state raise ``DriverStateError``; ``shutdown`` is
  idempotent from any state; the context manager activates and shuts down.
* ``test_description_contract``: joint names, limits, home, ``T_flange_tcp``, model file.
* ``test_state_contract``: shapes, finiteness, units and ranges of ``RobotState``,
  readable while INACTIVE and ACTIVE, time never running backwards.
* ``test_camera_contract``: every named camera renders an RGB-D frame with its name,
  uint8 RGB, float32 metric depth of the same size, pinhole ``K``, a rigid
  ``T_base_camera``; subsets and unknown names.
* ``test_commands_refused_unless_active``: ``send_command`` raises ``DriverStateError``
  while INACTIVE; ``advance`` is allowed there and holds.
* ``test_command_clipping``: joint limits, one period's travel at the velocity limits,
  the jaw fraction kept in 0..1, malformed commands refused without effect.
* ``test_holds_without_commands``: after ``activate`` and after ``deactivate`` the arm
  stays where it is.
* ``test_advance_reports``: duration, substeps, peak force, driver time.
* ``test_guard_checked_at_every_substep``: on an approach into contact (``make_contact``
  hook) a ``ForceGuard`` trips in the first period whose peak exceeds it (no period
  reports a peak above the limit without tripping), at a time inside the period (on a
  substep boundary for simulated drivers), and the arm then holds.
* ``test_fault_behaviour``: with a fault induced (``induce_fault`` hook), ``fault`` is
  a message, ``send_command`` raises ``DriverFault``, ``advance`` raises it or holds
  (real drivers; a faulted simulation's physics is not judged), and the documented
  recovery (``reset`` for simulated drivers, ``deactivate`` then ``activate`` for real
  ones) clears it.
* ``test_stale_state_faults`` (real drivers): with the state stream stopped
  (``stop_state_updates`` hook), commanding faults within the staleness limit plus a
  margin, every command is refused, ``activate`` refuses while stale, and the driver
  resumes once states are fresh.

A hook returning ``None`` (or left unimplemented) skips its check with a reason that
names the driver, so the test report says which parts of the contract were exercised.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

from captain_backends.core.driver import (
    AdvanceReport,
    CameraFrame,
    ForceGuard,
    JointCommand,
    LifecycleState,
    RobotDriver,
    RobotState,
    SimulatedDriver,
)
from captain_backends.core.errors import BackendError, DriverFault, DriverStateError
from captain_backends.core.registry import driver_class, make_driver

#: An option name no driver declares.
UNKNOWN_OPTION = "conformance_kit_unknown_option"


def _rigid(T: np.ndarray, what: str) -> None:
    T = np.asarray(T, dtype=float)
    assert T.shape == (4, 4), f"{what} must be 4x4, got {T.shape}"
    assert np.all(np.isfinite(T)), f"{what} has non-finite entries"
    assert np.allclose(T[3], [0.0, 0.0, 0.0, 1.0], atol=1e-9), f"{what}: last row must be 0 0 0 1, got {T[3]}"
    R = T[:3, :3]
    assert np.allclose(R.T @ R, np.eye(3), atol=1e-5), f"{what}: rotation is not orthonormal"
    assert abs(np.linalg.det(R) - 1.0) < 1e-5, f"{what}: rotation is not proper (det {np.linalg.det(R)})"


class DriverConformance:
    """Base class of a driver's conformance tests (see the module docstring).

    Class attributes a subclass sets:
        driver_name: the driver's name in the ``captain.drivers`` entry points.
        driver_options: constructor options used by every check.
        stale_state_timeout_s: the driver's staleness limit with these options, s
            (real drivers; the staleness check allows ``stale_margin_s`` on top).
        stale_margin_s: scheduling margin of the staleness check, s.
        contact_periods: control periods the approach into contact may take.
        hold_tolerance_rad: how far a holding arm may drift over ``hold_periods``.
        hold_periods: control periods of the hold checks.
        braking_limit_rad: how far an arm moving at speed may travel after it is told
            to hold (deactivate, a tripped guard) before it stands still.
        reading_age_limit_s: real drivers: how much older than the state read before an
            ``advance()`` the reading that tripped a guard in it may be, s.
    """

    driver_name: ClassVar[str] = ""
    driver_options: ClassVar[dict[str, Any]] = {}
    stale_state_timeout_s: ClassVar[float | None] = None
    stale_margin_s: ClassVar[float] = 0.5
    contact_periods: ClassVar[int] = 400
    hold_tolerance_rad: ClassVar[float] = 0.01
    hold_periods: ClassVar[int] = 20
    braking_limit_rad: ClassVar[float] = 0.1
    reading_age_limit_s: ClassVar[float] = 0.1

    # ------------------------------------------------------------------- hooks
    def make_driver(self) -> RobotDriver:
        """A new, unconfigured driver (default: the registry with ``driver_options``)."""
        assert self.driver_name, f"{type(self).__name__} must set driver_name (its captain.drivers entry point)"
        return make_driver(self.driver_name, **self.driver_options)

    def make_contact(self, driver: RobotDriver) -> tuple[np.ndarray, float] | None:
        """Prepare contact for the guard check on an ACTIVE driver: return a joint
        target (rad, command order) whose approach presses the arm against something
        and the guard limit (N) it will exceed; None: the driver has no contacts."""
        return None

    def induce_fault(self, driver: RobotDriver) -> bool:
        """Create a safety condition on an ACTIVE driver (the kit then keeps commanding
        and expects a fault within ``fault_periods``); False: the driver has none."""
        return False

    #: control periods within which an induced fault must show
    fault_periods: ClassVar[int] = 50

    def remove_fault_cause(self, driver: RobotDriver) -> None:
        """Undo what ``induce_fault`` did (before the kit recovers the driver)."""

    def stop_state_updates(self, driver: RobotDriver) -> bool:
        """Stop the robot's state stream (real drivers); False: not possible here."""
        return False

    def resume_state_updates(self, driver: RobotDriver) -> None:
        """Restart the state stream stopped by ``stop_state_updates``."""

    def recover(self, driver: RobotDriver, timeout_s: float = 5.0) -> None:
        """The documented recovery from a fault: ``reset()`` for simulated drivers,
        ``deactivate()`` then ``activate()`` for real ones (``activate`` refuses with
        ``DriverFault`` until fresh readings within the limits arrive: retried for up
        to ``timeout_s``)."""
        if isinstance(driver, SimulatedDriver):
            driver.reset()
            return
        if driver.lifecycle_state is LifecycleState.ACTIVE:
            driver.deactivate()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                driver.activate()
                return
            except DriverFault:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    # ---------------------------------------------------------------- fixtures
    @pytest.fixture
    def fresh_driver(self) -> Iterator[RobotDriver]:
        """A constructed, unconfigured driver, shut down afterwards."""
        d = self.make_driver()
        try:
            yield d
        finally:
            d.shutdown()

    @pytest.fixture
    def driver(self, fresh_driver: RobotDriver) -> RobotDriver:
        """A configured and ACTIVE driver."""
        fresh_driver.configure()
        fresh_driver.activate()
        return fresh_driver

    # ---------------------------------------------------------------- helpers
    def _name(self, driver: RobotDriver) -> str:
        return self.driver_name or type(driver).__name__

    @staticmethod
    def _q(driver: RobotDriver) -> np.ndarray:
        return np.asarray(driver.read_state().joint_positions_rad, dtype=float).copy()

    def _hold_drift(self, driver: RobotDriver, guard: ForceGuard | None = None) -> float:
        q0 = self._q(driver)
        for _ in range(self.hold_periods):
            try:
                driver.advance(guard)
            except DriverFault:
                break
        return float(np.max(np.abs(self._q(driver) - q0)))

    # ------------------------------------------------------------------ checks
    def test_registered_by_entry_point(self, fresh_driver: RobotDriver) -> None:
        if not self.driver_name:
            pytest.skip(f"{type(self).__name__} tests a driver built by hand (no driver_name)")
        assert driver_class(self.driver_name) is type(fresh_driver), (
            f"captain.drivers entry point {self.driver_name!r} resolves to {driver_class(self.driver_name)!r}, "
            f"not to the class make_driver built ({type(fresh_driver)!r})")
        assert fresh_driver.lifecycle_state is LifecycleState.UNCONFIGURED

    def test_typed_config_rejects_unknown_options(self, fresh_driver: RobotDriver) -> None:
        cls = type(fresh_driver)
        assert cls.config_type is not None and is_dataclass(cls.config_type), (
            f"{cls.__name__} must declare config_type, a dataclass of its constructor options")
        declared = [f.name for f in fields(cls.config_type)]
        assert set(declared) <= set(cls.config_keys())
        with pytest.raises(BackendError) as info:
            cls(**self.driver_options, **{UNKNOWN_OPTION: 1})
        message = str(info.value)
        assert UNKNOWN_OPTION in message, f"the error does not name the unknown option: {message}"
        missing = [k for k in declared if k not in message]
        assert not missing, f"the error does not list the valid option(s) {missing}: {message}"

    def test_lifecycle_transitions(self, fresh_driver: RobotDriver) -> None:
        d = fresh_driver
        assert d.lifecycle_state is LifecycleState.UNCONFIGURED
        for call in (d.activate, d.deactivate, d.read_state, d.capture, d.advance,
                     lambda: d.send_command(JointCommand(np.zeros(1)))):
            with pytest.raises(DriverStateError):
                call()
        d.configure()
        assert d.lifecycle_state is LifecycleState.INACTIVE
        with pytest.raises(DriverStateError):
            d.configure()
        with pytest.raises(DriverStateError):
            d.deactivate()
        d.activate()
        assert d.lifecycle_state is LifecycleState.ACTIVE
        with pytest.raises(DriverStateError):
            d.activate()
        d.deactivate()
        assert d.lifecycle_state is LifecycleState.INACTIVE
        d.activate()
        d.shutdown()  # from ACTIVE: deactivates first
        assert d.lifecycle_state is LifecycleState.FINALIZED
        d.shutdown()  # idempotent
        for call in (d.read_state, d.configure, d.activate):
            with pytest.raises(DriverStateError):
                call()
        with self.make_driver() as other:
            assert other.lifecycle_state is LifecycleState.ACTIVE
        assert other.lifecycle_state is LifecycleState.FINALIZED
        unused = self.make_driver()
        unused.shutdown()  # never configured
        assert unused.lifecycle_state is LifecycleState.FINALIZED

    def test_description_contract(self, driver: RobotDriver) -> None:
        desc = driver.description()
        n = len(desc.arm_joint_names)
        assert n >= 1 and len(set(desc.arm_joint_names)) == n, "arm joint names must be unique"
        for name in ("joint_lower_rad", "joint_upper_rad", "joint_velocity_limit_rad_s", "home_joint_positions_rad"):
            v = np.asarray(getattr(desc, name), dtype=float)
            assert v.shape == (n,) and np.all(np.isfinite(v)), f"{name} must be {n} finite values, got {v}"
        assert np.all(desc.joint_lower_rad < desc.joint_upper_rad)
        assert np.all(np.asarray(desc.joint_velocity_limit_rad_s) > 0)
        home = np.asarray(desc.home_joint_positions_rad)
        assert np.all((home >= desc.joint_lower_rad) & (home <= desc.joint_upper_rad)), "home outside the limits"
        _rigid(desc.T_flange_tcp, "T_flange_tcp")
        _rigid(desc.T_world_base, "T_world_base")
        assert desc.model_format in ("urdf", "mjcf")
        assert desc.model_path.is_file(), f"model file {desc.model_path} does not exist"
        assert desc.srdf_path is None or desc.srdf_path.is_file()
        assert desc.gripper_max_opening_m > 0 and desc.base_frame and desc.flange_frame
        assert driver.control_period_s > 0

    def _check_state(self, driver: RobotDriver, state: RobotState) -> None:
        desc = driver.description()
        n = len(desc.arm_joint_names)
        q = np.asarray(state.joint_positions_rad)
        v = np.asarray(state.joint_velocities_rad_s)
        assert q.shape == (n,) and np.all(np.isfinite(q)), f"joint_positions_rad: {q}"
        assert v.shape == (n,) and np.all(np.isfinite(v)), f"joint_velocities_rad_s: {v}"
        slack = 0.02  # rad: a tracked arm may overshoot a limit slightly
        assert np.all(q >= desc.joint_lower_rad - slack) and np.all(q <= desc.joint_upper_rad + slack), (
            f"joint positions {q} outside the limits")
        assert np.isfinite(state.time_s)
        assert 0.0 <= state.gripper_open_fraction <= 1.0
        assert 0.0 <= state.gripper_opening_m <= desc.gripper_max_opening_m * 1.05 + 1e-4
        w = np.asarray(state.wrench_base)
        assert w.shape == (6,) and np.all(np.isfinite(w)), f"wrench_base: {w}"
        assert np.isfinite(state.contact_force_n) and state.contact_force_n >= 0.0
        f = np.asarray(state.finger_forces_n)
        assert f.shape == (2,) and np.all(np.isfinite(f)) and np.all(f >= 0.0), f"finger_forces_n: {f}"
        assert isinstance(state.fault, str)

    def test_state_contract(self, fresh_driver: RobotDriver) -> None:
        d = fresh_driver
        d.configure()
        inactive = d.read_state()
        self._check_state(d, inactive)
        assert inactive.fault == "", f"a fresh driver reports a fault: {inactive.fault}"
        d.activate()
        times = [d.read_state().time_s]
        for _ in range(5):
            d.advance()
            state = d.read_state()
            self._check_state(d, state)
            times.append(state.time_s)
        assert all(b >= a for a, b in itertools.pairwise(times)), f"time ran backwards: {times}"
        assert times[-1] > times[0], "time did not advance over five control periods"

    def _check_frame(self, name: str, frame: CameraFrame) -> None:
        assert isinstance(frame, CameraFrame) and frame.name == name
        rgb, depth = np.asarray(frame.rgb), np.asarray(frame.depth_m)
        assert rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.dtype == np.uint8, f"{name}: rgb {rgb.shape} {rgb.dtype}"
        h, w = rgb.shape[:2]
        assert depth.shape == (h, w) and depth.dtype == np.float32, f"{name}: depth {depth.shape} {depth.dtype}"
        valid = np.isfinite(depth) & (depth > 0)
        assert valid.any(), f"{name}: no valid depth pixel"
        assert np.all(depth[np.isfinite(depth)] >= 0), f"{name}: negative depth"
        assert np.nanmax(depth) < 100.0, f"{name}: depth must be in metres (max {np.nanmax(depth)})"
        K = np.asarray(frame.K, dtype=float)
        assert K.shape == (3, 3) and np.allclose(K[2], [0, 0, 1]) and K[0, 1] == 0 and K[1, 0] == 0
        assert K[0, 0] > 0 and K[1, 1] > 0 and 0 <= K[0, 2] <= w and 0 <= K[1, 2] <= h, f"{name}: K {K}"
        _rigid(frame.T_base_camera, f"{name}: T_base_camera")
        assert frame.size_px == (w, h) and np.isfinite(frame.time_s)

    def test_camera_contract(self, driver: RobotDriver) -> None:
        names = tuple(driver.camera_names())
        assert names, "a driver names at least one camera"
        frames = driver.capture()
        assert set(frames) == set(names), f"capture() gave {sorted(frames)}, camera_names() says {sorted(names)}"
        for name, frame in frames.items():
            self._check_frame(name, frame)
        one = driver.capture((names[-1],))
        assert set(one) == {names[-1]}
        with pytest.raises(BackendError) as info:
            driver.capture(("no_such_camera",))
        assert "no_such_camera" in str(info.value) and all(n in str(info.value) for n in names), (
            f"the error must name the unknown camera and list the cameras: {info.value}")

    def test_commands_refused_unless_active(self, fresh_driver: RobotDriver) -> None:
        d = fresh_driver
        d.configure()
        q0 = self._q(d)
        with pytest.raises(DriverStateError):
            d.send_command(JointCommand(q0 + 0.1))
        for _ in range(self.hold_periods):
            d.advance()  # allowed while INACTIVE: the arm holds
        assert np.max(np.abs(self._q(d) - q0)) < self.hold_tolerance_rad
        d.activate()
        d.deactivate()
        with pytest.raises(DriverStateError):
            d.send_command(JointCommand(q0))

    def test_command_clipping(self, driver: RobotDriver) -> None:
        desc = driver.description()
        lower, upper = np.asarray(desc.joint_lower_rad), np.asarray(desc.joint_upper_rad)
        max_step = np.asarray(desc.joint_velocity_limit_rad_s) * driver.control_period_s
        tol = 1e-3
        q0 = self._q(driver)
        # One period's travel at most, toward the target.
        offset = np.where(q0 + 0.3 <= upper, 0.3, -0.3)
        sent = np.asarray(driver.send_command(JointCommand(q0 + offset)).joint_positions_rad)
        assert sent.shape == q0.shape
        assert np.all(np.abs(sent - q0) <= max_step + tol), (
            f"first step {sent - q0} exceeds one period at the velocity limits {max_step}")
        assert np.all(np.sign(sent - q0)[np.abs(sent - q0) > 1e-9] == np.sign(offset)[np.abs(sent - q0) > 1e-9])
        assert np.any(np.abs(sent - q0) > 1e-6), "a command toward a target moved nothing"
        driver.advance()
        # The last joint driven past its upper limit: every sent value within the limit,
        # consecutive ones at most one step apart, and the limit reached in time.
        j = len(q0) - 1
        previous = sent
        target = previous.copy()
        target[j] = upper[j] + 1.0
        # the driver's own step (it may be below the velocity limit) sets the time allowed
        step_j = abs(float(sent[j] - q0[j])) if abs(float(sent[j] - q0[j])) > 1e-6 else float(max_step[j])
        periods = int(np.ceil((upper[j] - previous[j]) / step_j)) + 20
        for _ in range(periods):
            sent = np.asarray(driver.send_command(JointCommand(target)).joint_positions_rad)
            assert np.all(sent >= lower - 1e-9) and np.all(sent <= upper + 1e-9), f"sent {sent} beyond the limits"
            assert np.all(np.abs(sent - previous) <= max_step + tol)
            previous = sent
            driver.advance()
            if sent[j] >= upper[j] - 1e-9:
                break
        assert sent[j] == pytest.approx(upper[j], abs=1e-9), (
            f"joint {j} commanded past its limit {upper[j]} reached only {sent[j]} in {periods} periods")
        # The jaw target stays in 0..1.
        for fraction, expected in ((1.7, 1.0), (-0.5, 0.0)):
            got = driver.send_command(JointCommand(sent, fraction)).gripper_target_fraction
            assert got is None or got == pytest.approx(expected), f"jaw {fraction} -> {got}, expected {expected}"
        # Malformed commands are refused and change nothing.
        state = self._q(driver)
        for bad in (np.append(sent, 0.0), np.full_like(sent, np.nan), sent[:-1]):
            with pytest.raises(BackendError):
                driver.send_command(JointCommand(bad))
        assert driver.lifecycle_state is LifecycleState.ACTIVE
        assert np.max(np.abs(self._q(driver) - state)) < self.hold_tolerance_rad
        driver.send_command(JointCommand(sent))  # still accepted

    def test_holds_without_commands(self, driver: RobotDriver) -> None:
        drift = self._hold_drift(driver)
        assert drift < self.hold_tolerance_rad, f"the arm drifted {drift:.4f} rad without a command after activate()"
        q0 = self._q(driver)
        target = q0 + np.where(q0 + 0.2 <= driver.description().joint_upper_rad, 0.2, -0.2)
        for _ in range(5):
            driver.send_command(JointCommand(target))
            driver.advance()
        driver.deactivate()
        self._brakes_and_holds(driver, None, "deactivate()")

    def _brakes_and_holds(self, driver: RobotDriver, guard: ForceGuard | None, after: str) -> None:
        """A moving arm told to hold brakes within ``braking_limit_rad`` and then stays."""
        q_stop = self._q(driver)
        for _ in range(self.hold_periods):
            try:
                driver.advance(guard)
            except DriverFault:
                break
        braking = float(np.max(np.abs(self._q(driver) - q_stop)))
        assert braking < self.braking_limit_rad, f"the arm travelled {braking:.3f} rad after {after} instead of holding"
        drift = self._hold_drift(driver, guard)
        assert drift < self.hold_tolerance_rad, f"the arm drifted {drift:.4f} rad while holding after {after}"

    def test_advance_reports(self, driver: RobotDriver) -> None:
        period = driver.control_period_s
        calls = 3
        w_first = time.monotonic()
        for _ in range(calls):
            t0 = driver.read_state().time_s
            report = driver.advance(ForceGuard(max_contact_force_n=1e6))
            t1 = driver.read_state().time_s
            assert isinstance(report, AdvanceReport)
            assert report.duration_s == pytest.approx(period, rel=1e-6, abs=1e-9) or not driver.simulated
            # a real driver's period may see no new reading (its sensors run slower)
            assert report.substeps >= (1 if driver.simulated else 0), f"substeps {report.substeps}"
            assert report.peak_contact_force_n >= 0.0
            assert not report.guard_tripped and report.guard_tripped_at_s is None
            if driver.simulated:
                assert t1 - t0 == pytest.approx(report.duration_s, abs=1e-9), "driver time must move by one period"
        if not driver.simulated:
            # paced by the wall clock: one call may return at once when the caller came back
            # after its period had ended (a fixed-rate loop catching up), but the calls
            # together span at least the periods between the first's end and the last's
            assert time.monotonic() - w_first >= (calls - 1) * period, "a real driver waits for the wall clock"

    def test_guard_checked_at_every_substep(self, driver: RobotDriver) -> None:
        contact = self.make_contact(driver)
        if contact is None:
            pytest.skip(f"driver {self._name(driver)!r} declares no contact scenario (make_contact)")
        target, limit_n = contact
        guard = ForceGuard(max_contact_force_n=float(limit_n))
        report = None
        for _ in range(self.contact_periods):
            driver.send_command(JointCommand(np.asarray(target, dtype=float)))
            t_start = driver.read_state().time_s
            report = driver.advance(guard)
            t_after = time.monotonic()
            if report.guard_tripped:
                break
            assert report.peak_contact_force_n <= limit_n, (
                f"a period saw {report.peak_contact_force_n:.2f} N > {limit_n} N without tripping the guard")
        assert report is not None and report.guard_tripped, (
            f"no contact above {limit_n} N within {self.contact_periods} periods")
        assert report.peak_contact_force_n > limit_n
        t = report.guard_tripped_at_s
        assert t is not None, "a tripped guard reports when it tripped"
        if driver.simulated:
            assert t_start < t <= t_start + report.duration_s + 1e-6, (
                f"tripped at {t}, outside the period [{t_start}, {t_start + report.duration_s}]")
        else:  # the stamp of the reading that tripped it, on the monotonic clock
            assert t_start - self.reading_age_limit_s < t <= t_after, (
                f"tripped at {t}, outside [{t_start - self.reading_age_limit_s}, {t_after}] (monotonic clock)")
        if driver.simulated and report.substeps > 1:
            k = (t - t_start) / (report.duration_s / report.substeps)
            assert abs(k - round(k)) < 1e-6 and 1 <= round(k) <= report.substeps, (
                f"trip time {t} is not on a substep boundary (substep {k:.3f} of {report.substeps})")
        self._brakes_and_holds(driver, guard, "the guard tripped")

    def test_fault_behaviour(self, driver: RobotDriver) -> None:
        q_hold = self._q(driver)
        if not self.induce_fault(driver):
            pytest.skip(f"driver {self._name(driver)!r} declares no way to induce a fault (induce_fault)")
        raised = None
        for _ in range(self.fault_periods):
            try:
                driver.send_command(JointCommand(q_hold))
                driver.advance()
            except DriverFault as exc:
                raised = exc
                break
        state = driver.read_state()
        assert state.fault, f"no fault reported within {self.fault_periods} periods (raised: {raised})"
        with pytest.raises(DriverFault):
            driver.send_command(JointCommand(np.asarray(state.joint_positions_rad)))
        q1 = self._q(driver)
        for _ in range(5):
            with contextlib.suppress(DriverFault):
                driver.advance()
        if not driver.simulated:  # a faulted simulation's physics is unreliable until reset()
            assert np.max(np.abs(self._q(driver) - q1)) < self.hold_tolerance_rad, "a faulted driver moved the arm"
        assert driver.read_state().fault, "the fault cleared by itself"
        self.remove_fault_cause(driver)
        self.recover(driver)
        assert driver.read_state().fault == "", f"recovery left the fault: {driver.read_state().fault}"
        q = self._q(driver)
        driver.send_command(JointCommand(q))
        driver.advance()

    def test_stale_state_faults(self, driver: RobotDriver) -> None:
        if driver.simulated:
            pytest.skip(f"driver {self._name(driver)!r} is simulated: it owns its time, its state cannot go stale")
        limit_s = self.stale_state_timeout_s
        assert limit_s is not None, f"{type(self).__name__} must set stale_state_timeout_s for a real driver"
        q = self._q(driver)
        if not self.stop_state_updates(driver):
            pytest.skip(f"driver {self._name(driver)!r} declares no way to stop its state stream here")
        try:
            t_stop = time.monotonic()
            deadline = t_stop + limit_s + self.stale_margin_s
            faulted = False
            while time.monotonic() < deadline:
                try:
                    driver.send_command(JointCommand(q))
                    driver.advance()
                except DriverFault:
                    faulted = True
                    break
            elapsed = time.monotonic() - t_stop
            assert faulted, f"still commanding {elapsed:.3f} s after the state stream stopped (limit {limit_s} s)"
            assert driver.read_state().fault, "a stale driver must report the fault in RobotState.fault"
            for _ in range(3):
                with pytest.raises(DriverFault):
                    driver.send_command(JointCommand(q))
                with pytest.raises(DriverFault):
                    driver.advance()
            driver.deactivate()
            with pytest.raises(DriverFault):
                driver.activate()  # refused while the state is stale
            assert driver.lifecycle_state is LifecycleState.INACTIVE
        finally:
            self.resume_state_updates(driver)
        self.recover(driver)
        assert driver.read_state().fault == ""
        driver.send_command(JointCommand(q))
        driver.advance()


def conformance_checks() -> list[str]:
    """Names of the checks ``DriverConformance`` runs (for reports and docs)."""
    return sorted(name for name in vars(DriverConformance) if name.startswith("test_"))
