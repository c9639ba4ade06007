"""The mock driver (registered as ``"mock"``): no physics, state mirrors commands.

* ``send_command`` clips like the real drivers (joint limits, one period's travel at
  the velocity limits) and the state takes the sent values at once: joint positions =
  last sent command, joint velocities = its change over one control period (zero once
  a period passes without a command), jaw opening = target fraction x maximum opening.
* ``advance`` moves time by ``control_period_s``; there are no contacts, so forces are
  zero and guards never trip.
* Cameras are synthetic but geometrically consistent: the tabletop scene's head camera
  pose and the wrist camera on the hand (from the same Panda model), 512x512, and a
  depth image of the table top (a rectangle at the tabletop's table height) over the
  floor; the RGB image is a checkered table on a grey floor. Back-projecting any pixel
  with its depth, ``K`` and ``T_base_camera`` lands on those planes.
* ``description`` is the tabletop's Panda description, so kinematics above it work.

Frames: the robot base frame of the tabletop scene (the table top is at
``z = TABLE_TOP_Z_M - base height`` in it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
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
    RobotState,
    SimulatedDriver,
    TaskInfo,
)
from captain_backends.core.errors import BackendError
from captain_backends.core.snapshot import SimSnapshot
from captain_backends.core.tabletop import panda_model as pm
from captain_backends.core.tabletop.rendering import R_MJCAM_OPTICAL, intrinsics_from_fovy
from captain_backends.core.tabletop.scene import (
    HEAD_CAMERA_FOVY_DEG,
    HEAD_CAMERA_POSITION_M,
    HEAD_CAMERA_TARGET_M,
    IMAGE_SIZE_PX,
    TABLE_HALF_SIZE_M,
    TABLE_TOP_Z_M,
    T_world_base,
    _look_at_quat_wxyz,
)

_TABLE_RGB = np.array([158, 122, 84], dtype=np.uint8)
_TABLE_RGB_DARK = np.array([146, 112, 77], dtype=np.uint8)
_FLOOR_RGB = np.array([110, 114, 120], dtype=np.uint8)
_CHECKER_M = 0.05


@dataclass(frozen=True)
class MockConfig(DriverConfig):
    """Options of the mock driver.

    Attributes:
        image_size_px: square camera image size, px.
        cache_dir: folder for the generated Panda model files (see ``panda_model``).
    """

    image_size_px: int = IMAGE_SIZE_PX
    cache_dir: str | Path | None = None

    def __post_init__(self) -> None:
        if not 16 <= self.image_size_px <= 4096:
            raise DriverConfigError(f"image_size_px = {self.image_size_px} px is outside 16..4096")


class MockDriver(SimulatedDriver):
    """A driver without physics for tests of everything above the driver interface.

    Args:
        config: a ``MockConfig``; or its options by keyword (``image_size_px=64``,
            ``cache_dir``). Unknown names are refused with the valid ones.
    """

    control_period_s = 0.01
    config_type = MockConfig

    @classmethod
    def task_options(cls, suite: str, name: str) -> dict[str, Any]:
        """None: the mock has one scene, a bare table, whatever the task's name."""
        return {}

    def __init__(self, config: MockConfig | None = None, **options: Any) -> None:
        super().__init__()
        self.config = MockConfig.resolve(config, options, driver="mock")
        self._size = int(self.config.image_size_px)
        cache_dir = self.config.cache_dir
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ lifecycle
    def _on_configure(self) -> None:
        import mujoco

        files = pm.panda_model_files(self._cache_dir)
        self._T_world_base = T_world_base()
        self._T_base_world = np.linalg.inv(self._T_world_base)
        self._description = replace(files.description, T_world_base=self._T_world_base.copy())
        self._gap_offset_m = files.finger_gap_offset_m
        self._model = mujoco.MjModel.from_xml_path(str(files.mjcf_path))
        self._data = mujoco.MjData(self._model)
        self._arm_qpos = np.array([self._model.joint(n).qposadr[0] for n in pm.ARM_JOINT_NAMES])
        self._finger_qpos = np.array([self._model.joint(n).qposadr[0] for n in pm.FINGER_JOINT_NAMES])
        self._wrist_cam = self._model.camera(pm.WRIST_CAMERA_NAME).id
        self._tcp_site = self._model.site(pm.TCP_SITE).id
        self._K = {
            HEAD_CAMERA: intrinsics_from_fovy(HEAD_CAMERA_FOVY_DEG, self._size, self._size),
            WRIST_CAMERA: intrinsics_from_fovy(float(self._model.cam_fovy[self._wrist_cam]),
                                               self._size, self._size),
        }
        self._T_base_head = self._head_camera_pose_base()
        u, v = np.meshgrid(np.arange(self._size, dtype=float), np.arange(self._size, dtype=float))
        pixels = np.stack([u.ravel(), v.ravel(), np.ones(u.size)])
        # Rays through every pixel in each camera's optical frame, z = 1 (so the ray
        # parameter of a hit is its depth).
        self._rays_cam = {name: np.linalg.solve(K, pixels).astype(np.float32) for name, K in self._K.items()}
        self._frame_cache: dict[str, tuple] = {}
        self._reset()

    def _head_camera_pose_base(self) -> np.ndarray:
        import mujoco

        quat = _look_at_quat_wxyz(np.asarray(HEAD_CAMERA_POSITION_M), np.asarray(HEAD_CAMERA_TARGET_M))
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, quat)
        T = np.eye(4)
        T[:3, :3] = R.reshape(3, 3) @ R_MJCAM_OPTICAL
        T[:3, 3] = HEAD_CAMERA_POSITION_M
        return self._T_base_world @ T

    def _on_activate(self) -> None:
        with self._lock:
            self._velocity = np.zeros(7)

    def _on_shutdown(self) -> None:
        self._model = None
        self._data = None

    # --------------------------------------------------------------- description
    def description(self) -> RobotDescription:
        """The tabletop's Panda description (same model file, same base pose)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "description")
        return self._description

    # --------------------------------------------------------------------- reset
    def reset(self, seed: int | None = None, init_state: int | None = None) -> TaskInfo:
        """Home the arm, open the jaw, time to 0 (``seed`` and ``init_state`` are unused)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "reset")
        return self._reset()

    def _reset(self) -> TaskInfo:
        with self._lock:
            self._q = self._description.home_joint_positions_rad.copy()
            self._velocity = np.zeros(7)
            self._commanded = False
            self._fraction = 1.0
            self._time_s = 0.0
            self._ticks = 0
        return self.task_info()

    def task_info(self) -> TaskInfo:
        """An empty task on a bare table."""
        return TaskInfo(task_id="mock/empty", instruction="", suite="mock", objects=("table",),
                        extra={"table_top_z_m": TABLE_TOP_Z_M - float(T_world_base()[2, 3])})

    def check_success(self) -> bool:
        """Always False (the mock has no task)."""
        return False

    def snapshot(self) -> SimSnapshot:
        """Time, tool position and jaw; no objects."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "snapshot")
        with self._lock:
            tcp_world = self._T_world_base @ np.append(self._fk()[1][:3, 3], 1.0)
            return SimSnapshot(time_s=self._time_s, ee_position_m=tuple(float(v) for v in tcp_world[:3]),
                               gripper_open_fraction=self._fraction, object_poses={},
                               initial_object_poses={}, goals=(), target_object="", destination="",
                               goal_position_m=None)

    # ----------------------------------------------------------------- commands
    def send_command(self, command: JointCommand) -> JointCommand:
        """Clip (joint limits, one period's travel at the velocity limits) and mirror
        the result into the state at once."""
        self._require(LifecycleState.ACTIVE, "send_command")
        q = np.asarray(command.joint_positions_rad, dtype=float).reshape(-1)
        if q.shape != (7,) or not np.all(np.isfinite(q)):
            raise BackendError(
                f"joint_positions_rad must be 7 finite values in rad (order {pm.ARM_JOINT_NAMES}); "
                f"got {np.asarray(command.joint_positions_rad).tolist()}")
        d = self._description
        with self._lock:
            q = np.clip(q, d.joint_lower_rad, d.joint_upper_rad)
            max_step = d.joint_velocity_limit_rad_s * self.control_period_s
            q = self._q + np.clip(q - self._q, -max_step, max_step)
            self._velocity = (q - self._q) / self.control_period_s
            self._commanded = True
            self._q = q
            if command.gripper_target_fraction is not None:
                if not np.isfinite(command.gripper_target_fraction):
                    raise BackendError("gripper_target_fraction must be in 0..1 or None")
                self._fraction = float(np.clip(command.gripper_target_fraction, 0.0, 1.0))
            return JointCommand(q.copy(), self._fraction)

    def advance(self, guard: ForceGuard | None = None) -> AdvanceReport:
        """Move time by one control period (no contacts: nothing can trip)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "advance")
        with self._lock:
            self._ticks += 1
            self._time_s = self._ticks * self.control_period_s
            if not self._commanded:
                self._velocity = np.zeros(7)
            self._commanded = False
        return AdvanceReport(self.control_period_s, 1, 0.0)

    # --------------------------------------------------------------------- state
    def read_state(self) -> RobotState:
        """The mirrored command; zero forces."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "read_state")
        with self._lock:
            max_opening = self._description.gripper_max_opening_m
            return RobotState(
                time_s=self._time_s, joint_positions_rad=self._q.copy(),
                joint_velocities_rad_s=self._velocity.copy(),
                gripper_opening_m=self._fraction * max_opening, gripper_open_fraction=self._fraction,
                wrench_base=np.zeros(6), contact_force_n=0.0, finger_forces_n=np.zeros(2))

    def _fk(self) -> tuple[np.ndarray, np.ndarray]:
        """(T_base_wrist_camera_optical, T_base_tcp) for the current joints."""
        import mujoco

        m, d = self._model, self._data
        d.qpos[self._arm_qpos] = self._q
        half = 0.5 * (self._fraction * self._description.gripper_max_opening_m - self._gap_offset_m)
        d.qpos[self._finger_qpos] = (half, -half)
        mujoco.mj_kinematics(m, d)
        mujoco.mj_camlight(m, d)
        cam = np.eye(4)
        cam[:3, :3] = d.cam_xmat[self._wrist_cam].reshape(3, 3) @ R_MJCAM_OPTICAL
        cam[:3, 3] = d.cam_xpos[self._wrist_cam]
        tcp = np.eye(4)
        tcp[:3, :3] = d.site_xmat[self._tcp_site].reshape(3, 3)
        tcp[:3, 3] = d.site_xpos[self._tcp_site]
        return cam, tcp  # the robot-only model's world frame is the base frame

    def _synthetic_frame(self, name: str, T_base_camera: np.ndarray) -> CameraFrame:
        """Ray-cast the table top rectangle and the floor plane (base frame); frames
        are cached per camera pose."""
        key = (name, T_base_camera.round(12).tobytes())
        cached = self._frame_cache.get(name)
        if cached is None or cached[0] != key:
            cached = (key, *self._ray_cast(name, T_base_camera))
            self._frame_cache[name] = cached
        _, rgb, depth = cached
        return CameraFrame(name, rgb.copy(), depth.copy(), self._K[name].copy(), T_base_camera, self._time_s)

    def _ray_cast(self, name: str, T_base_camera: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y, z = self._rays_cam[name]
        R = T_base_camera[:3, :3].astype(np.float32)
        ox, oy, oz = (float(v) for v in T_base_camera[:3, 3])
        rz = R[2, 0] * x + R[2, 1] * y + R[2, 2] * z
        base_z = float(self._T_world_base[2, 3])
        table_z = TABLE_TOP_Z_M - base_z
        table_x, table_y = (float(v) for v in self._T_base_world[:2, 3])
        with np.errstate(divide="ignore", invalid="ignore"):
            t_table = (table_z - oz) / rz
            t_floor = (-base_z - oz) / rz
        hx = ox + (R[0, 0] * x + R[0, 1] * y + R[0, 2] * z) * t_table
        hy = oy + (R[1, 0] * x + R[1, 1] * y + R[1, 2] * z) * t_table
        on_table = ((t_table > 0) & (np.abs(hx - table_x) <= TABLE_HALF_SIZE_M[0])
                    & (np.abs(hy - table_y) <= TABLE_HALF_SIZE_M[1]))
        depth = np.where(on_table, t_table, np.where(t_floor > 0, t_floor, 0.0)).astype(np.float32)
        checker = (np.floor(hx / _CHECKER_M) + np.floor(hy / _CHECKER_M)) % 2 == 0
        rgb = np.empty((depth.size, 3), dtype=np.uint8)
        rgb[:] = _FLOOR_RGB
        rgb[on_table & checker] = _TABLE_RGB
        rgb[on_table & ~checker] = _TABLE_RGB_DARK
        rgb[depth == 0] = 0
        shape = (self._size, self._size)
        return rgb.reshape(*shape, 3), depth.reshape(shape)

    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, CameraFrame]:
        """Synthetic RGB-D frames of the table (see the module docstring)."""
        self._require(LifecycleState.INACTIVE, LifecycleState.ACTIVE, "capture")
        names = tuple(names) if names is not None else self.camera_names()
        unknown = [n for n in names if n not in self._K]
        if unknown:
            raise BackendError(f"unknown camera(s) {unknown}; cameras: {', '.join(self._K)}")
        with self._lock:
            frames = {}
            for name in names:
                T = self._T_base_head if name == HEAD_CAMERA else self._fk()[0]
                frames[name] = self._synthetic_frame(name, T.copy())
            return frames
