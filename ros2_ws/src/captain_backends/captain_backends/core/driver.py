"""The one driver interface every robot backend implements.

The harness above this interface never knows which robot it drives. A driver has an
explicit lifecycle, in the spirit of ros2_control's ``SystemInterface``::

    UNCONFIGURED --configure()--> INACTIVE --activate()--> ACTIVE
    ACTIVE --deactivate()--> INACTIVE --shutdown()--> FINALIZED

* INACTIVE: states and cameras are readable, commands are refused.
* ACTIVE: streamed commands (joint position targets and a jaw target) are accepted.

Time is owned by the driver. ``advance()`` moves the world forward by one control
period: simulated drivers step physics synchronously (faster than real time), real
drivers wait for the wall clock. Force guards are checked by the driver at every
physics substep where it can (simulation) and at every state update otherwise.

Faults: ``RobotState.fault`` is non-empty while the driver has stopped commanding
because of a safety condition (stale state or wrench on a real robot, an emergency
force, an unstable simulation). Meanwhile ``send_command()`` raises ``DriverFault`` and
sends nothing, and ``advance()`` either raises ``DriverFault`` or holds the arm where it
is. A simulated driver leaves the fault on ``reset()``; a real one on ``deactivate()``
then ``activate()``, which raises ``DriverFault`` while the condition lasts. A real
driver whose joint state is older than its staleness limit faults by the next
``send_command()`` or ``advance()``. ``captain_backends.testing`` checks all of this.

Frames and units: joint positions in rad, velocities in rad/s, forces in N, torques in
N·m, lengths in m, time in s. Cartesian quantities are in the robot base frame (z up)
unless a name says otherwise (``T_base_camera`` maps camera coordinates to the base
frame; cameras use the OpenCV optical convention: x right, y down, z forward).
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from captain_backends.core.errors import DriverStateError

#: The two camera names of the policy API (fixed by published episodes).
HEAD_CAMERA = "agentview"
WRIST_CAMERA = "robot0_eye_in_hand"


class LifecycleState(enum.Enum):
    """Lifecycle states of a driver (see the module docstring)."""

    UNCONFIGURED = "unconfigured"
    INACTIVE = "inactive"
    ACTIVE = "active"
    FINALIZED = "finalized"


@dataclass(frozen=True)
class RobotDescription:
    """What kinematics, collision checking and the harness need to know about the arm.

    Attributes:
        name: robot model name, e.g. ``"panda"``.
        model_path: URDF or MJCF file describing the arm (the same file the driver's
            simulator or vendor uses, so that Pinocchio's kinematics match it).
        model_format: ``"urdf"`` or ``"mjcf"``.
        srdf_path: SRDF with the disabled self-collision pairs, or None.
        arm_joint_names: the commanded arm joints, in command order.
        base_frame: name of the base body/link in the model; all Cartesian values the
            harness reports are in this frame.
        flange_frame: name of the body/link the tool centre point is attached to.
        T_flange_tcp: 4x4 homogeneous transform from the flange frame to the tool
            centre point (the point midway between the fingertips), metres.
        T_world_base: 4x4 pose of the robot base in the simulator world (identity on
            real robots), metres. Used only by backends and the training side.
        joint_lower_rad / joint_upper_rad: position limits of the arm joints.
        joint_velocity_limit_rad_s: velocity limits of the arm joints.
        gripper_max_opening_m: distance between the fingertips when fully open.
        home_joint_positions_rad: a safe, collision-free joint configuration.
    """

    name: str
    model_path: Path
    model_format: str
    srdf_path: Path | None
    arm_joint_names: tuple[str, ...]
    base_frame: str
    flange_frame: str
    T_flange_tcp: np.ndarray
    T_world_base: np.ndarray
    joint_lower_rad: np.ndarray
    joint_upper_rad: np.ndarray
    joint_velocity_limit_rad_s: np.ndarray
    gripper_max_opening_m: float
    home_joint_positions_rad: np.ndarray


@dataclass(frozen=True)
class RobotState:
    """One reading of the robot, taken at control rate.

    Attributes:
        time_s: driver time (simulated seconds for sim drivers, monotonic wall clock
            for real ones).
        joint_positions_rad / joint_velocities_rad_s: arm joints, command order.
        gripper_opening_m: current distance between the fingertips.
        gripper_open_fraction: the same as a fraction of the maximum opening, 0..1.
        wrench_base: external wrench on the tool expressed in the base frame,
            ``[fx, fy, fz, tx, ty, tz]`` in N and N·m (zeros where not measured).
        contact_force_n: magnitude of the external contact force on the arm and hand,
            N (for sims: summed over the arm's and fingers' contacts with the world;
            for real robots: the norm of the measured force).
        finger_forces_n: normal force on the left and right finger pads, N.
        fault: a non-empty message when the driver has stopped commanding because of
            a safety condition (stale state, emergency force); empty otherwise.
    """

    time_s: float
    joint_positions_rad: np.ndarray
    joint_velocities_rad_s: np.ndarray
    gripper_opening_m: float
    gripper_open_fraction: float
    wrench_base: np.ndarray
    contact_force_n: float
    finger_forces_n: np.ndarray
    fault: str = ""


@dataclass(frozen=True, slots=True)
class JointCommand:
    """A streamed command: arm joint position targets and a jaw target.

    Attributes:
        joint_positions_rad: target positions of the arm joints, command order.
        gripper_target_fraction: target jaw opening as a fraction of the maximum,
            0 (closed, squeezing) .. 1 (open); None keeps the previous jaw target.
    """

    joint_positions_rad: np.ndarray
    gripper_target_fraction: float | None = None


@dataclass(frozen=True)
class ForceGuard:
    """A force limit checked by the driver while it advances time.

    Attributes:
        max_contact_force_n: stop (hold position) as soon as ``contact_force_n``
            exceeds this value at any physics substep / state update.
        ignore_finger_contacts: skip the finger pads' contacts with movable objects (a
            grasped load); the fingers touching fixtures such as the table still count.
    """

    max_contact_force_n: float
    ignore_finger_contacts: bool = False


@dataclass(frozen=True)
class AdvanceReport:
    """What happened during one ``advance()`` call.

    Attributes:
        duration_s: how much driver time passed.
        substeps: physics substeps (sims) or state updates (real) checked.
        peak_contact_force_n: the largest contact force seen during the period, N, as the
            guard counts it (see ``ForceGuard.ignore_finger_contacts``).
        guard_tripped: True when a ForceGuard fired; the driver then commands a hold
            at the current joint positions before returning.
        guard_tripped_at_s: driver time of the substep at which it fired.
    """

    duration_s: float
    substeps: int
    peak_contact_force_n: float
    guard_tripped: bool = False
    guard_tripped_at_s: float | None = None


@dataclass(frozen=True)
class CameraFrame:
    """One RGB-D frame with the calibration captured with it.

    Attributes:
        name: camera name (``"agentview"`` head, ``"robot0_eye_in_hand"`` wrist).
        rgb: HxWx3 uint8, row 0 at the top of the image.
        depth_m: HxW float32 metric depth along the optical axis (z), metres;
            0 or NaN where invalid.
        K: 3x3 pinhole intrinsics in pixels (fx, fy, cx, cy).
        T_base_camera: 4x4 pose of the camera optical frame (OpenCV: x right, y down,
            z forward) in the robot base frame, metres.
        time_s: driver time at capture.
    """

    name: str
    rgb: np.ndarray
    depth_m: np.ndarray
    K: np.ndarray
    T_base_camera: np.ndarray
    time_s: float

    @property
    def size_px(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        return int(self.rgb.shape[1]), int(self.rgb.shape[0])


@dataclass(frozen=True)
class TaskInfo:
    """The task a simulated driver has loaded, as the policy may know it.

    Attributes:
        task_id: e.g. ``"libero_spatial/0"`` or ``"tabletop/pick_cube"``.
        instruction: the natural-language instruction.
        suite: benchmark suite name, or ``""``.
        init_state: the official initial state index, -1 for a random layout.
        goals: human-readable goal predicates, e.g. ``"On(akita_black_bowl_1, plate_1)"``.
        objects: names of the task's movable objects and fixtures.
        extra: backend-specific details (never privileged state).
    """

    task_id: str
    instruction: str
    suite: str = ""
    init_state: int = -1
    goals: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


class RobotDriver(abc.ABC):
    """Base class of every driver. Subclasses implement the ``_on_*`` hooks and the
    abstract read/command methods; the lifecycle bookkeeping lives here.

    Class attributes:
        simulated: True for drivers that step physics themselves.
        control_period_s: the period of one ``advance()``.
        config_type: the driver's typed configuration, a dataclass whose fields are the
            keyword options the constructor accepts (see ``core/config.py``); the
            constructor refuses any other name with the list of valid ones.
        constructor_options: keyword arguments the constructor takes besides the
            configuration's fields (e.g. an injected transport factory, or ``config``
            when it may be a file path).
        task_suites: task suites whose tasks the driver loads, as ``fnmatch`` patterns
            (``"libero_*"``); empty: the suite named like the driver's entry point.
    """

    simulated: bool = False
    control_period_s: float = 0.01
    config_type: ClassVar[type | None] = None
    constructor_options: ClassVar[tuple[str, ...]] = ()
    task_suites: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def config_keys(cls) -> tuple[str, ...]:
        """Every keyword option the constructor accepts: the fields of ``config_type``
        and ``constructor_options`` (a driver that reads its configuration from a file
        given as ``config`` lists ``"config"`` there). Without a ``config_type``, the
        named keyword parameters of ``__init__``."""
        if cls.config_type is not None:
            return tuple(f.name for f in dataclasses.fields(cls.config_type)) + tuple(cls.constructor_options)
        params = inspect.signature(cls.__init__).parameters.values()
        return tuple(p.name for p in params if p.name != "self"
                     and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))

    @classmethod
    def task_options(cls, suite: str, name: str) -> dict[str, Any]:
        """Constructor options that load task ``name`` of ``suite`` (for the task id
        ``"<suite>/<name>"``). Default: ``{"task": name}``; a driver whose task option
        is the whole id overrides this."""
        return {"task": name}

    def __init__(self) -> None:
        self._lifecycle = LifecycleState.UNCONFIGURED

    # ----------------------------------------------------------------- lifecycle
    @property
    def lifecycle_state(self) -> LifecycleState:
        """The current lifecycle state."""
        return self._lifecycle

    def configure(self) -> None:
        """Connect / build the model; afterwards states and cameras are readable."""
        self._require(LifecycleState.UNCONFIGURED, "configure")
        self._on_configure()
        self._lifecycle = LifecycleState.INACTIVE

    def activate(self) -> None:
        """Start accepting commands (the arm holds its current position)."""
        self._require(LifecycleState.INACTIVE, "activate")
        self._on_activate()
        self._lifecycle = LifecycleState.ACTIVE

    def deactivate(self) -> None:
        """Stop accepting commands; the arm is left holding its position."""
        self._require(LifecycleState.ACTIVE, "deactivate")
        self._on_deactivate()
        self._lifecycle = LifecycleState.INACTIVE

    def shutdown(self) -> None:
        """Release every resource. Safe to call in any state, more than once."""
        if self._lifecycle is LifecycleState.FINALIZED:
            return
        if self._lifecycle is LifecycleState.ACTIVE:
            self.deactivate()
        self._on_shutdown()
        self._lifecycle = LifecycleState.FINALIZED

    def __enter__(self) -> RobotDriver:
        if self._lifecycle is LifecycleState.UNCONFIGURED:
            self.configure()
        if self._lifecycle is LifecycleState.INACTIVE:
            self.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _require(self, *allowed: LifecycleState | str) -> None:
        states = tuple(s for s in allowed if isinstance(s, LifecycleState))
        action = next((s for s in allowed if isinstance(s, str)), "this call")
        if self._lifecycle not in states:
            names = " or ".join(s.value for s in states)
            raise DriverStateError(
                f"{type(self).__name__}.{action}() needs state {names}, "
                f"but the driver is {self._lifecycle.value}"
            )

    def _on_configure(self) -> None:  # noqa: B027 - optional hook
        """Hook: connect, load models."""

    def _on_activate(self) -> None:  # noqa: B027 - optional hook
        """Hook: latch the current position as the command."""

    def _on_deactivate(self) -> None:  # noqa: B027 - optional hook
        """Hook: hold position, stop streaming."""

    def _on_shutdown(self) -> None:  # noqa: B027 - optional hook
        """Hook: close connections, free simulators."""

    # ------------------------------------------------------------- description
    @abc.abstractmethod
    def description(self) -> RobotDescription:
        """The arm's kinematic description (readable once configured)."""

    def camera_names(self) -> tuple[str, ...]:
        """Names of the cameras ``capture`` can render."""
        return (HEAD_CAMERA, WRIST_CAMERA)

    # ------------------------------------------------------------------- state
    @abc.abstractmethod
    def read_state(self) -> RobotState:
        """The latest robot state (INACTIVE or ACTIVE)."""

    @abc.abstractmethod
    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, CameraFrame]:
        """RGB-D frames of the named cameras (all when None), 512x512 by default."""

    # ---------------------------------------------------------------- commands
    @abc.abstractmethod
    def send_command(self, command: JointCommand) -> JointCommand:
        """Stream a command (ACTIVE only); returns what was actually sent after
        clipping to joint limits and the driver's rate and step limits."""

    @abc.abstractmethod
    def advance(self, guard: ForceGuard | None = None) -> AdvanceReport:
        """Let one control period pass while the last command is tracked. Allowed while
        INACTIVE too: the arm then holds its position."""

    def hold(self) -> JointCommand:
        """Command the current joint positions (keep the jaw target)."""
        state = self.read_state()
        return self.send_command(JointCommand(np.asarray(state.joint_positions_rad)))


class SimulatedDriver(RobotDriver):
    """A driver that owns a simulator: it can reset tasks and exposes privileged
    state for the host side only (success predicate, training features). Nothing in
    the policy's session may reach these methods."""

    simulated = True

    @abc.abstractmethod
    def reset(self, seed: int | None = None, init_state: int | None = None) -> TaskInfo:
        """Reset the scene (an official initial state when given, else a seeded one)."""

    @abc.abstractmethod
    def task_info(self) -> TaskInfo:
        """The loaded task's public description."""

    @abc.abstractmethod
    def check_success(self) -> bool:
        """The benchmark's own goal predicate on the current state (host success)."""

    @abc.abstractmethod
    def snapshot(self) -> Any:
        """Privileged simulator state (a ``SimSnapshot``) for the host and trainer."""
