"""The robot side of the XR1 topics, shared by the fake hardware and the twin.

What a ros2_control bringup plus camera drivers provide, topic for topic:

* subscribes the forward position controller's ``Float64MultiArray`` commands, the
  joint trajectory controller's ``JointTrajectory`` and the gripper controller's
  ``Float64MultiArray`` (a command of the wrong length is ignored with a warning, as
  forward_command_controller does);
* publishes ``JointState`` (arm and gripper joints), ``WrenchStamped``, and per camera
  colour ``Image`` (rgb8), registered depth ``Image`` (16UC1 mm or 32FC1 m) and
  ``CameraInfo``.

Parameters common to both nodes (dynamic, settable through the standard parameter
services, e.g. ``rclpy.parameter_client.AsyncParameterClient``; a value that cannot be
applied is refused with the reason):

* ``publish_joint_states`` (bool, default true): false stops the joint_states stream
  (to exercise the driver's stale-state fault);
* ``injected_force_n`` (double[3], N, default [0, 0, 0]): added to the published force
  (to exercise the emergency limit); exactly three finite values.

Every other parameter of these nodes is either dynamic (its node says so, with its
range) or read once at start and declared read-only (``read_only``): ``set_parameters``
refuses a change of it ("Trying to set a read-only parameter") instead of accepting and
ignoring it.

``run_robot_node`` hosts such a node: it spins the executor in a thread, runs the
node's periodic step on the wall clock in the main thread (real-time scheduled where
permitted, as a ros2_control controller manager runs its loop), prints ``READY`` once the
topics exist, and exits cleanly on SIGINT/SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node

from captain_backends.core.xr1.config import XR1Config, load_config
from captain_backends.nodes import xr1_messages as xm


def read_only(description: str) -> ParameterDescriptor:
    """The descriptor of a parameter read once at start: ``set_parameters`` refuses a
    later change with "Trying to set a read-only parameter" (it would be ignored)."""
    return ParameterDescriptor(description=f"{description} (read at start; read-only)", read_only=True)


def dynamic_range(description: str, low: float, high: float) -> ParameterDescriptor:
    """The descriptor of a dynamic double parameter in ``[low, high]`` (rclpy refuses a
    value outside the range with the range in the reason)."""
    return ParameterDescriptor(description=f"{description} (dynamic)", floating_point_range=[
        FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)])


def refused(reason: str) -> SetParametersResult:
    """A ``set_parameters`` refusal with its reason."""
    return SetParametersResult(successful=False, reason=reason)


def declare_config(node: Node) -> XR1Config:
    """Declare ``config_path`` (read-only; default: the packaged xr1.yaml) and load it."""
    path = node.declare_parameter("config_path", "", read_only(
        "XR1 configuration file; empty: the packaged config/xr1.yaml")).value
    return load_config(path or None)


class XR1RobotIO:
    """Publishers, subscriptions and fault-injection parameters of the robot side.

    Args:
        node: the hosting node (its namespace applies to every topic).
        config: the XR1 configuration both ends share.
        depth_encoding: ``"16UC1"`` (mm) or ``"32FC1"`` (m).
    """

    def __init__(self, node: Node, config: XR1Config, depth_encoding: str = "32FC1") -> None:
        from geometry_msgs.msg import WrenchStamped
        from sensor_msgs.msg import CameraInfo, Image, JointState
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        self.node = node
        self.config = config
        self.depth_encoding = depth_encoding
        self._lock = threading.Lock()
        self._arm_target: np.ndarray | None = None
        self._gripper_target: np.ndarray | None = None
        self.arm_commands_received = 0
        self.arm_names = tuple(config.arm.joint_names)
        self.gripper_names = tuple(config.gripper.joint_names) if config.gripper is not None else ()
        node.declare_parameter("publish_joint_states", True, ParameterDescriptor(
            description="false stops the joint_states stream (dynamic)"))
        node.declare_parameter("injected_force_n", [0.0, 0.0, 0.0], ParameterDescriptor(
            description="force added to the published wrench, [x, y, z] N in the wrench frame (dynamic)"))
        initial = self._check_parameters([node.get_parameter("injected_force_n")])
        if not initial.successful:
            raise ValueError(initial.reason)
        node.add_on_set_parameters_callback(self._check_parameters)

        node.create_subscription(Float64MultiArray, config.command.forward_position_topic, self._on_positions,
                                 xm.RELIABLE_QOS)
        node.create_subscription(JointTrajectory, config.command.joint_trajectory_topic, self._on_trajectory,
                                 xm.RELIABLE_QOS)
        if config.gripper is not None:
            node.create_subscription(Float64MultiArray, config.gripper.command_topic, self._on_gripper,
                                     xm.RELIABLE_QOS)
        self._joint_pub = node.create_publisher(JointState, config.joint_states_topic, xm.RELIABLE_QOS)
        self._wrench_pub = (node.create_publisher(WrenchStamped, config.wrench.topic, xm.RELIABLE_QOS)
                            if config.wrench.topic else None)
        self._camera_pubs = {
            c.name: (node.create_publisher(Image, c.image_topic, xm.IMAGE_QOS),
                     node.create_publisher(Image, c.depth_topic, xm.IMAGE_QOS),
                     node.create_publisher(CameraInfo, c.camera_info_topic, xm.RELIABLE_QOS))
            for c in config.cameras}

    @staticmethod
    def _check_parameters(params: list) -> SetParametersResult:
        """Refuse an ``injected_force_n`` that is not three finite values (it would be ignored)."""
        for p in params:
            if p.name == "injected_force_n":
                values = list(p.value or [])
                if len(values) != 3 or not all(np.isfinite(values)):
                    return refused(f"injected_force_n must be three finite values [x, y, z] in N, not {values}")
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ commands
    def _on_positions(self, msg) -> None:
        if len(msg.data) != len(self.arm_names):
            self.node.get_logger().warning(
                f"ignored a command of {len(msg.data)} values; expected {len(self.arm_names)} "
                f"({', '.join(self.arm_names)})", throttle_duration_sec=1.0)
            return
        with self._lock:
            self._arm_target = np.asarray(msg.data, dtype=float)
            self.arm_commands_received += 1

    def _on_trajectory(self, msg) -> None:
        target = xm.trajectory_target(msg, self.arm_names)
        if target is None:
            self.node.get_logger().warning("ignored a trajectory without points or missing arm joints",
                                           throttle_duration_sec=1.0)
            return
        with self._lock:
            self._arm_target = target
            self.arm_commands_received += 1

    def _on_gripper(self, msg) -> None:
        if len(msg.data) != len(self.gripper_names):
            self.node.get_logger().warning(
                f"ignored a gripper command of {len(msg.data)} values; expected {len(self.gripper_names)}",
                throttle_duration_sec=1.0)
            return
        with self._lock:
            self._gripper_target = np.asarray(msg.data, dtype=float)

    def arm_target(self) -> np.ndarray | None:
        """The latest arm command (configured joint order), None before the first."""
        with self._lock:
            return None if self._arm_target is None else self._arm_target.copy()

    def gripper_target(self) -> np.ndarray | None:
        """The latest gripper command (configured joint order), None before the first."""
        with self._lock:
            return None if self._gripper_target is None else self._gripper_target.copy()

    # ---------------------------------------------------------------- readings
    def _stamp(self):
        return self.node.get_clock().now().to_msg()

    def publish_joint_states(self, names: Sequence[str], positions: Sequence[float],
                             velocities: Sequence[float]) -> bool:
        """Publish a JointState unless ``publish_joint_states`` is false; True if sent."""
        if not self.node.get_parameter("publish_joint_states").value:
            return False
        self._joint_pub.publish(xm.joint_state_msg(names, positions, velocities, self._stamp()))
        return True

    def publish_wrench(self, force_n: Sequence[float], torque_nm: Sequence[float], frame_id: str) -> None:
        """Publish a WrenchStamped with ``injected_force_n`` added to the force."""
        if self._wrench_pub is None:
            return
        injected = self.node.get_parameter("injected_force_n").get_parameter_value().double_array_value
        force = np.asarray(force_n, dtype=float) + np.asarray(injected, dtype=float)  # 3 values (checked on set)
        self._wrench_pub.publish(xm.wrench_msg(force, torque_nm, frame_id, self._stamp()))

    def publish_camera(self, name: str, rgb: np.ndarray, depth_m: np.ndarray, K: np.ndarray) -> None:
        """Publish colour, registered depth and camera_info of one camera."""
        xm.publish_rgbd(self._camera_pubs[name], name, rgb, depth_m, K, self._stamp(), self.depth_encoding)


#: a periodic loop that wakes this late or whose step takes this long says so (s)
OVERRUN_REPORT_S = 0.05


def run_periodic(period_s: float, step: Callable[[int], None], stop: threading.Event,
                 max_catch_up: int = 5) -> None:
    """Call ``step(n)`` once per ``period_s`` of wall clock until ``stop`` is set; ``n``
    is the number of periods that elapsed (more than 1 after an overrun, at most
    ``max_catch_up``; beyond that the schedule is re-phased and time is dropped).

    The calling thread asks for real-time scheduling (``core.realtime``): this loop is the
    robot's hardware side, whose joint states the driver judges against 100 ms."""
    from captain_backends.core.realtime import set_realtime

    set_realtime()
    next_tick = time.monotonic() + period_s
    last_report = -np.inf
    while not stop.is_set():
        delay = next_tick - time.monotonic()
        if delay > 0 and stop.wait(delay):
            break
        now = time.monotonic()
        late_s = now - next_tick
        n = 1 + int(late_s // period_s)
        if n > max_catch_up:
            next_tick = now + period_s
            n = max_catch_up
        else:
            next_tick += n * period_s
        step(n)
        took_s = time.monotonic() - now
        if max(late_s, took_s) > OVERRUN_REPORT_S and now - last_report > 1.0:
            last_report = now  # as ros2_control reports an overrun: this loop is the robot's clock
            print(f"periodic loop overrun: woke {1000 * late_s:.0f} ms late, step took {1000 * took_s:.0f} ms "
                  f"(period {1000 * period_s:.0f} ms)", file=sys.stderr, flush=True)


def run_robot_node(make_node: Callable[[], Node], args: list[str] | None = None) -> int:
    """Host a robot-side node: ``make_node`` builds it (its ``period_s`` attribute and
    ``step(n)`` method are run on the wall clock), prints READY, returns on a signal."""
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=sys.argv if args is None else args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node = make_node()
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException):
            executor.spin()

    thread = threading.Thread(target=spin, name="executor", daemon=True)
    thread.start()
    print("READY", flush=True)
    try:
        run_periodic(node.period_s, node.step, stop)
    finally:
        close = getattr(node, "close", None)
        if close is not None:
            close()
        executor.shutdown(timeout_sec=2.0)
        thread.join(timeout=5.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
