"""The native MuJoCo tabletop driver (registered as ``"tabletop"``).

robosuite's Panda with its Panda gripper (the arm LIBERO uses) on a pedestal at a
table with three cubes and a plate (see ``scene.py``). Physics runs at 1 kHz; one
``advance()`` is one 10 ms control period = 10 substeps, stepped synchronously (as
fast as the CPU allows). At each substep:

1. ``mj_step1`` (kinematics, contacts, mass matrix, bias forces),
2. the joint target, linearly interpolated from the previous period's target to the
   latest command, with the command's velocity as feed-forward, is tracked by the
   computed-torque controller (``controller.py``); the jaw target goes to the two
   finger position actuators,
3. ``mj_step2`` (constraint forces, integration),
4. the robot-world contact force (``contacts.py``, ``mj_contactForce``) is read and
   the ``ForceGuard`` checked; on a trip the arm target becomes the joint positions of
   that substep (held for the rest of the period and afterwards, until a new command).

After the substeps, body, site and camera poses are brought up to the final joint
positions, so state, snapshot and images describe the same instant.

Readings: ``contact_force_n`` is the sum of the force magnitudes of all robot-world
contacts; ``finger_forces_n`` the summed normal force of each finger's contacts with
the world; ``wrench_base`` the net contact force on the hand and fingers and its
torque about the TCP. ``ForceGuard.ignore_finger_contacts`` skips the fingers'
contacts with movable objects (a grasped object's squeeze) but still counts fingers
touching fixtures such as the table.

Frames: ``RobotState``, ``CameraFrame.T_base_camera`` and the description are in the
robot base frame (``robot0_base``, ``T_world_base`` is a translation); ``SimSnapshot``
is in the world frame.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np

from captain_backends.core.config import DriverConfig
from captain_backends.core.driver import (
    HEAD_CAMERA,
    WRIST_CAMERA,
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
from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot
from captain_backends.core.tabletop import panda_model as pm
from captain_backends.core.tabletop.contacts import ContactReader, ContactSummary
from captain_backends.core.tabletop.controller import (
    PANDA_ACCELERATION_LIMIT_RAD_S2,
    JointTorqueController,
)
from captain_backends.core.tabletop.rendering import (
    RgbdRenderer,
    camera_pose_world,
    intrinsics_from_fovy,
)
from captain_backends.core.tabletop.scene import (
    IMAGE_SIZE_PX,
    OBJECTS,
    TABLE_BODY,
    TABLE_TOP_Z_M,
    TIMESTEP_S,
    T_world_base,
    build_scene_mjcf,
)
from captain_backends.core.tabletop.tasks import (
    LIFT_HEIGHT_M,
    get_task,
    object_by_name,
    on_support,
    sample_layout,
)

#: Seed stream for ``reset(init_state=k)`` layouts (kept apart from plain seeds).
_INIT_STATE_STREAM = 0x7AB1E
_FINGER_OPEN_M = 0.04


@dataclass(frozen=True)
class TabletopConfig(DriverConfig):
    """Options of the tabletop driver.

    Attributes:
        task: ``"cube_on_plate"`` (default), ``"stack_cubes"`` or ``"pick_cube"``.
        seed: layout seed used by ``configure()``'s first reset (None: random).
        image_size_px: square camera image size (512 by default), px.
        cache_dir: folder for the generated robot MJCF/SRDF (default
            ``$CAPTAIN_CACHE_DIR`` or ``~/.cache/captain``).
        settle_s: simulated time objects settle after a reset (arm holding home), s.
        controller_omega_rad_s: joint tracking bandwidth (natural frequency), rad/s.
        acceleration_scale: multiple of the Panda's datasheet joint accelerations the
            controller may command.
    """

    task: str = "cube_on_plate"
    seed: int | None = 0
    image_size_px: int = IMAGE_SIZE_PX
    cache_dir: str | Path | None = None
    settle_s: float = 0.1
    controller_omega_rad_s: float = 60.0
    acceleration_scale: float = 2.0


class TabletopDriver(SimulatedDriver):
    """MuJoCo tabletop with robosuite's Panda.

    Args:
        config: a ``TabletopConfig``; or its options by keyword (``task="pick_cube"``,
            ``seed=3``, ``image_size_px=64``, ...). Unknown names are refused with the
            valid ones.
    """

    control_period_s = 0.01
    substeps = round(0.01 / TIMESTEP_S)
    config_type = TabletopConfig

    def __init__(self, config: TabletopConfig | None = None, **options: Any) -> None:
        super().__init__()
        self.config = c = TabletopConfig.resolve(config, options, driver="tabletop")
        self.task = get_task(c.task)
        self._seed = c.seed
        self._image_size_px = int(c.image_size_px)
        self._cache_dir = Path(c.cache_dir) if c.cache_dir is not None else None
        self._settle_steps = round(c.settle_s / TIMESTEP_S)
        self._omega = float(c.controller_omega_rad_s)
        self._acceleration_scale = float(c.acceleration_scale)
        self._lock = threading.RLock()
        self._renderer: RgbdRenderer | None = None
        self._model: mujoco.MjModel | None = None
        self._data: mujoco.MjData | None = None
        self._fault = ""
        self._init_state = -1

    # ------------------------------------------------------------------ lifecycle
    def _on_configure(self) -> None:
        files = pm.panda_model_files(self._cache_dir)
        self._files = files
        self._T_world_base = T_world_base()
        self._T_base_world = np.linalg.inv(self._T_world_base)
        self._description = replace(files.description, T_world_base=self._T_world_base.copy())
        self.scene_xml = build_scene_mjcf(files.mjcf_text, OBJECTS, self._image_size_px)
        model = mujoco.MjModel.from_xml_string(self.scene_xml)
        self._model, self._data = model, mujoco.MjData(model)
        self._index_model(model)
        self._reset(seed=self._seed, init_state=None)

    def _index_model(self, model: mujoco.MjModel) -> None:
        joint = [model.joint(n) for n in pm.ARM_JOINT_NAMES]
        self._arm_qpos = np.array([j.qposadr[0] for j in joint])
        self._arm_dof = np.array([j.dofadr[0] for j in joint])
        fingers = [model.joint(n) for n in pm.FINGER_JOINT_NAMES]
        self._finger_qpos = np.array([j.qposadr[0] for j in fingers])
        self._finger_act = np.array([model.actuator(n).id for n in pm.FINGER_ACTUATOR_NAMES])
        arm_act = np.array([model.actuator(n).id for n in pm.ARM_ACTUATOR_NAMES])
        d = self._description
        self._lower, self._upper = d.joint_lower_rad, d.joint_upper_rad
        self._max_step = d.joint_velocity_limit_rad_s * self.control_period_s
        self._controller = JointTorqueController(
            model, self._arm_dof, arm_act, omega_rad_s=self._omega,
            velocity_limit_rad_s=d.joint_velocity_limit_rad_s,
            acceleration_limit_rad_s2=PANDA_ACCELERATION_LIMIT_RAD_S2 * self._acceleration_scale)
        base = model.body(pm.BASE_BODY).id
        robot_bodies = [b for b in range(model.nbody) if self._is_descendant(model, b, base)]
        hand = model.body(pm.HAND_BODY).id
        hand_bodies = [b for b in range(model.nbody) if self._is_descendant(model, b, hand)]
        self._contacts = ContactReader(
            model, robot_bodies, hand_bodies,
            [model.body(n).id for n in pm.LEFT_FINGER_BODIES],
            [model.body(n).id for n in pm.RIGHT_FINGER_BODIES], arm_dof_ids=self._arm_dof)
        self._tcp_site = model.site(pm.TCP_SITE).id
        self._object_body = {o.name: model.body(o.name).id for o in OBJECTS}
        self._object_qpos = {o.name: model.joint(f"{o.name}_joint").qposadr[0] for o in OBJECTS}
        self._table_body = model.body(TABLE_BODY).id
        self._camera_ids = {HEAD_CAMERA: model.camera(HEAD_CAMERA).id,
                            WRIST_CAMERA: model.camera(WRIST_CAMERA).id}
        self._bad_qacc = int(mujoco.mjtWarning.mjWARN_BADQACC)

    @staticmethod
    def _is_descendant(model: mujoco.MjModel, body: int, ancestor: int) -> bool:
        while body != 0:
            if body == ancestor:
                return True
            body = int(model.body_parentid[body])
        return ancestor == 0

    def _on_activate(self) -> None:
        with self._lock:
            self._latch_hold()

    def _on_deactivate(self) -> None:
        with self._lock:
            self._latch_hold()

    def _on_shutdown(self) -> None:
        with self._lock:
            if self._renderer is not None:
                self._renderer.close()
                self._renderer = None
            self._model = None
            self._data = None

    def _require_model(self, action: str) -> None:
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, action)

    # ---------------------------------------------------------------- description
    def description(self) -> RobotDescription:
        """The Panda as this driver simulates it (``T_world_base``: the pedestal top)."""
        self._require_model("description")
        return self._description

    @property
    def mj_model(self) -> mujoco.MjModel:
        """The MuJoCo model (for twins and tests; never for the policy)."""
        self._require_model("mj_model")
        return self._model

    @property
    def mj_data(self) -> mujoco.MjData:
        """The MuJoCo data (for twins and tests; never for the policy)."""
        self._require_model("mj_data")
        return self._data

    # --------------------------------------------------------------------- reset
    def reset(self, seed: int | None = None, init_state: int | None = None) -> TaskInfo:
        """Put the arm at home with the jaw open and lay the objects out.

        Args:
            seed: layout seed (None: a fresh random layout).
            init_state: a numbered layout (deterministic, independent of ``seed``);
                the tabletop has no official initial states, so any integer >= 0 names
                one layout.
        """
        self._require_model("reset")
        return self._reset(seed, init_state)

    def _reset(self, seed: int | None, init_state: int | None) -> TaskInfo:
        if init_state is not None:
            rng = np.random.default_rng([_INIT_STATE_STREAM, int(init_state)])
        else:
            rng = np.random.default_rng(seed)
        layout = sample_layout(rng)
        m, d = self._model, self._data
        with self._lock:
            mujoco.mj_resetData(m, d)
            d.qpos[self._arm_qpos] = self._description.home_joint_positions_rad
            d.qpos[self._finger_qpos] = (_FINGER_OPEN_M, -_FINGER_OPEN_M)
            for name, (x, y, yaw) in layout.items():
                adr = self._object_qpos[name]
                z = TABLE_TOP_Z_M + object_by_name(name).half_size_m[2]
                d.qpos[adr:adr + 7] = (x, y, z, np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
            mujoco.mj_forward(m, d)
            self._target = self._description.home_joint_positions_rad.copy()
            self._target_start = self._target.copy()
            self._gripper_fraction = 1.0
            self._apply_gripper_target()
            self._fault = ""
            zero = np.zeros(7)
            for _ in range(self._settle_steps):
                self._substep(self._target_start, zero)
            d.time = 0.0
            self._sync_kinematics()
            self._warnings_at_reset = int(d.warning[self._bad_qacc].number)
            self._initial_poses = self._object_poses()
            self._initial_z = {n: p.position_m[2] for n, p in self._initial_poses.items()}
            self._ever_held = {o.name: False for o in OBJECTS}
            self._init_state = -1 if init_state is None else int(init_state)
            self._update_held(*self._contacts.finger_touching(d))
        return self.task_info()

    def task_info(self) -> TaskInfo:
        """The loaded task (instruction, goal, object names)."""
        t = self.task
        return TaskInfo(
            task_id=t.task_id, instruction=t.instruction, suite="tabletop", init_state=self._init_state,
            goals=(t.goal_text,), objects=(*(o.name for o in OBJECTS), TABLE_BODY),
            extra={"table_top_z_m": TABLE_TOP_Z_M - float(self._T_world_base[2, 3])},
        )

    # ---------------------------------------------------------------- commanding
    def _latch_hold(self) -> None:
        q = self._data.qpos[self._arm_qpos].copy()
        self._target = q
        self._target_start = q.copy()

    def _apply_gripper_target(self) -> None:
        opening = self._gripper_fraction * _FINGER_OPEN_M
        self._data.ctrl[self._finger_act] = (opening, -opening)

    def send_command(self, command: JointCommand) -> JointCommand:
        """Clip to the joint limits and to one period's travel at the velocity limits
        (relative to the target at the start of the coming period); returns what
        will be tracked.

        Raises:
            DriverStateError: unless ACTIVE.
            DriverFault: when the simulation is faulted (call ``reset``).
            BackendError: for a wrong shape or non-finite values.
        """
        self._require(LifecycleState.ACTIVE, "send_command")
        q = np.asarray(command.joint_positions_rad, dtype=float).reshape(-1)
        if q.shape != (7,) or not np.all(np.isfinite(q)):
            raise BackendError(
                f"joint_positions_rad must be 7 finite values in rad (order {pm.ARM_JOINT_NAMES}); "
                f"got {np.asarray(command.joint_positions_rad).tolist()}")
        fraction = command.gripper_target_fraction
        if fraction is not None and not np.isfinite(fraction):
            raise BackendError(f"gripper_target_fraction must be in 0..1 or None; got {fraction}")
        with self._lock:
            if self._fault:
                raise DriverFault(f"tabletop driver is faulted ({self._fault}); call reset()")
            q = np.clip(q, self._lower, self._upper)
            q = self._target_start + np.clip(q - self._target_start, -self._max_step, self._max_step)
            self._target = q
            if fraction is not None:
                self._gripper_fraction = float(np.clip(fraction, 0.0, 1.0))
                self._apply_gripper_target()
            return JointCommand(q.copy(), self._gripper_fraction)

    def _sync_kinematics(self) -> None:
        """Body, site and camera poses of the current joint positions (a physics step
        leaves them at the start of that step, 1 ms behind)."""
        mujoco.mj_kinematics(self._model, self._data)
        mujoco.mj_camlight(self._model, self._data)

    def _substep(self, q_des: np.ndarray, qd_des: np.ndarray) -> None:
        m, d = self._model, self._data
        mujoco.mj_step1(m, d)
        self._controller.apply(m, d, q_des, qd_des)
        mujoco.mj_step2(m, d)

    def advance(self, guard: ForceGuard | None = None) -> AdvanceReport:
        """Step 10 physics substeps (10 ms) tracking the latest command, checking the
        guard at each substep. ``peak_contact_force_n`` is the peak of the quantity the
        guard watches: all robot-world contacts, or, with ``ignore_finger_contacts``,
        all but the fingers' contacts with movable objects."""
        self._require_model("advance")
        m, d = self._model, self._data
        contacts, controller = self._contacts, self._controller
        limit = guard.max_contact_force_n if guard is not None else np.inf
        ignore_fingers = bool(guard.ignore_finger_contacts) if guard is not None else False
        with self._lock:
            start, target = self._target_start, self._target
            delta = target - start
            qd_ff = delta / self.control_period_s
            peak = 0.0
            tripped_at: float | None = None
            n = self.substeps
            zero = np.zeros(7)
            for k in range(n):
                mujoco.mj_step1(m, d)
                if tripped_at is None:
                    controller.apply(m, d, start + delta * ((k + 1) / n), qd_ff)
                else:
                    controller.apply(m, d, target, zero)
                mujoco.mj_step2(m, d)
                force = contacts.robot_world_force_n(m, d, ignore_fingers)
                if force > peak:
                    peak = force
                if tripped_at is None and force > limit:
                    tripped_at = float(d.time)
                    target = d.qpos[self._arm_qpos].copy()
                    self._target = target
            self._target_start = self._target.copy()
            self._sync_kinematics()
            if int(d.warning[self._bad_qacc].number) > self._warnings_at_reset and not self._fault:
                self._fault = "physics became unstable (bad accelerations)"
                self._latch_hold()
            self._update_held(*contacts.finger_touching(d))
            return AdvanceReport(self.control_period_s, n, peak, tripped_at is not None, tripped_at)

    # --------------------------------------------------------------------- state
    def _tcp_world(self) -> np.ndarray:
        return self._data.site_xpos[self._tcp_site].copy()

    def gripper_opening_m(self) -> float:
        """Distance between the finger pads now, metres."""
        q = self._data.qpos[self._finger_qpos]
        return float(max(0.0, q[0] - q[1] + self._files.finger_gap_offset_m))

    def read_state(self) -> RobotState:
        """Joint state, jaw opening, contact forces (base frame) at the current time."""
        self._require_model("read_state")
        m, d = self._model, self._data
        with self._lock:
            tcp = self._tcp_world()
            summary = self._contacts.summarize(m, d, tcp, with_body_pairs=False)
            R = self._T_base_world[:3, :3]
            wrench = np.concatenate([R @ summary.force_world_n, R @ summary.torque_world_nm])
            opening = self.gripper_opening_m()
            return RobotState(
                time_s=float(d.time),
                joint_positions_rad=d.qpos[self._arm_qpos].copy(),
                joint_velocities_rad_s=d.qvel[self._arm_dof].copy(),
                gripper_opening_m=opening,
                gripper_open_fraction=float(np.clip(opening / self._description.gripper_max_opening_m, 0, 1)),
                wrench_base=wrench,
                contact_force_n=summary.total_force_n,
                finger_forces_n=summary.finger_forces_n.copy(),
                fault=self._fault,
            )

    def T_base_tcp(self) -> np.ndarray:
        """4x4 pose of the tool centre point (grip site) in the base frame, metres."""
        self._require_model("T_base_tcp")
        with self._lock:
            T = np.eye(4)
            T[:3, :3] = self._data.site_xmat[self._tcp_site].reshape(3, 3)
            T[:3, 3] = self._data.site_xpos[self._tcp_site]
            return self._T_base_world @ T

    # ------------------------------------------------------------------- cameras
    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, CameraFrame]:
        """RGB-D frames with intrinsics and ``T_base_camera`` (OpenCV optical frame)."""
        self._require_model("capture")
        names = tuple(names) if names is not None else self.camera_names()
        unknown = [n for n in names if n not in self._camera_ids]
        if unknown:
            raise BackendError(f"unknown camera(s) {unknown}; cameras: {', '.join(self._camera_ids)}")
        with self._lock:
            if self._renderer is None:
                self._renderer = RgbdRenderer(self._model, self._image_size_px, self._image_size_px)
            frames = {}
            for name in names:
                cam = self._camera_ids[name]
                rgb, depth = self._renderer.render(self._data, cam)
                K = intrinsics_from_fovy(float(self._model.cam_fovy[cam]), self._image_size_px,
                                         self._image_size_px)
                T = self._T_base_world @ camera_pose_world(self._data, cam)
                frames[name] = CameraFrame(name, rgb, depth, K, T, float(self._data.time))
            return frames

    # --------------------------------------------------------- privileged state
    def _object_poses(self) -> dict[str, ObjectPose]:
        d = self._data
        poses = {}
        for name, body in self._object_body.items():
            poses[name] = ObjectPose(tuple(float(v) for v in d.xpos[body]),
                                     tuple(float(v) for v in d.xquat[body]))
        return poses

    def _update_held(self, left_touching: frozenset[int], right_touching: frozenset[int]) -> None:
        self._held = self._held_from(left_touching, right_touching)
        for name, held in self._held.items():
            if held:
                self._ever_held[name] = True

    def _held_from(self, left_touching: frozenset[int], right_touching: frozenset[int]) -> dict[str, bool]:
        """Held: both fingers touch the object, and it is lifted off its resting
        height or lies between the pads (its centre projects inside the pad span)."""
        d = self._data
        held = {}
        tcp = d.site_xpos[self._tcp_site]
        R_tcp = d.site_xmat[self._tcp_site].reshape(3, 3)
        for name, body in self._object_body.items():
            if body not in left_touching or body not in right_touching:
                held[name] = False
                continue
            lifted = float(d.xpos[body][2]) > self._initial_z[name] + 0.005
            # The pads close along the TCP's x axis: "between" means the centre is
            # near the grip point in the TCP's y-z plane.
            local = R_tcp.T @ (d.xpos[body] - tcp)
            between = abs(local[1]) < 0.02 and abs(local[2]) < 0.02
            held[name] = bool(lifted or between)
        return held

    def _goal_satisfied(self, summary: ContactSummary) -> bool:
        t = self.task
        d = self._data
        target = self._object_body[t.target]
        if t.predicate == "lifted":
            z = float(d.xpos[target][2])
            return self._held.get(t.target, False) and z >= self._initial_z[t.target] + LIFT_HEIGHT_M
        dest = self._object_body[t.destination]
        pair = (min(target, dest), max(target, dest))
        if pair not in summary.body_pairs or self._held.get(t.target, False):
            return False
        quat = d.xquat[dest]
        yaw = float(np.arctan2(2 * (quat[0] * quat[3] + quat[1] * quat[2]),
                               1 - 2 * (quat[2] ** 2 + quat[3] ** 2)))
        return on_support(object_by_name(t.target), d.xpos[target], object_by_name(t.destination),
                          d.xpos[dest], yaw)

    def check_success(self) -> bool:
        """The task's goal predicate now (see ``tasks.py``)."""
        self._require_model("check_success")
        with self._lock:
            summary = self._contacts.summarize(self._model, self._data, self._tcp_world())
            self._update_held(summary.left_touching, summary.right_touching)
            return self._goal_satisfied(summary)

    def snapshot(self) -> SimSnapshot:
        """Object poses, goal bookkeeping and held flags (world frame)."""
        self._require_model("snapshot")
        with self._lock:
            d = self._data
            summary = self._contacts.summarize(self._model, d, self._tcp_world())
            self._update_held(summary.left_touching, summary.right_touching)
            success = self._goal_satisfied(summary)
            t = self.task
            args = (t.target, t.destination) if t.predicate == "on" else (t.target,)
            goal = GoalPredicate(t.predicate, args, success, involves_joint=False,
                                 involves_contact=t.predicate == "on")
            goal_position = (tuple(float(v) for v in d.xpos[self._object_body[t.destination]])
                             if t.destination else None)
            fraction = self.gripper_opening_m() / self._description.gripper_max_opening_m
            return SimSnapshot(
                time_s=float(d.time),
                ee_position_m=tuple(float(v) for v in self._tcp_world()),
                gripper_open_fraction=float(np.clip(fraction, 0.0, 1.0)),
                object_poses=self._object_poses(),
                initial_object_poses=dict(self._initial_poses),
                goals=(goal,),
                target_object=t.target,
                destination=t.destination,
                goal_position_m=goal_position,
                held=dict(self._held),
                ever_held=dict(self._ever_held),
                success=success,
            )
