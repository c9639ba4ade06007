"""The harness's robot on the topics ROS tools expect, as robot_state_publisher and a
simulator's clock would publish them (owned by the harness node, which holds the driver):

* ``robot_description`` (std_msgs/String, latched: transient local, depth 1): a kinematic
  URDF of the driver's model (``captain_harness.core.robot_frames``), published again when
  an episode swaps the driver (e.g. tabletop -> LIBERO);
* ``/tf_static`` (tf2_msgs/TFMessage, latched): fixed links, the TCP ``captain_tcp`` and,
  once a frame of theirs was captured, the camera optical frames
  ``<camera>_optical_frame`` (the wrist camera on the flange, others on the base);
* ``/tf`` (tf2_msgs/TFMessage): the links moved by the arm joints, at ``rate_hz``, while
  anyone subscribes (a headless stack's harness then spends nothing on it: ~8 % of its
  samples during episodes);
* ``/clock`` (rosgraph_msgs/Clock), simulated drivers only: simulated time, continued
  across driver swaps so it never runs backwards.

Stamps: simulated drivers stamp with that simulated time (so a recording replays at the
simulated speed; ``/clock`` advances only while the simulation steps), real drivers with
the node's clock. Timers run on the steady wall clock, so publishing goes on while the
simulation stands still, but then ``/tf`` and ``/clock`` only every ``IDLE_REPUBLISH_S``
(``joint_states`` and ``wrench`` keep their rates): the same stamp again
tells a listener nothing (tf2 drops a transform it already has for that time, with a
TF_REPEATED_DATA warning), and 50 repeats a second cost every ``use_sim_time`` node of the
stack CPU for each (~15 % of a core for an idle sim stack).

With ``use_sim_time`` the harness's own node clock follows the ``/clock`` it publishes: it
is set directly with each ``/clock`` message, and the subscription rclpy's time source made
to the harness's own topic is removed while a simulated driver publishes (each message
woke the node's executor, about 1 s of CPU in 20 s of episodes); a real driver gets the
subscription back (its clock then follows another node's ``/clock``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time as RosTime
from rosgraph_msgs.msg import Clock as ClockMsg
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from captain_backends.core.driver import WRIST_CAMERA, LifecycleState
from captain_harness.core.geometry import matrix_to_quat

LATCHED_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
TF_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
CLOCK_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
#: A simulated arm whose time has not advanced for this long (wall clock, s) is at rest:
#: its joint_states velocities are zero.
IDLE_AFTER_S = 0.05
#: Publishers take a reading at most this old (wall clock, s) instead of reading a simulated
#: driver again (``LockedDriver.latest_state``): the ticks of ``/tf`` and ``joint_states``
#: share one reading, and during a motion they take the motion loop's.
SHARED_READING_S = 0.01
#: While simulated time stands still, ``/tf`` and ``/clock`` repeat their last stamp only
#: this often (wall clock, s), for listeners that join then.
IDLE_REPUBLISH_S = 1.0


def time_msg(t_s: float) -> Time:
    """A builtin_interfaces/Time of ``t_s`` seconds."""
    t_ns = max(0, round(t_s * 1e9))
    return Time(sec=t_ns // 1_000_000_000, nanosec=t_ns % 1_000_000_000)


def tf_msg(transforms: list[tuple[str, str, np.ndarray]], stamp: Time, prefix: str = "") -> TFMessage:
    """A TFMessage of ``(parent, child, T_parent_child)`` triples (4x4 poses, metres)."""
    out = []
    for parent, child, T in transforms:
        msg = TransformStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = prefix + parent
        msg.child_frame_id = prefix + child
        t, r = msg.transform.translation, msg.transform.rotation
        t.x, t.y, t.z = (float(v) for v in T[:3, 3])
        r.w, r.x, r.y, r.z = (float(v) for v in matrix_to_quat(T[:3, :3]))
        out.append(msg)
    return TFMessage(transforms=out)


class RobotStatePublisher:
    """See the module docstring.

    Args:
        node: the harness node (``node.host.driver`` is the driver in use).
        rate_hz: ``/tf`` (and ``/clock``) rate, wall clock, while the simulation steps (a
            real driver: always); 0 publishes only the latched topics.
        frame_prefix: prepended to every frame name (several robots on one ``/tf``).
        schedule: ``schedule(period_s, fn)`` runs the ``/tf`` tick every ``period_s`` (e.g.
            ``periodic.PeriodicCalls.add``, outside the executor); None: a node timer.
    """

    def __init__(self, node: Any, rate_hz: float = 50.0, frame_prefix: str = "",
                 schedule: Callable[[float, Callable[[], None]], None] | None = None) -> None:
        self.node = node
        self.prefix = frame_prefix
        self.lock = threading.Lock()
        self.description_pub = node.create_publisher(String, "robot_description", LATCHED_QOS)
        self.static_pub = node.create_publisher(TFMessage, "/tf_static", LATCHED_QOS)
        self.tf_pub = node.create_publisher(TFMessage, "/tf", TF_QOS)
        self.clock_pub = node.create_publisher(ClockMsg, "/clock", CLOCK_QOS)
        self._driver: Any = None
        self._tree: Any = None
        self._simulated = False
        self._offset_s = 0.0
        self._last_sim_s = 0.0
        self._last_driver_s: float | None = None
        self._changed_wall_s = time.monotonic()
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._clock_sub_removed = False  # the node's own /clock subscription (use_sim_time)
        self._published: tuple[int, int, float] | None = None  # simulated stamp (sec, ns), wall s
        if rate_hz > 0 and schedule is not None:
            schedule(1.0 / rate_hz, self.publish)
        elif rate_hz > 0:
            node.create_timer(1.0 / rate_hz, self.publish, callback_group=MutuallyExclusiveCallbackGroup(),
                              clock=self._steady)

    # ------------------------------------------------------------------ readings
    def _reading(self) -> tuple[Any, Any]:
        driver = self.node.host.driver
        if driver is None or driver.lifecycle_state not in (LifecycleState.INACTIVE, LifecycleState.ACTIVE):
            return None, None
        try:
            # never waits for a motion; a reading of this tick's other publisher is reused
            state = driver.latest_state(max_age_s=SHARED_READING_S)
        except Exception:  # a driver swap or fault: the next tick retries
            return None, None
        if state is None:
            return None, None
        with self.lock:
            if driver is not self._driver:
                self._switch(driver, state)
        return driver, state

    def _switch(self, driver: Any, state: Any) -> None:
        """A new driver: its tree, its description and static frames, and the clock offset
        that continues simulated time from where the previous driver left it."""
        from captain_harness.core.robot_frames import FrameTree

        self._driver = driver
        self._simulated = bool(getattr(driver, "simulated", False))
        if not self._simulated and self._clock_sub_removed:
            self._resubscribe_clock()
        self._offset_s = self._last_sim_s - float(state.time_s) if self._simulated else 0.0
        self._last_driver_s = None
        try:
            self._tree = FrameTree(driver.description())
        except Exception as exc:  # stamps and /clock go on; no TF for a model that cannot be read
            self._tree = None
            self.node.get_logger().error(f"no robot_description or TF: {type(exc).__name__}: {exc}")
            return
        self.description_pub.publish(String(data=self._tree.urdf()))
        self._publish_static()

    def _publish_static(self) -> None:
        stamp = time_msg(self._last_sim_s) if self._simulated else self.node.get_clock().now().to_msg()
        self.static_pub.publish(tf_msg(self._tree.static_transforms(), stamp, self.prefix))

    def stamp(self, driver: Any, state: Any) -> Time:
        """The stamp of a reading of ``driver``: simulated time for simulated drivers (never
        earlier than a stamp already given), the node's clock otherwise."""
        with self.lock:
            if driver is not self._driver:
                self._switch(driver, state)
            if not self._simulated:
                return self.node.get_clock().now().to_msg()
            t_s = max(self._last_sim_s, self._offset_s + float(state.time_s))
            if self._last_driver_s is None or float(state.time_s) != self._last_driver_s:
                self._changed_wall_s = time.monotonic()
                self._last_driver_s = float(state.time_s)
            self._last_sim_s = t_s
            return time_msg(t_s)

    def at_rest(self, driver: Any) -> bool:
        """True when ``driver`` is simulated and its time has stood still for
        ``IDLE_AFTER_S`` (nothing steps it, so nothing moves)."""
        with self.lock:
            return (driver is self._driver and self._simulated
                    and time.monotonic() - self._changed_wall_s > IDLE_AFTER_S)

    def joint_velocities(self, driver: Any, state: Any) -> np.ndarray:
        """The arm's joint velocities (rad/s) to publish: zeros for a simulated arm at rest."""
        v = np.asarray(state.joint_velocities_rad_s, float)
        return np.zeros_like(v) if self.at_rest(driver) else v

    # ----------------------------------------------------------------- publishing
    def publish(self) -> None:
        """One tick: ``/tf`` of the current arm configuration and ``/clock`` (never raises:
        a model that cannot be read is logged and retried on the next driver)."""
        try:
            driver, state = self._reading()
            if state is None:
                return
            stamp = self.stamp(driver, state)
            with self.lock:
                tree, simulated = self._tree, self._simulated
                if simulated and self._repeat_too_soon(stamp):
                    return
                # no one listening on /tf (a headless rollout stack): no kinematics, no message
                wanted = tree is not None and self.tf_pub.get_subscription_count() > 0
                transforms = tree.moving_transforms(state.joint_positions_rad) if wanted else None
        except Exception as exc:
            self.node.get_logger().error(f"robot state publisher: {type(exc).__name__}: {exc}",
                                         throttle_duration_sec=10.0)
            return
        if transforms is not None:
            self.tf_pub.publish(tf_msg(transforms, stamp, self.prefix))
        if simulated:
            self.clock_pub.publish(ClockMsg(clock=stamp))
            self._follow_own_clock(stamp)

    def _repeat_too_soon(self, stamp: Time) -> bool:
        """True when ``stamp`` is the simulated time last published and that was less than
        ``IDLE_REPUBLISH_S`` ago (the tick is skipped); otherwise notes this publication."""
        now_s = time.monotonic()
        key = (stamp.sec, stamp.nanosec)
        last = self._published
        if last is not None and last[:2] == key and now_s - last[2] < IDLE_REPUBLISH_S:
            return True
        self._published = (*key, now_s)
        return False

    def _follow_own_clock(self, stamp: Time) -> None:
        """With ``use_sim_time``: the node clock takes ``stamp`` (the ``/clock`` just sent),
        and the time source's subscription to that topic goes (module docstring)."""
        clock = self.node.get_clock()
        if not clock.ros_time_is_active:  # use_sim_time off
            return
        for sub in [s for s in self.node.subscriptions if s.topic_name == "/clock"]:
            self.node.destroy_subscription(sub)  # made again if use_sim_time is turned off and on
            self._clock_sub_removed = True
        clock.set_ros_time_override(RosTime.from_msg(stamp))

    def _resubscribe_clock(self) -> None:
        """Give rclpy's time source its ``/clock`` subscription back (a real driver: the
        harness publishes no ``/clock``), by setting ``use_sim_time`` off and on again."""
        self._clock_sub_removed = False
        if self.node.get_clock().ros_time_is_active:
            self.node.set_parameters([Parameter("use_sim_time", value=False)])
            self.node.set_parameters([Parameter("use_sim_time", value=True)])

    def note_frames(self, driver: Any, frames: dict[str, Any], state: Any) -> None:
        """Camera frames just captured from ``driver`` (taken at ``state``): their optical
        frames join ``/tf_static`` (published again when a mount changed)."""
        with self.lock:
            if driver is not self._driver or self._tree is None or state is None:
                return
            changed = False
            for name, frame in frames.items():
                parent = self._tree.description.flange_frame if name == WRIST_CAMERA else ""
                changed |= self._tree.set_camera(name, frame.T_base_camera, state.joint_positions_rad, parent)
            if changed:
                self._publish_static()
