"""``xr1_twin``: a MuJoCo digital twin of the XR1 speaking exactly the XR1's topics.

The MuJoCo tabletop (``captain_backends.core.tabletop``: the stand-in arm, robosuite's
Panda, at a table with objects and the two cameras) is stepped in real time, one 10 ms
control period per tick of the wall clock. Arm commands (Float64MultiArray or
JointTrajectory) and gripper commands (Float64MultiArray, mapped to the jaw opening
fraction through the configuration's gripper positions) are tracked by the tabletop's
joint controller. Published: ``joint_states`` (arm and finger joints, from the
simulation), the contact wrench in the base frame, and for both cameras
(``agentview``, ``robot0_eye_in_hand``) rendered colour, depth and camera_info.

The configuration must describe the stand-in arm (joint names ``robot0_joint1..7``,
fingers ``gripper0_finger_joint1/2``), as the packaged ``config/xr1.yaml`` does; its
camera extrinsics then match the rendered cameras.

Run: ``ros2 run captain_backends xr1_twin`` or ``python -m captain_backends.nodes.xr1_twin``.

Parameters (besides ``publish_joint_states`` and ``injected_force_n``, see
``xr1_robot_io``):

* ``config_path`` (string, default: the packaged config/xr1.yaml), read-only;
* ``task`` (string, default ``cube_on_plate``) and ``seed`` (int, default 0): the scene,
  read-only;
* ``image_size_px`` (int, px, default 512): square camera images, read-only;
* ``camera_rate_hz`` (double, Hz, default 5, 0..30; 0 disables cameras): dynamic, except
  that a twin started without cameras (rate 0) cannot start them later (refused);
* ``depth_encoding`` (string, ``32FC1`` m (default) or ``16UC1`` mm), read-only.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA, JointCommand
from captain_backends.core.errors import BackendError
from captain_backends.core.xr1.errors import XR1ConfigError
from captain_backends.core.xr1.gripper import GripperMap
from captain_backends.nodes.xr1_robot_io import (
    XR1RobotIO,
    declare_config,
    dynamic_range,
    read_only,
    refused,
    run_robot_node,
)

#: Highest camera rate the twin renders at, Hz.
MAX_CAMERA_RATE_HZ = 30.0


class XR1Twin(Node):
    """The twin node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        """``kwargs`` go to ``rclpy.node.Node`` (``context``, ``parameter_overrides``, ...)."""
        super().__init__("xr1_twin", **kwargs)
        from captain_backends.core.tabletop import panda_model as pm
        from captain_backends.core.tabletop.driver import TabletopDriver

        cfg = declare_config(self)
        self.config = cfg
        task = str(self.declare_parameter("task", "cube_on_plate", read_only("tabletop task of the scene")).value)
        seed = int(self.declare_parameter("seed", 0, read_only("layout seed of the scene")).value)
        size = int(self.declare_parameter("image_size_px", 512, read_only("square camera images, px")).value)
        rate = float(self.declare_parameter("camera_rate_hz", 5.0, dynamic_range(
            "camera frame rate, Hz (0: none)", 0.0, MAX_CAMERA_RATE_HZ)).value)
        depth_encoding = str(self.declare_parameter("depth_encoding", "32FC1", read_only(
            "depth image encoding: 32FC1 (m) or 16UC1 (mm)")).value)
        if tuple(cfg.arm.joint_names) != pm.ARM_JOINT_NAMES:
            raise XR1ConfigError(f"the twin simulates the stand-in arm: arm.joint_names must be "
                                 f"{list(pm.ARM_JOINT_NAMES)}; got {list(cfg.arm.joint_names)}")
        if cfg.gripper is not None and tuple(cfg.gripper.joint_names) != pm.FINGER_JOINT_NAMES:
            raise XR1ConfigError(f"the twin's gripper joints are {list(pm.FINGER_JOINT_NAMES)}; "
                                 f"got {list(cfg.gripper.joint_names)}")
        unknown = [c for c in cfg.camera_names if c not in (HEAD_CAMERA, WRIST_CAMERA)]
        if unknown:
            raise XR1ConfigError(f"the twin renders only {HEAD_CAMERA} and {WRIST_CAMERA}; "
                                 f"remove camera(s) {unknown} from the configuration")
        self.sim = TabletopDriver(task=task, seed=seed, image_size_px=size)
        self.sim.configure()
        self.sim.activate()
        self.period_s = self.sim.control_period_s
        self.io = XR1RobotIO(self, cfg, depth_encoding)
        self._gripper = (GripperMap(cfg.gripper.closed_positions, cfg.gripper.open_positions,
                                    cfg.gripper.max_opening_m) if cfg.gripper is not None else None)
        model = self.sim.mj_model
        joints = [model.joint(n) for n in pm.ARM_JOINT_NAMES + (pm.FINGER_JOINT_NAMES if self._gripper else ())]
        self._qpos = np.array([j.qposadr[0] for j in joints])
        self._dof = np.array([j.dofadr[0] for j in joints])
        self._names = self.io.arm_names + self.io.gripper_names
        self._arm_target = self.sim.read_state().joint_positions_rad
        self._base_frame = self.sim.description().base_frame
        self._camera_period_s = 1.0 / rate if rate > 0 else np.inf
        self._cameras = (_CameraWorker(model, cfg.camera_names, size, self.io.publish_camera)
                         if cfg.cameras and rate > 0 else None)
        self._time_s = 0.0
        self._next_camera_s = 0.0
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)
        self.get_logger().info(f"twin of the stand-in arm, task {task!r}, seed {seed}, cameras {size} px at {rate} Hz")

    def _check_parameters(self, params: list) -> SetParametersResult:
        """Refuse a camera rate the twin cannot apply (its range is checked by rclpy)."""
        for p in params:
            if p.name == "camera_rate_hz" and float(p.value) > 0 and self._cameras is None:
                return refused("the twin was started without cameras (camera_rate_hz 0 or none configured) and "
                               "cannot start them; restart it with camera_rate_hz > 0")
        return SetParametersResult(successful=True)

    def _apply_parameters(self, params: list) -> None:
        """A new camera rate takes effect from the next frame."""
        for p in params:
            if p.name == "camera_rate_hz":
                rate = float(p.value)
                self._camera_period_s = 1.0 / rate if rate > 0 else np.inf
                self._next_camera_s = self._time_s if rate > 0 else np.inf

    def step(self, periods: int) -> None:
        """Step ``periods`` control periods, each tracking the latest commands and
        followed by joint_states and wrench; hand a copy of the scene to the camera
        thread when a frame is due and it is idle."""
        sim = self.sim
        for _ in range(periods):
            target = self.io.arm_target()
            grip = self.io.gripper_target()
            fraction = self._gripper.fraction(grip) if grip is not None and self._gripper is not None else None
            if target is not None:
                self._arm_target = target
            try:
                sim.send_command(JointCommand(self._arm_target, fraction))
                sim.advance()
            except BackendError as exc:
                self.get_logger().error(f"simulation refused a command: {exc}", throttle_duration_sec=1.0)
            self._time_s += self.period_s
            data = sim.mj_data
            self.io.publish_joint_states(self._names, data.qpos[self._qpos], data.qvel[self._dof])
            wrench = sim.read_state().wrench_base
            self.io.publish_wrench(wrench[:3], wrench[3:], self._base_frame)
        if self._cameras is not None and self._time_s >= self._next_camera_s and self._cameras.idle():
            self._next_camera_s = self._time_s + self._camera_period_s
            self._cameras.submit(sim.mj_data)

    def close(self) -> None:
        """Stop the camera thread and release the simulator."""
        if self._cameras is not None:
            self._cameras.close()
        self.sim.shutdown()


class _CameraWorker:
    """Renders and publishes the cameras in a thread of its own, from a copy of the
    scene, so that rendering (slow on a CPU) never stalls the real-time physics loop.
    MuJoCo releases the GIL while rendering."""

    def __init__(self, model, names: tuple[str, ...], size_px: int, publish) -> None:
        import mujoco

        from captain_backends.core.tabletop.rendering import RgbdRenderer, intrinsics_from_fovy

        self._mujoco = mujoco
        self._model = model
        self._data = mujoco.MjData(model)
        self._cameras = [(n, model.camera(n).id,
                          intrinsics_from_fovy(float(model.cam_fovy[model.camera(n).id]), size_px, size_px))
                         for n in names]
        self._renderer = RgbdRenderer(model, size_px, size_px)
        self._publish = publish
        self._work = threading.Event()
        self._idle = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="xr1_twin_cameras", daemon=True)
        self._thread.start()
        self._idle.wait(60.0)  # the first render creates the GL context

    def idle(self) -> bool:
        """True when no frame is being rendered."""
        return self._idle.is_set()

    def submit(self, data) -> None:
        """Render and publish the current scene (call only when idle)."""
        self._mujoco.mj_copyData(self._data, self._model, data)
        self._idle.clear()
        self._work.set()

    def _run(self) -> None:
        try:
            self._renderer.render(self._data, self._cameras[0][1])
            self._idle.set()
            while True:
                self._work.wait()
                self._work.clear()
                if self._stop:
                    return
                for name, cam, K in self._cameras:
                    rgb, depth = self._renderer.render(self._data, cam)
                    self._publish(name, rgb, depth, K)
                self._idle.set()
        finally:
            self._renderer.close()
            self._idle.set()

    def close(self) -> None:
        """Stop the thread (its GL context is freed there)."""
        self._stop = True
        self._work.set()
        self._thread.join(timeout=10.0)


def main(args: list[str] | None = None) -> int:
    """Console entry point ``xr1_twin``."""
    return run_robot_node(XR1Twin, args)


if __name__ == "__main__":
    raise SystemExit(main())
