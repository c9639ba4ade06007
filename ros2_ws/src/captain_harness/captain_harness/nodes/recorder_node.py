"""``recorder``: records a running stack's topics into a rosbag2 bag (MCAP storage), the same
format as the episode recordings (``captain_harness.core.episode.mcap_log``), so
``ros2 bag play``, ``ros2 bag info`` and Foxglove open it.

Messages are stored as they arrive on the wire (CDR, subscribed raw, never re-encoded).
Bag timestamps are the stack's simulated time when a ``/clock`` is published (the sim
stack; messages that arrive before the first /clock, such as the latched ones, wait up to
2 s for it), else the wall clock, and strictly increase. Topics (relative ones in the node's
namespace): ``/tf``, ``/tf_static`` and ``robot_description`` (latched), ``/clock``,
``joint_states``, ``wrench``, ``diagnostics`` and, per camera in ``cameras``,
``<camera>/color/image_raw`` and ``<camera>/color/camera_info`` (sensor-data QoS, which
matches best-effort and reliable publishers alike), and the episode runner's
``captain/requests``, ``captain/cells`` and ``captain/receipts`` (``episode_topics``).

    python -m captain_harness.nodes.recorder_node --ros-args -p path:=runs/stack_bag
    captain bringup sim --record runs/stack_bag          # the same, next to the stack

Parameters (read-only): ``path`` (string, the bag folder; must not exist), ``cameras``
(string array, default: the policy API's two cameras), ``time_source`` (``clock``: bag
times from ``/clock``, messages before the first one wait for it; ``wall``; ``auto``
(default): ``/clock`` when one arrives within 2 s of the first message).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

from captain_harness.core.episode.mcap_log import RosbagWriter
from captain_harness.nodes.episode_topics import EPISODE_QOS
from captain_harness.nodes.episode_topics import TOPICS as EPISODE_TOPICS

_LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
_CAMERAS = ["agentview", "robot0_eye_in_hand"]
#: Messages wait this long after the first one (wall clock, s) for a /clock before the wall
#: clock stamps them.
CLOCK_WAIT_S = 2.0


def _topics(cameras: list[str]) -> list[tuple[str, str, Any]]:
    """(topic, message type, QoS) of everything recorded."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo, Image, JointState
    from std_msgs.msg import String
    from tf2_msgs.msg import TFMessage

    topics = [("/tf", TFMessage, 100), ("/tf_static", TFMessage, _LATCHED), ("robot_description", String, _LATCHED),
              ("/clock", Clock, qos_profile_sensor_data), ("joint_states", JointState, qos_profile_sensor_data),
              ("wrench", WrenchStamped, qos_profile_sensor_data), ("diagnostics", DiagnosticArray, 10)]
    for camera in cameras:
        topics += [(f"{camera}/color/image_raw", Image, qos_profile_sensor_data),
                   (f"{camera}/color/camera_info", CameraInfo, qos_profile_sensor_data)]
    topics += [(topic, String, EPISODE_QOS) for topic in EPISODE_TOPICS]  # the episode runner's requests
    return topics


def _msgtype(cls: Any) -> str:
    module = cls.__module__.split(".")
    return f"{module[0]}/{module[1]}/{cls.__name__}"


class RecorderNode(Node):
    """See the module docstring."""

    def __init__(self, node_name: str = "recorder", **kwargs: Any) -> None:
        from rcl_interfaces.msg import ParameterDescriptor

        super().__init__(node_name, **kwargs)
        ro = ParameterDescriptor(read_only=True)
        path = str(self.declare_parameter("path", "", ro).value)
        cameras = list(self.declare_parameter("cameras", _CAMERAS, ro).value)
        self.time_source = str(self.declare_parameter("time_source", "auto", ro).value)
        if self.time_source not in ("auto", "clock", "wall"):
            raise ValueError(f"recorder: time_source must be auto, clock or wall, not {self.time_source!r}")
        if not path:
            raise ValueError("recorder: set the parameter 'path' to the bag folder to write (it must not exist)")
        self.bag = RosbagWriter(path)
        self.lock = threading.Lock()
        self.clock_ns: int | None = None
        self._pending: list[tuple[str, str, bytes]] = []
        self._first_s: float | None = None  # wall time of the first message
        for topic, cls, qos in _topics(cameras):
            name = self.resolve_topic_name(topic)
            msgtype = _msgtype(cls)
            self.create_subscription(cls, topic, lambda data, n=name, t=msgtype: self._on_message(n, t, data), qos,
                                     raw=True)
        self.get_logger().info(f"recording into {path}")

    def _on_message(self, topic: str, msgtype: str, data: bytes) -> None:
        with self.lock:
            if self.bag is None:
                return
            if msgtype == "rosgraph_msgs/msg/Clock":
                clock = self.bag.typestore.deserialize_cdr(data, msgtype).clock
                self.clock_ns = clock.sec * 1_000_000_000 + clock.nanosec
            if self._first_s is None:
                self._first_s = time.monotonic()
            waiting = self.time_source == "clock" or (self.time_source == "auto"
                                                     and time.monotonic() - self._first_s < CLOCK_WAIT_S)
            if self.clock_ns is None and waiting:
                self._pending.append((topic, msgtype, data))  # until we know whether time is simulated
                return
            self._flush()
            self._write(topic, msgtype, data)

    def _write(self, topic: str, msgtype: str, data: bytes) -> None:
        use_clock = self.clock_ns is not None and self.time_source != "wall"
        t_ns = self.clock_ns if use_clock else time.time_ns()
        self.bag.write_cdr(topic, msgtype, data, t_ns, latched=topic.endswith(("/tf_static", "robot_description")))

    def _flush(self) -> None:
        for item in self._pending:
            self._write(*item)
        self._pending.clear()

    def close(self) -> None:
        """Finish the bag (idempotent)."""
        with self.lock:
            if self.bag is not None:
                self._flush()
                self.bag.close()
                self.get_logger().info(f"recorded {self.bag.count} messages into {self.bag.path}")
                self.bag = None


def main(args: list[str] | None = None) -> int:
    """Console entry point: record until SIGINT/SIGTERM, then finish the bag."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=sys.argv if args is None else args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node = RecorderNode()
    executor = SingleThreadedExecutor()  # one callback at a time: the bag is written in arrival order
    executor.add_node(node)
    print(f"RECORDING {node.bag.path}", flush=True)
    try:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)
    finally:
        node.close()
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
