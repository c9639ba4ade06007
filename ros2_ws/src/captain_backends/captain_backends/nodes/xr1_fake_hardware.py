"""``xr1_fake_hardware``: the XR1's topics without a robot, like ros2_control's mock
components.

Accepts the arm commands (Float64MultiArray or JointTrajectory) and gripper commands
of the XR1 configuration and mirrors them into ``joint_states`` at the control rate
with a first-order lag; publishes a zero wrench (plus ``injected_force_n``) and
synthetic RGB-D images with camera_info for every configured camera.

Run: ``ros2 run captain_backends xr1_fake_hardware --ros-args -p config_path:=xr1.yaml``
or ``python -m captain_backends.nodes.xr1_fake_hardware --ros-args ...``.

Parameters (besides ``publish_joint_states`` and ``injected_force_n``, see
``xr1_robot_io``):

* ``config_path`` (string, default: the packaged config/xr1.yaml), read-only;
* ``time_constant_s`` (double, s, default 0.05, 0..10): lag of the joints behind
  commands, dynamic;
* ``camera_rate_hz`` (double, Hz, default 10, 0..30; 0 disables cameras), dynamic;
* ``image_width_px`` / ``image_height_px`` (int, px, default 320 x 240), read-only;
* ``depth_encoding`` (string, ``16UC1`` mm (default) or ``32FC1`` m), read-only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rclpy.node import Node

from captain_backends.core.xr1.fake_hardware import FirstOrderMirror, synthetic_rgbd
from captain_backends.nodes.xr1_robot_io import XR1RobotIO, declare_config, dynamic_range, read_only, run_robot_node

#: Highest camera rate and joint lag the fake hardware accepts (Hz, s).
MAX_CAMERA_RATE_HZ = 30.0
MAX_TIME_CONSTANT_S = 10.0


class XR1FakeHardware(Node):
    """The fake hardware node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        """``kwargs`` go to ``rclpy.node.Node`` (``context``, ``parameter_overrides``, ...)."""
        super().__init__("xr1_fake_hardware", **kwargs)
        self.config = declare_config(self)
        self.period_s = self.config.control_period_s
        tau = float(self.declare_parameter("time_constant_s", 0.05, dynamic_range(
            "lag of the joints behind commands, s", 0.0, MAX_TIME_CONSTANT_S)).value)
        self._set_camera_rate(float(self.declare_parameter("camera_rate_hz", 10.0, dynamic_range(
            "camera frame rate, Hz (0: none)", 0.0, MAX_CAMERA_RATE_HZ)).value))
        self._width = int(self.declare_parameter("image_width_px", 320, read_only("image width, px")).value)
        self._height = int(self.declare_parameter("image_height_px", 240, read_only("image height, px")).value)
        depth_encoding = str(self.declare_parameter("depth_encoding", "16UC1", read_only(
            "depth image encoding: 16UC1 (mm) or 32FC1 (m)")).value)
        self.io = XR1RobotIO(self, self.config, depth_encoding)
        cfg = self.config
        self.arm = FirstOrderMirror(np.asarray(cfg.arm.home_rad), tau)
        self.gripper = (FirstOrderMirror(np.asarray(cfg.gripper.open_positions), tau)
                        if cfg.gripper is not None else None)
        self._names = self.io.arm_names + self.io.gripper_names
        self._wrench_frame = cfg.wrench.frame or "base"
        self._time_s = 0.0
        self._next_camera_s = 0.0
        self._frame_index = 0
        self.add_post_set_parameters_callback(self._apply_parameters)

    def _set_camera_rate(self, rate_hz: float) -> None:
        self._cameras_on = rate_hz > 0
        self._camera_period_s = 1.0 / rate_hz if rate_hz > 0 else np.inf

    def _apply_parameters(self, params: list) -> None:
        """Dynamic parameters take effect at the next control period (ranges checked by rclpy)."""
        for p in params:
            if p.name == "time_constant_s":
                for mirror in (self.arm, self.gripper):
                    if mirror is not None:
                        mirror.time_constant_s = float(p.value)
            elif p.name == "camera_rate_hz":
                self._set_camera_rate(float(p.value))
                self._next_camera_s = self._time_s

    def step(self, periods: int) -> None:
        """Mirror the latest commands over ``periods`` control periods and publish."""
        dt = periods * self.period_s
        self._time_s += dt
        target = self.io.arm_target()
        if target is not None:
            self.arm.set_target(target)
        self.arm.step(dt)
        q, v = self.arm.positions, self.arm.velocities
        if self.gripper is not None:
            g = self.io.gripper_target()
            if g is not None:
                self.gripper.set_target(g)
            self.gripper.step(dt)
            q = np.concatenate([q, self.gripper.positions])
            v = np.concatenate([v, self.gripper.velocities])
        self.io.publish_joint_states(self._names, q, v)
        self.io.publish_wrench(np.zeros(3), np.zeros(3), self._wrench_frame)
        if self._cameras_on and self._time_s >= self._next_camera_s:
            self._next_camera_s = self._time_s + self._camera_period_s
            rgb, depth, K = synthetic_rgbd(self._width, self._height, frame_index=self._frame_index)
            self._frame_index += 1
            for cam in self.config.cameras:
                self.io.publish_camera(cam.name, rgb, depth, K)


def main(args: list[str] | None = None) -> int:
    """Console entry point ``xr1_fake_hardware``."""
    return run_robot_node(XR1FakeHardware, args)


if __name__ == "__main__":
    raise SystemExit(main())
