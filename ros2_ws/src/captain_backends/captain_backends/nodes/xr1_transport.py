"""The XR1 driver's ROS 2 transport: its own rclpy context, node and executor thread
(real-time scheduled where the kernel permits: the joint states it stamps are judged
against 100 ms).

Because the context is private (and installs no signal handlers), the driver works in
any process: next to other rclpy code, inside the harness, in a test. Readings are
pushed from subscription callbacks into the driver's ``StateBuffer``, stamped with the
time the middleware received them (``MessageInfo.received_timestamp``, taken by the DDS
receive thread, which needs no interpreter lock), so a reading that waited in this
process is judged by its true age. ``drain()`` stores every reading the middleware holds
before the driver judges staleness. Commands are published from the caller's thread.
All topic names are relative to the node's namespace (``namespace`` in the
configuration). The domain is ``ROS_DOMAIN_ID``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from functools import partial
from typing import Any

import numpy as np

from captain_backends.core.xr1.config import XR1Config
from captain_backends.core.xr1.state_buffer import StateBuffer
from captain_backends.nodes import xr1_messages as xm


class RosXR1Transport:
    """Implements ``core.xr1.transport.XR1Transport`` over rclpy.

    Args:
        config: the validated XR1 configuration.
    """

    def __init__(self, config: XR1Config) -> None:
        self.config = config
        self._context = None
        self._node = None
        self._executor = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._readings: list[tuple[Any, Any]] = []  # (subscription, callback) pairs drain() empties
        self._drain_guard = None
        self._drain_requests: list[threading.Event] = []

    def start(self, buffer: StateBuffer, timeout_s: float = 30.0) -> None:
        """Create the context, node, subscriptions and publishers in the receive thread
        and spin there; that thread and the context's Fast DDS receive threads are
        real-time scheduled where permitted (``core.realtime``)."""
        self._buffer = buffer
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure),
                                         name=f"{self.config.node_name}_executor", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            raise RuntimeError(f"the XR1 transport did not start within {timeout_s:g} s")
        if failure:
            self._thread.join(timeout=5.0)
            self._thread = None
            raise failure[0]

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        from rclpy.executors import ExternalShutdownException

        from captain_backends.core.realtime import set_realtime, set_realtime_threads, thread_ids

        before = thread_ids()
        try:
            self._create()
        except BaseException as exc:
            failure.append(exc)
            if self._context is not None:
                self._context.try_shutdown()
                self._context = None
            ready.set()
            return
        # this thread and the context's receive threads real-time; Fast DDS's discovery,
        # event and sender threads stay at normal priority (``core.realtime``)
        refused = set_realtime() or set_realtime_threads(thread_ids() - before)[1]
        if refused:
            self._node.get_logger().warning(f"readings are received without real-time priority: {refused}")
        ready.set()
        with contextlib.suppress(ExternalShutdownException):
            self._executor.spin()

    def _create(self) -> None:
        import rclpy
        from geometry_msgs.msg import WrenchStamped
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
        from sensor_msgs.msg import CameraInfo, Image, JointState
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        cfg = self.config
        context = Context()
        rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
        self._context = context
        node = rclpy.create_node(cfg.node_name, namespace=cfg.namespace or "", context=context)

        readings = [(node.create_subscription(JointState, cfg.joint_states_topic, self._on_joint_state,
                                              xm.READING_QOS), self._on_joint_state)]
        if cfg.wrench.topic:
            readings.append((node.create_subscription(WrenchStamped, cfg.wrench.topic, self._on_wrench,
                                                      xm.READING_QOS), self._on_wrench))
        self._readings = readings
        self._drain_guard = node.create_guard_condition(self._on_drain)
        for cam in cfg.cameras:
            node.create_subscription(Image, cam.image_topic, partial(self._on_image, cam.name, "rgb"), xm.IMAGE_QOS)
            node.create_subscription(Image, cam.depth_topic, partial(self._on_image, cam.name, "depth"),
                                     xm.IMAGE_QOS)
            node.create_subscription(CameraInfo, cam.camera_info_topic, partial(self._on_info, cam.name),
                                     xm.READING_QOS)
        if cfg.command.interface == "forward_position":
            self._arm_pub = node.create_publisher(Float64MultiArray, cfg.command.forward_position_topic,
                                                  xm.RELIABLE_QOS)
        else:
            self._arm_pub = node.create_publisher(JointTrajectory, cfg.command.joint_trajectory_topic,
                                                  xm.RELIABLE_QOS)
        self._gripper_pub = (node.create_publisher(Float64MultiArray, cfg.gripper.command_topic, xm.RELIABLE_QOS)
                             if cfg.gripper is not None else None)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        with self._lock:
            self._node, self._executor = node, executor

    # ----------------------------------------------------------------- callbacks
    def _buffer_time(self, stamp_ns: int) -> float | None:
        """A middleware time stamp (system clock, ns; 0: not provided) on the buffer's clock."""
        age_s = xm.stamp_age_s(stamp_ns)
        return None if age_s is None else self._buffer.clock() - age_s

    def _on_joint_state(self, msg, info) -> None:
        self._buffer.push_joint_state(msg.name, msg.position, msg.velocity,
                                      received_s=self._buffer_time(info["received_timestamp"]),
                                      sent_s=self._buffer_time(info["source_timestamp"]))

    def _on_wrench(self, msg, info) -> None:
        f, t = msg.wrench.force, msg.wrench.torque
        self._buffer.push_wrench((f.x, f.y, f.z), (t.x, t.y, t.z), msg.header.frame_id,
                                 received_s=self._buffer_time(info["received_timestamp"]))

    def _on_drain(self) -> None:
        """Receive thread: store every joint state and wrench the middleware holds, then
        release the ``drain()`` calls that asked before."""
        with self._lock:
            requests, self._drain_requests = self._drain_requests, []
        for subscription, callback in self._readings:
            with subscription.handle:
                while (taken := subscription.handle.take_message(subscription.msg_type, subscription.raw)) is not None:
                    callback(*taken)
        for request in requests:
            request.set()

    def drain(self, timeout_s: float) -> bool:
        """Store every reading the middleware has received so far (in the receive thread);
        False when that did not happen within ``timeout_s`` or the transport is stopped."""
        done = threading.Event()
        with self._lock:
            if self._node is None or self._drain_guard is None:
                return False
            self._drain_requests.append(done)
            self._drain_guard.trigger()
        return done.wait(timeout_s)

    def _on_image(self, camera: str, kind: str, msg) -> None:
        self._buffer.push_image(camera, kind, xm.raw_image(msg))

    def _on_info(self, camera: str, msg) -> None:
        self._buffer.push_camera_info(camera, msg.k, msg.width, msg.height)

    # ------------------------------------------------------------------ commands
    def publish_arm(self, positions_rad: np.ndarray, time_from_start_s: float) -> None:
        """Publish arm targets as Float64MultiArray or a one-point JointTrajectory."""
        cfg = self.config
        if cfg.command.interface == "forward_position":
            msg = xm.positions_msg(positions_rad)
        else:
            msg = xm.trajectory_msg(cfg.arm.joint_names, positions_rad, time_from_start_s)
        with self._lock:
            if self._node is not None:
                self._arm_pub.publish(msg)

    def publish_gripper(self, positions: np.ndarray) -> None:
        """Publish gripper joint targets (Float64MultiArray)."""
        with self._lock:
            if self._node is not None and self._gripper_pub is not None:
                self._gripper_pub.publish(xm.positions_msg(positions))

    def command_subscriber_count(self) -> int:
        """Subscriptions matched by the arm command publisher."""
        with self._lock:
            return self._arm_pub.get_subscription_count() if self._node is not None else 0

    def where(self) -> str:
        """The node's namespace and the domain, for error messages."""
        ns = self._node.get_namespace() if self._node is not None else (self.config.namespace or "/")
        return f"namespace {ns!r}, ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}"

    def stop(self) -> None:
        """Stop spinning, destroy the node and shut the private context down."""
        with self._lock:
            node, executor, context, thread = self._node, self._executor, self._context, self._thread
            self._node = self._executor = self._context = self._thread = self._drain_guard = None
            self._readings = []
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
        if thread is not None:
            thread.join(timeout=5.0)
        if node is not None:
            node.destroy_node()
        if context is not None:
            context.try_shutdown()
