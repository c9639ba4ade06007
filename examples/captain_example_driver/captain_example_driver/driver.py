"""``ExampleArmDriver``: a complete CaPtain driver for a three-joint arm (entry point
``example_arm``), written as a vendor driver would be.

The "robot" is ``ControllerBox``, a stand-in for a vendor's controller: it streams a
reading (joint positions and velocities, a force sensor) every ``reading_period_s`` of
wall-clock time and tracks the last position target at the joints' velocity limits.
Between the arm and a table there is a wall at ``wall_rad`` on the shoulder joint:
pressing past it costs ``wall_stiffness_n_per_rad`` newtons per radian. A real driver
would replace the box by its SDK or topics and keep everything else.

What the driver does, as the interface in ``captain_backends.core.driver`` asks:

* lifecycle hooks (``_on_configure`` connects, ``_on_activate`` latches a hold);
* ``send_command`` clips to the joint limits and to one period's travel at the velocity
  limits against the command of the previous period, and returns what it sent;
* ``advance`` waits for the wall clock until the period ends and checks the
  ``ForceGuard`` at every reading; a trip commands a hold at the measured position;
* safety: a reading older than ``stale_state_timeout_s`` or a force above
  ``emergency_force_n`` latches a fault (``RobotState.fault``), after which commands
  raise ``DriverFault`` until ``deactivate()`` and ``activate()`` find fresh readings
  within the limits again.

Frames and units: joints in rad, forces in N, time in s (``time.monotonic``), Cartesian
values in the base frame (z up); cameras in the OpenCV optical convention.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from captain_backends.core.config import DriverConfig, DriverConfigError
from captain_backends.core.driver import (
    HEAD_CAMERA,
    WRIST_CAMERA,
    AdvanceReport,
    CameraFrame,
    ForceGuard,
    JointCommand,
    LifecycleState,
    RobotDescription,
    RobotDriver,
    RobotState,
)
from captain_backends.core.errors import BackendError, CommandError, DriverFault

URDF_PATH = Path(__file__).with_name("example_arm.urdf")
JOINT_NAMES = ("joint1", "joint2", "joint3")
LOWER_RAD = np.array([-2.8, -1.5, -2.5])
UPPER_RAD = np.array([2.8, 1.5, 2.5])
VELOCITY_LIMIT_RAD_S = np.array([2.0, 2.0, 2.5])
HOME_RAD = np.array([0.0, 0.2, 0.5])
MAX_OPENING_M = 0.08


@dataclass(frozen=True)
class ExampleArmConfig(DriverConfig):
    """Options of the example arm (unknown names are refused with this list).

    Attributes:
        control_period_s: one ``advance()``, s.
        reading_period_s: time between two readings of the controller box, s.
        stale_state_timeout_s: a reading older than this latches a fault, s.
        emergency_force_n: a measured force above this latches a fault, N.
        wall_rad: shoulder angle where the arm meets the table, rad.
        wall_stiffness_n_per_rad: force per radian pressed past the wall, N/rad.
        image_width_px / image_height_px: camera size, px.
    """

    control_period_s: float = 0.01
    reading_period_s: float = 0.002
    stale_state_timeout_s: float = 0.1
    emergency_force_n: float = 150.0
    wall_rad: float = 0.9
    wall_stiffness_n_per_rad: float = 2000.0
    image_width_px: int = 64
    image_height_px: int = 48

    def __post_init__(self) -> None:
        if not 0 < self.reading_period_s <= self.control_period_s:
            raise DriverConfigError(
                f"reading_period_s = {self.reading_period_s} s must be in (0, control_period_s = "
                f"{self.control_period_s} s]")
        if self.stale_state_timeout_s <= self.reading_period_s:
            raise DriverConfigError(f"stale_state_timeout_s = {self.stale_state_timeout_s} s must exceed "
                                    f"reading_period_s = {self.reading_period_s} s")


@dataclass(frozen=True)
class Reading:
    """One reading of the controller box (monotonic time, rad, rad/s, N)."""

    time_s: float
    q: np.ndarray
    qd: np.ndarray
    force_n: float


class ControllerBox:
    """The stand-in for the vendor's controller (see the module docstring).

    Attributes a test may change: ``streaming`` (False: no more readings arrive) and
    ``external_force_n`` (a push added to the force sensor, N).
    """

    def __init__(self, config: ExampleArmConfig) -> None:
        self.config = config
        self.streaming = True
        self.external_force_n = 0.0
        self.target = HOME_RAD.copy()
        self.jaw_fraction = 1.0
        self._q = HOME_RAD.copy()
        self._tick_s = time.monotonic()
        self.latest = self._reading(self._tick_s, np.zeros(3))

    def _force(self, q: np.ndarray) -> float:
        press = max(0.0, q[1] - self.config.wall_rad)
        return self.config.wall_stiffness_n_per_rad * press + self.external_force_n

    def _reading(self, t: float, qd: np.ndarray) -> Reading:
        return Reading(t, self._q.copy(), qd, self._force(self._q))

    def poll(self, now_s: float) -> list[Reading]:
        """The readings streamed since the last poll, up to ``now_s`` (oldest first)."""
        dt = self.config.reading_period_s
        out = []
        while self._tick_s + dt <= now_s:
            self._tick_s += dt
            step = np.clip(self.target - self._q, -VELOCITY_LIMIT_RAD_S * dt, VELOCITY_LIMIT_RAD_S * dt)
            if self._q[1] + step[1] > self.config.wall_rad and step[1] > 0:
                step[1] *= 0.2  # the table resists: pressing into it is slow
            self._q = self._q + step
            if self.streaming:
                self.latest = self._reading(self._tick_s, step / dt)
                out.append(self.latest)
        return out


def _rot(axis: str, a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    R = {"z": [[c, -s, 0], [s, c, 0], [0, 0, 1]], "y": [[c, 0, s], [0, 1, 0], [-s, 0, c]]}[axis]
    T = np.eye(4)
    T[:3, :3] = R
    return T


def _trans(x: float, y: float, z: float) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = (x, y, z)
    return T


def T_base_flange(q: np.ndarray) -> np.ndarray:
    """Forward kinematics of ``example_arm.urdf``, metres."""
    return _rot("z", q[0]) @ _trans(0, 0, 0.3) @ _rot("y", q[1]) @ _trans(0.3, 0, 0) @ _rot("y", q[2]) @ _trans(
        0.25, 0, 0)


#: optical frame of the wrist camera on the flange: looking along the flange's x axis
_T_FLANGE_WRIST = np.array([[0, 0, 1, 0.02], [-1, 0, 0, 0], [0, -1, 0, 0], [0, 0, 0, 1]], dtype=float)
#: the head camera, 1.2 m in front of the base, looking back at it
_T_BASE_HEAD = np.array([[0, 0, -1, 1.2], [1, 0, 0, 0], [0, -1, 0, 0.4], [0, 0, 0, 1]], dtype=float)


class ExampleArmDriver(RobotDriver):
    """The example arm (see the module docstring).

    Args:
        config: an ``ExampleArmConfig``; or its options by keyword
            (``stale_state_timeout_s=0.2``, ...).
    """

    simulated = False
    config_type = ExampleArmConfig

    def __init__(self, config: ExampleArmConfig | None = None, **options: Any) -> None:
        super().__init__()
        self.config = ExampleArmConfig.resolve(config, options, driver="example_arm")
        self.control_period_s = self.config.control_period_s
        self.box: ControllerBox | None = None
        self._fault = ""
        self._reference = HOME_RAD.copy()
        self._command = HOME_RAD.copy()
        self._period_end_s = 0.0

    # ------------------------------------------------------------------ lifecycle
    def _on_configure(self) -> None:
        self.box = ControllerBox(self.config)  # a real driver connects to its robot here

    def _on_activate(self) -> None:
        self._fault = ""
        now = time.monotonic()
        self.box.poll(now)
        message = self._safety_message(now)
        if message:
            raise DriverFault(f"cannot activate the example arm: {message}")
        self._latch_hold()
        self._period_end_s = time.monotonic()

    def _on_deactivate(self) -> None:
        if not self._fault:
            self._latch_hold()

    def _on_shutdown(self) -> None:
        self.box = None

    def _latch_hold(self) -> None:
        q = self.box.latest.q.copy()
        self.box.target = q
        self._reference, self._command = q.copy(), q.copy()

    # ---------------------------------------------------------------- description
    def description(self) -> RobotDescription:
        """The arm of ``example_arm.urdf``; the TCP sits 5 cm past the flange."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "description")
        return RobotDescription(
            name="example_arm", model_path=URDF_PATH, model_format="urdf", srdf_path=None,
            arm_joint_names=JOINT_NAMES, base_frame="base", flange_frame="flange",
            T_flange_tcp=_trans(0.05, 0, 0), T_world_base=np.eye(4), joint_lower_rad=LOWER_RAD.copy(),
            joint_upper_rad=UPPER_RAD.copy(), joint_velocity_limit_rad_s=VELOCITY_LIMIT_RAD_S.copy(),
            gripper_max_opening_m=MAX_OPENING_M, home_joint_positions_rad=HOME_RAD.copy())

    # ---------------------------------------------------------------------- safety
    def _safety_message(self, now_s: float) -> str:
        latest = self.box.latest
        age = now_s - latest.time_s
        if age > self.config.stale_state_timeout_s:
            return (f"stale joint state: no reading for {1000 * age:.0f} ms (limit "
                    f"{1000 * self.config.stale_state_timeout_s:.0f} ms); commanding stopped")
        if latest.force_n > self.config.emergency_force_n:
            return f"emergency force: {latest.force_n:.1f} N exceeds {self.config.emergency_force_n:.1f} N"
        return ""

    def _check(self, now_s: float) -> None:
        """Latch a fault when a safety condition holds (ACTIVE only)."""
        if self._fault or self._lifecycle is not LifecycleState.ACTIVE:
            return
        message = self._safety_message(now_s)
        if message:
            self._fault = message
            if message.startswith("emergency"):
                self.box.target = self.box.latest.q.copy()  # one hold, then silence

    def _raise_if_faulted(self) -> None:
        if self._fault:
            raise DriverFault(f"example arm faulted: {self._fault} (deactivate() and activate() to resume)")

    # ----------------------------------------------------------------------- state
    def read_state(self) -> RobotState:
        """The latest reading; never raises for a fault (``fault`` carries it)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "read_state")
        now = time.monotonic()
        self.box.poll(now)
        self._check(now)
        r = self.box.latest
        fraction = self.box.jaw_fraction
        return RobotState(
            time_s=r.time_s, joint_positions_rad=r.q.copy(), joint_velocities_rad_s=r.qd.copy(),
            gripper_opening_m=fraction * MAX_OPENING_M, gripper_open_fraction=fraction,
            wrench_base=np.array([0.0, 0.0, r.force_n, 0.0, 0.0, 0.0]), contact_force_n=r.force_n,
            finger_forces_n=np.zeros(2), fault=self._fault)

    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, CameraFrame]:
        """Synthetic frames: a grey plane 1 m in front of each camera."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "capture")
        names = tuple(names) if names is not None else self.camera_names()
        unknown = [n for n in names if n not in self.camera_names()]
        if unknown:
            raise BackendError(f"unknown camera(s) {', '.join(unknown)}; cameras: {', '.join(self.camera_names())}")
        w, h = self.config.image_width_px, self.config.image_height_px
        f = 0.5 * h / math.tan(math.radians(30.0))
        K = np.array([[f, 0.0, (w - 1) / 2], [0.0, f, (h - 1) / 2], [0.0, 0.0, 1.0]])
        latest = self.box.latest
        frames = {}
        for name in names:
            pose = _T_BASE_HEAD if name == HEAD_CAMERA else T_base_flange(latest.q) @ _T_FLANGE_WRIST
            frames[name] = CameraFrame(name, np.full((h, w, 3), 128, np.uint8), np.ones((h, w), np.float32),
                                       K, pose.copy(), latest.time_s)
        return frames

    def camera_names(self) -> tuple[str, ...]:
        """The head and the wrist camera."""
        return (HEAD_CAMERA, WRIST_CAMERA)

    # -------------------------------------------------------------------- commands
    def send_command(self, command: JointCommand) -> JointCommand:
        """Clip to the joint limits and one period's travel from the previous period's
        command; returns what was sent.

        Raises:
            DriverStateError: unless ACTIVE. DriverFault: when faulted (nothing sent).
            CommandError: a wrong shape or non-finite values.
        """
        self._require(LifecycleState.ACTIVE, "send_command")
        q = np.asarray(command.joint_positions_rad, dtype=float).reshape(-1)
        if q.shape != (3,) or not np.all(np.isfinite(q)):
            raise CommandError(f"joint_positions_rad must be 3 finite values in rad for {', '.join(JOINT_NAMES)}; "
                               f"got {np.asarray(command.joint_positions_rad).tolist()}")
        fraction = command.gripper_target_fraction
        if fraction is not None and not math.isfinite(fraction):
            raise CommandError(f"gripper_target_fraction must be in 0..1 or None; got {fraction}")
        self._check(time.monotonic())
        self._raise_if_faulted()
        step = VELOCITY_LIMIT_RAD_S * self.control_period_s
        q = np.clip(self._reference + np.clip(q - self._reference, -step, step), LOWER_RAD, UPPER_RAD)
        self._command = q
        self.box.target = q.copy()
        if fraction is not None:
            self.box.jaw_fraction = float(np.clip(fraction, 0.0, 1.0))
        return JointCommand(q.copy(), self.box.jaw_fraction)

    def advance(self, guard: ForceGuard | None = None) -> AdvanceReport:
        """Wait for the end of the control period, checking every reading: safety (a
        latched fault raises ``DriverFault``) and the guard (a trip holds the arm at
        the measured position).

        Raises:
            DriverFault: when a safety condition holds now or held before.
        """
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "advance")
        self._raise_if_faulted()
        start = time.monotonic()
        self._period_end_s = max(self._period_end_s + self.control_period_s, start)
        limit = guard.max_contact_force_n if guard is not None else math.inf
        peak, readings, tripped_at = 0.0, 0, None
        while True:
            now = time.monotonic()
            for r in self.box.poll(now):
                readings += 1
                peak = max(peak, r.force_n)
                if tripped_at is None and r.force_n > limit:
                    tripped_at = r.time_s
                    self.box.target = r.q.copy()  # hold where the arm is
                    self._command = r.q.copy()
            self._check(now)
            self._raise_if_faulted()
            if now >= self._period_end_s:
                break
            time.sleep(min(self.config.reading_period_s, self._period_end_s - now))
        self._reference = self._command.copy()
        return AdvanceReport(time.monotonic() - start, max(readings, 1), peak, tripped_at is not None, tripped_at)
