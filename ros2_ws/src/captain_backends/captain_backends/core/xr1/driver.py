"""The XR1 real-robot driver (registered as ``"xr1"``) over ros2_control's topics.

Inputs: sensor_msgs/JointState (joint_state_broadcaster), geometry_msgs/WrenchStamped
(force_torque_sensor_broadcaster), sensor_msgs/Image + CameraInfo per camera (colour
and registered depth). Outputs: position targets as std_msgs/Float64MultiArray to a
forward position controller, or as a one-point trajectory_msgs/JointTrajectory; the
gripper through its own Float64MultiArray controller. Everything is configured by
``config/xr1.yaml`` (see ``config.py`` for the schema).

Time follows the wall clock: ``advance()`` waits until the end of the current control
period (``time.monotonic``), checking every joint state and F/T reading that arrives
meanwhile.

Safety (``safety.py``):

* commands are clipped to the joint limits and step-limited per period
  (``min(max_step_rad, velocity_scale * velocity_limit * period)``);
* the staleness watchdog is armed while commands stream (from a ``send_command`` until
  a control period passes without one), as ros2_control's controllers judge their
  inputs only while they run: stale joint state (an arm joint not updated for
  ``stale_state_timeout_s``) or a stale F/T reading then latches a fault. While the arm
  is idle (active but not commanded, or inactive) staleness is a warning
  (``watchdog_warning``), never a latched fault. The first command of a stream waits
  (at most the staleness limit) for readings received from then on, and faults when
  none come. A force/torque beyond the emergency limits latches a fault
  whenever the driver is active. After a fault the driver stops publishing commands
  (after an emergency force it first commands one hold at the measured positions; after
  stale state nothing more, the controller keeps its last command, which is within one
  step of the arm), ``RobotState.fault`` carries the message, and ``advance()`` /
  ``send_command()`` raise ``DriverFault``. ``deactivate()`` then ``activate()`` (the
  harness's ``recover_driver`` service, over ROS) clears the fault once the readings are
  fresh and within limits again;
* a ``ForceGuard`` is checked against every F/T reading; when it trips, the driver
  commands a hold at the measured positions and returns at once. A wrist F/T sensor
  cannot separate finger contacts from others, so ``ignore_finger_contacts`` cannot be
  honoured: the guard always sees the full measured force (the conservative choice).

Frames: joint values in rad, wrench and camera poses in the robot base frame
(``description().base_frame``); camera poses come from the configuration (static in the
base frame, or attached to a model link and moved by forward kinematics), since tf2 is
not available.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from captain_backends.core.driver import (
    AdvanceReport,
    CameraFrame,
    ForceGuard,
    JointCommand,
    LifecycleState,
    RobotDescription,
    RobotDriver,
    RobotState,
)
from captain_backends.core.errors import BackendError, DriverFault
from captain_backends.core.xr1.config import XR1Config, load_config
from captain_backends.core.xr1.description import XR1Model, build_model
from captain_backends.core.xr1.errors import CameraUnavailableError, XR1ConnectionError
from captain_backends.core.xr1.gripper import GripperMap
from captain_backends.core.xr1.images import decode_depth_m, decode_rgb
from captain_backends.core.xr1.kinematics import transform_from_xyz_rpy
from captain_backends.core.xr1.safety import (
    CommandLimiter,
    emergency_wrench_fault,
    stale_state_fault,
    stale_wrench_fault,
)
from captain_backends.core.xr1.state_buffer import StateBuffer, WrenchReading
from captain_backends.core.xr1.transport import TransportFactory, XR1Transport, default_transport_factory


class XR1Driver(RobotDriver):
    """The XR1 arm over ROS 2 topics (see the module docstring).

    Args:
        config: a YAML path, a mapping, an ``XR1Config``, or None for the packaged
            ``config/xr1.yaml``.
        transport_factory: builds the transport from the configuration (default: the
            ROS 2 transport with its own context, node and executor thread).
        cache_dir: where the stand-in arm's generated model files go.
        overrides: top-level configuration keys, e.g. ``namespace="xr1"``.
    """

    simulated = False
    config_type = XR1Config
    constructor_options = ("config", "transport_factory", "cache_dir")

    def __init__(self, config: XR1Config | Mapping[str, Any] | str | Path | None = None, *,
                 transport_factory: TransportFactory | None = None, cache_dir: str | Path | None = None,
                 **overrides: Any) -> None:
        super().__init__()
        self.config = load_config(config, **overrides)
        self.control_period_s = self.config.control_period_s
        self._transport_factory = transport_factory or default_transport_factory
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        arm = self.config.arm
        self._arm_names = tuple(arm.joint_names)
        g = self.config.gripper
        self._gripper_names = tuple(g.joint_names) if g is not None else ()
        self._gripper = GripperMap(g.closed_positions, g.open_positions, g.max_opening_m) if g is not None else None
        self._limiter = CommandLimiter(arm.lower_rad, arm.upper_rad, arm.velocity_limit_rad_s,
                                       self.control_period_s, arm.max_step_rad, arm.velocity_scale)
        self._model: XR1Model | None = None
        self._transport: XR1Transport | None = None
        self._buffer: StateBuffer | None = None
        self._fault = ""
        self._gripper_fraction: float | None = None
        self._period_end_s = 0.0
        self._commands_published = 0
        #: the staleness watchdog is armed while commands stream (see the module docstring)
        self._armed = False
        self._commanded_this_period = False

    # ------------------------------------------------------------------ lifecycle
    def _on_configure(self) -> None:
        self._model = build_model(self.config, self._cache_dir)
        self._camera_parent = {
            c.name: (self._model.kinematics.frame_id(c.parent_frame) if c.parent_frame else None,
                     transform_from_xyz_rpy(c.xyz_m, c.rpy_rad))
            for c in self.config.cameras}
        self._wrench_frame_id = (self._model.kinematics.frame_id(self.config.wrench.frame)
                                 if self.config.wrench.frame else None)
        self._buffer = StateBuffer(self._arm_names + self._gripper_names)
        transport = self._transport_factory(self.config)
        transport.start(self._buffer)
        self._transport = transport
        try:
            self._wait_for_first_state()
        except BaseException:
            self._transport = None
            transport.stop()
            raise

    def _wait_for_first_state(self) -> None:
        timeout_s = self.config.safety.first_state_timeout_s
        deadline = time.monotonic() + timeout_s
        needed = self._arm_names + self._gripper_names
        while True:
            _, _, times = self._buffer.joints(needed)
            missing = [n for n, t in zip(needed, times, strict=True) if t is None]
            wrench_missing = bool(self.config.wrench.topic) and self._buffer.latest_wrench() is None
            if not missing and not wrench_missing:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                what = (f"joint state of {', '.join(missing)}" if missing else
                        f"a wrench on {self.config.wrench.topic!r}")
                raise XR1ConnectionError(
                    f"no {what} within {timeout_s:.1f} s ({self._transport.where()}); start the robot's "
                    "ros2_control bringup (or xr1_fake_hardware / xr1_twin) with the same ROS_DOMAIN_ID "
                    "and namespace, and check the joint names in the configuration")
            self._buffer.wait(min(remaining, 0.05))

    def _on_activate(self) -> None:
        self._wait_for_controller()
        self._fault = ""
        message = self._safety_message(time.monotonic())
        if message:
            self._fault = message
            raise DriverFault(f"cannot activate the XR1 driver: {message}")
        q, _, _ = self._buffer.joints(self._arm_names)
        self._limiter.reset(q)
        self._buffer.drain_wrenches()
        self._gripper_fraction = None
        self._armed = self._commanded_this_period = False
        self._period_end_s = time.monotonic() + self.control_period_s

    def _wait_for_controller(self) -> None:
        """Commands must reach a controller: wait (bounded) for a matched subscription."""
        timeout_s = self.config.safety.controller_timeout_s
        deadline = time.monotonic() + timeout_s
        while self._transport.command_subscriber_count() < 1:
            if time.monotonic() >= deadline:
                c = self.config.command
                topic = c.forward_position_topic if c.interface == "forward_position" else c.joint_trajectory_topic
                raise XR1ConnectionError(
                    f"nothing subscribes to the command topic {topic!r} after {timeout_s:.1f} s "
                    f"({self._transport.where()}); load and activate the {c.interface} controller")
            time.sleep(0.01)

    def command_subscriber_count(self) -> int:
        """Subscriptions the arm command publisher has matched (0 before configure)."""
        return self._transport.command_subscriber_count() if self._transport is not None else 0

    def _on_deactivate(self) -> None:
        """Streaming stops; the position controller keeps the last command (a hold)."""
        self._armed = self._commanded_this_period = False

    def _on_shutdown(self) -> None:
        if self._transport is not None:
            self._transport.stop()
            self._transport = None

    # ---------------------------------------------------------------- description
    def description(self) -> RobotDescription:
        """The configured arm (the stand-in Panda unless a vendor model is configured)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "description")
        return self._model.description

    @property
    def is_stand_in(self) -> bool:
        """True while the description is the stand-in arm, not a vendor model."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "is_stand_in")
        return self._model.is_stand_in

    def camera_names(self) -> tuple[str, ...]:
        """The configured cameras."""
        return self.config.camera_names

    @property
    def commands_published(self) -> int:
        """Arm commands published since configure (for diagnostics)."""
        return self._commands_published

    # ------------------------------------------------------------------- safety
    def _staleness_message(self, now_s: float) -> str:
        """Stale joint state or F/T reading now, or ``""``."""
        s = self.config.safety
        _, _, times = self._buffer.joints(self._arm_names)
        message = stale_state_fault(self._arm_names, times, now_s, s.stale_state_timeout_s)
        if message or not self.config.wrench.topic:
            return message
        w = self._buffer.latest_wrench()
        return stale_wrench_fault(None if w is None else w.time_s, now_s, s.stale_wrench_timeout_s)

    def _timing_note(self) -> str:
        """Where the newest joint state was delayed: at the robot, on the link or here."""
        timing = self._buffer.joint_state_timing()
        if timing is None:
            return ""
        now = time.monotonic()
        sent = "" if timing.sent_s is None else f"sent {1000 * (now - timing.sent_s):.0f} ms ago, "
        return (f" (newest joint_states message: {sent}received {1000 * (now - timing.received_s):.0f} ms ago, "
                f"stored {1000 * (now - timing.stored_s):.0f} ms ago)")

    def _emergency_message(self) -> str:
        """The latest F/T reading beyond the emergency limits, or ``""``."""
        s = self.config.safety
        w = self._buffer.latest_wrench() if self.config.wrench.topic else None
        if w is None:
            return ""
        return emergency_wrench_fault(w.force_n, w.torque_nm, s.emergency_force_n, s.emergency_torque_nm)

    def _safety_message(self, now_s: float) -> str:
        """The first failing safety condition now (staleness, then emergency), or ``""``."""
        return self._staleness_message(now_s) or self._emergency_message()

    @property
    def watchdog_armed(self) -> bool:
        """True while commands stream (the staleness watchdog latches faults)."""
        return self._armed and self._lifecycle is LifecycleState.ACTIVE

    @property
    def watchdog_warning(self) -> str:
        """Staleness seen while the watchdog is not armed (idle or inactive), as a warning
        for diagnostics; ``""`` when the readings are fresh or before configure."""
        if self._buffer is None or self.watchdog_armed:
            return ""
        message = self._staleness_message(time.monotonic())
        return message.replace("; commanding stopped", " (arm idle: a command now would fault)") if message else ""

    def _latch_fault(self, message: str, *, hold: bool) -> None:
        if self._fault:
            return
        self._fault = message
        if hold and self._lifecycle is LifecycleState.ACTIVE and self._transport is not None:
            q, _, _ = self._buffer.joints(self._arm_names)
            if np.all(np.isfinite(q)):
                self._publish_arm(self._limiter.hold(q))

    def _check(self, now_s: float) -> None:
        """Latch a fault when a safety condition fails (only while ACTIVE): the emergency
        limits always, staleness only while the watchdog is armed.

        Before a staleness verdict the transport stores every reading the middleware has
        already received (``drain``), each stamped with its reception time: the verdict is
        about the robot and the link, not about this process's scheduling of its receive
        thread. Nothing is published while the drain waits (this is the commanding
        thread), and a reading older than the limit stays older than the limit.
        """
        if self._fault or self._lifecycle is not LifecycleState.ACTIVE:
            return
        message = self._staleness_message(now_s) if self._armed else ""
        if message and self._transport.drain(self.config.safety.stale_state_timeout_s):
            message = self._staleness_message(time.monotonic())
        if message:
            if message.startswith("stale joint state"):
                message += self._timing_note()
            self._latch_fault(message, hold=False)
            return
        message = self._emergency_message()
        if message:
            self._latch_fault(message, hold=True)

    def _raise_if_faulted(self) -> None:
        if self._fault:
            raise DriverFault(f"XR1 driver faulted: {self._fault} (recover it: the harness's recover_driver service, "
                              "or deactivate() then activate())")

    # --------------------------------------------------------------------- state
    def _wrench_base(self, w: WrenchReading | None, q: np.ndarray) -> np.ndarray:
        if w is None:
            return np.zeros(6)
        force, torque = w.force_n, w.torque_nm
        if self._wrench_frame_id is not None and np.all(np.isfinite(q)):
            R = self._model.kinematics.T_base_frames(q, [self._wrench_frame_id])[0][:3, :3]
            force, torque = R @ force, R @ torque
        return np.concatenate([force, torque])

    def read_state(self) -> RobotState:
        """The latest joint state, jaw opening and wrench (base frame); ``time_s`` is
        the monotonic wall clock. Never raises for a fault: ``fault`` carries it."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "read_state")
        now = time.monotonic()
        self._check(now)
        q, v, _ = self._buffer.joints(self._arm_names)
        opening_m, fraction = 0.0, 0.0
        if self._gripper is not None:
            gq, _, _ = self._buffer.joints(self._gripper_names)
            if np.all(np.isfinite(gq)):
                fraction = self._gripper.fraction(gq)
                opening_m = fraction * self._gripper.max_opening_m
        wrench = self._wrench_base(self._buffer.latest_wrench(), q)
        # inactive: the emergency condition is reported (activation would refuse it);
        # staleness of an idle arm is a warning only (``watchdog_warning``)
        fault = self._fault or ("" if self._lifecycle is LifecycleState.ACTIVE else self._emergency_message())
        return RobotState(
            time_s=now,
            joint_positions_rad=q,
            joint_velocities_rad_s=v,
            gripper_opening_m=opening_m,
            gripper_open_fraction=fraction,
            wrench_base=wrench,
            contact_force_n=float(np.linalg.norm(wrench[:3])),
            finger_forces_n=np.zeros(2),
            fault=fault,
        )

    # ---------------------------------------------------------------- commanding
    def _publish_arm(self, q: np.ndarray) -> None:
        self._transport.publish_arm(q, self.config.command.trajectory_time_from_start_s or self.control_period_s)
        self._commands_published += 1

    def send_command(self, command: JointCommand) -> JointCommand:
        """Clip to the joint limits, step-limit against the previous period's command and
        publish; returns what was sent.

        Raises:
            DriverStateError: unless ACTIVE.
            DriverFault: when faulted (nothing is published).
            BackendError: for a wrong shape or non-finite values.
        """
        self._require(LifecycleState.ACTIVE, "send_command")
        n = len(self._arm_names)
        q = np.asarray(command.joint_positions_rad, dtype=float).reshape(-1)
        if q.shape != (n,) or not np.all(np.isfinite(q)):
            raise BackendError(f"joint_positions_rad must be {n} finite values in rad (order "
                               f"{', '.join(self._arm_names)}); got {np.asarray(command.joint_positions_rad).tolist()}")
        fraction = command.gripper_target_fraction
        if fraction is not None and not np.isfinite(fraction):
            raise BackendError(f"gripper_target_fraction must be in 0..1 or None; got {fraction}")
        if not self._armed:
            self._await_fresh_state()
        self._armed = self._commanded_this_period = True  # streaming: the watchdog judges the readings
        self._check(time.monotonic())
        self._raise_if_faulted()
        sent = self._limiter.limit(q)
        self._publish_arm(sent)
        if fraction is not None and self._gripper is not None:
            self._gripper_fraction = float(np.clip(fraction, 0.0, 1.0))
            self._transport.publish_gripper(self._gripper.positions(self._gripper_fraction))
        return JointCommand(sent, self._gripper_fraction)

    def _await_fresh_state(self) -> None:
        """A command stream starts: wait, at most the staleness limit, until every arm joint
        has a reading received from now on.

        The readings are judged when the stream starts, not as they were left while this
        process did other work: the planning before a motion holds the interpreter, and
        readings that already arrived may not have been stored yet. Nothing is relaxed:
        when no fresh reading comes within ``stale_state_timeout_s``, the newest one is
        older than the limit and the check that follows latches the fault.
        """
        start = time.monotonic()
        deadline = start + self.config.safety.stale_state_timeout_s
        seen = self._buffer.update_count
        while True:
            _, _, times = self._buffer.joints(self._arm_names)
            if all(t is not None and t >= start for t in times):
                return
            now = time.monotonic()
            if now >= deadline:
                return
            seen = self._buffer.wait(deadline - now, seen)

    def advance(self, guard: ForceGuard | None = None) -> AdvanceReport:
        """Wait (wall clock) until the end of the current control period, checking every
        joint state and F/T reading that arrives. Returns early with ``guard_tripped``
        after commanding a hold when the guard fires.

        Raises:
            DriverStateError: unless INACTIVE or ACTIVE.
            DriverFault: when a safety condition failed (now or before).
        """
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "advance")
        start = time.monotonic()
        if self._lifecycle is LifecycleState.INACTIVE:
            time.sleep(self.control_period_s)
            return AdvanceReport(time.monotonic() - start, 0, 0.0)
        self._raise_if_faulted()
        if self._period_end_s < start - self.control_period_s:
            self._period_end_s = start  # fell behind by more than a period: re-phase
        end = self._period_end_s
        self._period_end_s = end + self.control_period_s
        limit = guard.max_contact_force_n if guard is not None else np.inf
        safety = self.config.safety
        stale_timeout = safety.stale_state_timeout_s
        peak, substeps, seen = 0.0, 0, self._buffer.update_count
        tripped_at: float | None = None
        while True:
            now = time.monotonic()
            for w in self._buffer.drain_wrenches():
                substeps += 1
                force = float(np.linalg.norm(w.force_n))
                peak = max(peak, force)
                emergency = emergency_wrench_fault(w.force_n, w.torque_nm, safety.emergency_force_n,
                                                   safety.emergency_torque_nm)
                if emergency:
                    self._latch_fault(emergency, hold=True)
                if tripped_at is None and force > limit:
                    tripped_at = w.time_s
            self._check(now)
            if self._fault:
                self._limiter.next_period()
                self._raise_if_faulted()
            if tripped_at is not None:
                q, _, _ = self._buffer.joints(self._arm_names)
                self._publish_arm(self._limiter.hold(q))
                return AdvanceReport(time.monotonic() - start, substeps, peak, True, tripped_at)
            if now >= end:
                break
            _, _, times = self._buffer.joints(self._arm_names)
            oldest = min(times)  # all received since configure
            wake = min(end, oldest + stale_timeout + 1e-3)
            seen = self._buffer.wait(max(0.0, wake - now), seen)
        self._limiter.next_period()
        # a period without a command ends the stream: the watchdog disarms until the next one
        self._armed, self._commanded_this_period = self._commanded_this_period, False
        return AdvanceReport(time.monotonic() - start, substeps, peak)

    # ------------------------------------------------------------------- cameras
    def _T_base_camera(self, name: str, q: np.ndarray) -> np.ndarray:
        parent, T_parent_camera = self._camera_parent[name]
        if parent is None:
            return T_parent_camera.copy()
        return self._model.kinematics.T_base_frames(q, [parent])[0] @ T_parent_camera

    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, CameraFrame]:
        """The latest RGB-D frame of each named camera (all configured when None),
        waiting up to ``safety.camera_timeout_s`` for a fresh one.

        ``T_base_camera`` is the configured static pose, or for a camera on a link the
        link's pose at the joint positions measured when the colour image arrived.

        Raises:
            CameraUnavailableError: unknown camera, or no fresh colour + depth +
                camera_info within the timeout, or inconsistent sizes.
        """
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "capture")
        names = tuple(names) if names is not None else self.camera_names()
        unknown = [n for n in names if n not in self._camera_parent]
        if unknown:
            raise CameraUnavailableError(f"unknown camera(s) {unknown}; cameras: {', '.join(self.camera_names())}")
        return {name: self._capture_one(name) for name in names}

    def _capture_one(self, name: str) -> CameraFrame:
        s = self.config.safety
        deadline = time.monotonic() + s.camera_timeout_s
        while True:
            now = time.monotonic()
            r = self._buffer.camera(name)
            fresh = all(t is not None and now - t <= s.camera_max_age_s
                        for t in (r.rgb_time_s, r.depth_time_s, r.info_time_s))
            if fresh:
                break
            if now >= deadline:
                cam = self.config.camera(name)
                missing = [topic for topic, t in ((cam.image_topic, r.rgb_time_s), (cam.depth_topic, r.depth_time_s),
                                                  (cam.camera_info_topic, r.info_time_s))
                           if t is None or now - t > s.camera_max_age_s]
                raise CameraUnavailableError(
                    f"camera {name!r}: nothing fresh (< {s.camera_max_age_s} s old) within {s.camera_timeout_s} s "
                    f"on {', '.join(missing)} ({self._transport.where()})")
            self._buffer.wait_for_camera(min(0.05, deadline - now))
        rgb = decode_rgb(r.rgb)
        depth = decode_depth_m(r.depth)
        if depth.shape != rgb.shape[:2] or r.info_size_px != (rgb.shape[1], rgb.shape[0]):
            raise CameraUnavailableError(
                f"camera {name!r}: colour {rgb.shape[1]}x{rgb.shape[0]}, depth {depth.shape[1]}x{depth.shape[0]}, "
                f"camera_info {r.info_size_px}; depth must be registered to the colour image (same size)")
        q, _, _ = self._buffer.joints(self._arm_names)
        return CameraFrame(name=name, rgb=rgb, depth_m=depth, K=r.K.copy(), T_base_camera=self._T_base_camera(name, q),
                           time_s=float(r.rgb_time_s))
