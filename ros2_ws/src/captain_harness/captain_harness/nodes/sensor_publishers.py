"""The harness node's sensor topics: ``joint_states`` and ``wrench`` from one driver
reading per tick of a shared timer (each decimated to its own rate, and built only while
someone subscribes), and per camera
``<camera>/color/image_raw``, ``<camera>/aligned_depth_to_color/image_raw`` and
``<camera>/color/camera_info`` on a timer of their own (rendered only while someone
subscribes). Stamps come from the node's ``RobotStatePublisher`` (simulated time for
simulated drivers)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import CameraInfo, Image, JointState

from captain_backends.core.driver import LifecycleState as DriverState
from captain_backends.nodes import xr1_messages as xm
from captain_harness.nodes.robot_state_publisher import SHARED_READING_S
from captain_harness.nodes.ros_params import camera_qos


class SensorPublishers:
    """joint_states and wrench from one driver reading per tick of a shared timer (each
    topic decimated to its own rate), and the camera topics on a timer of their own.

    Args:
        node: the harness node.
        params: its parameters.
        schedule: ``schedule(period_s, fn)`` runs the state tick every ``period_s`` (e.g.
            ``periodic.PeriodicCalls.add``, outside the executor); None: a node timer.
    """

    def __init__(self, node: Any, params: dict[str, Any],
                 schedule: Callable[[float, Callable[[], None]], None] | None = None) -> None:
        self.node = node
        self.depth_encoding = params["depth_encoding"]
        self.cameras = tuple(params["cameras"])
        rates = {"joint_states": params["joint_states_rate_hz"], "wrench": params["wrench_rate_hz"]}
        self.joint_pub = (node.create_publisher(JointState, "joint_states", xm.RELIABLE_QOS)
                          if rates["joint_states"] > 0 else None)
        self.wrench_pub = (node.create_publisher(WrenchStamped, "wrench", xm.RELIABLE_QOS)
                           if rates["wrench"] > 0 else None)
        self._next_s = {"joint_states": 0.0, "wrench": 0.0}
        self._period_s = {k: 1.0 / r for k, r in rates.items() if r > 0}
        # Both timers run on a steady clock, not the node's: with use_sim_time the node
        # clock follows /clock, which stands still while the simulated arm is idle, and the
        # topics must keep coming then (stamps are simulated time all the same).
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        if self._period_s and schedule is not None:
            schedule(min(self._period_s.values()), self.publish_state)
        elif self._period_s:
            node.create_timer(min(self._period_s.values()), self.publish_state,
                              callback_group=MutuallyExclusiveCallbackGroup(), clock=steady)
        self.camera_pubs: dict[str, tuple[Any, Any, Any]] = {}
        if params["camera_rate_hz"] > 0 and self.cameras:
            qos = camera_qos(params["camera_qos"])  # image, depth and camera_info alike
            self.camera_pubs = {
                c: tuple(node.create_publisher(kind, topic, qos)
                         for kind, topic in zip((Image, Image, CameraInfo), xm.camera_topics(c), strict=True))
                for c in self.cameras}
            node.create_timer(1.0 / params["camera_rate_hz"], self.publish_cameras,
                              callback_group=MutuallyExclusiveCallbackGroup(), clock=steady)

    def _state(self):
        driver = self.node.host.driver
        if driver is None or driver.lifecycle_state not in (DriverState.INACTIVE, DriverState.ACTIVE):
            return None, None
        try:
            # never waits for a motion; shares a fresh reading with the /tf tick
            return driver, driver.latest_state(max_age_s=SHARED_READING_S)
        except Exception:  # a driver swap or fault; the next tick retries
            return driver, None

    def _due(self, topic: str, now_s: float) -> bool:
        period = self._period_s.get(topic)
        if period is None or now_s + 1e-3 < self._next_s[topic]:
            return False
        self._next_s[topic] = max(self._next_s[topic] + period, now_s)
        return True

    def publish_state(self) -> None:
        """One reading: joint_states (arm joints + ``gripper_opening`` in m) and the wrench."""
        now_s = time.monotonic()
        joints = self._due("joint_states", now_s) and self.joint_pub.get_subscription_count() > 0
        wrench = self._due("wrench", now_s) and self.wrench_pub.get_subscription_count() > 0
        if not (joints or wrench):
            return
        driver, state = self._state()
        if state is None:
            return
        description = driver.description()
        stamp = self.node.robot_state.stamp(driver, state)  # simulated time for simulated drivers
        if joints:
            names = [*description.arm_joint_names, "gripper_opening"]
            positions = [*np.asarray(state.joint_positions_rad, float), state.gripper_opening_m]
            velocities = [*self.node.robot_state.joint_velocities(driver, state), 0.0]
            self.joint_pub.publish(xm.joint_state_msg(names, positions, velocities, stamp))
        if wrench:
            w = np.asarray(state.wrench_base, float)
            self.wrench_pub.publish(xm.wrench_msg(w[:3], w[3:], description.base_frame, stamp))

    def publish_cameras(self) -> None:
        wanted = tuple(c for c, pubs in self.camera_pubs.items()
                       if any(p.get_subscription_count() > 0 for p in pubs))
        driver, state = self._state()
        if not wanted or state is None:
            return
        try:
            frames = driver.capture(wanted)
        except Exception as exc:
            self.node.get_logger().warning(f"camera capture failed: {exc}", throttle_duration_sec=5.0)
            return
        self.node.robot_state.note_frames(driver, frames, state)  # optical frames on /tf_static
        stamp = self.node.robot_state.stamp(driver, state)
        for name, frame in frames.items():
            xm.publish_rgbd(self.camera_pubs[name], name, frame.rgb, frame.depth_m, frame.K, stamp,
                            self.depth_encoding)
