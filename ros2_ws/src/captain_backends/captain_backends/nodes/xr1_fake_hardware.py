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

* ``config_path`` (string, default: the packaged config/xr1.yaml);
* ``time_constant_s`` (double, s, default 0.05): lag of the joints behind commands;
* ``camera_rate_hz`` (double, Hz, default 10; 0 disables cameras);
* ``image_width_px`` / ``image_height_px`` (int, px, default 320 x 240);
* ``depth_encoding`` (string, ``16UC1`` mm (default) or ``32FC1`` m).
"""

from __future__ import annotations

import numpy as np
from rclpy.node import Node

from captain_backends.core.xr1.fake_hardware import FirstOrderMirror, synthetic_rgbd
from captain_backends.nodes.xr1_robot_io import XR1RobotIO, declare_config, run_robot_node


class XR1FakeHardware(Node):
    """The fake hardware node (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("xr1_fake_hardware")
        self.config = declare_config(self)
        self.period_s = self.config.control_period_s
        tau = float(self.declare_parameter("time_constant_s", 0.05).value)
        self._camera_period_s = 1.0 / max(1e-9, float(self.declare_parameter("camera_rate_hz", 10.0).value))
        self._cameras_on = float(self.get_parameter("camera_rate_hz").value) > 0
        self._width = int(self.declare_parameter("image_width_px", 320).value)
        self._height = int(self.declare_parameter("image_height_px", 240).value)
        depth_encoding = str(self.declare_parameter("depth_encoding", "16UC1").value)
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
