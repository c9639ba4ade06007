"""Conversions between the XR1 topics' standard messages and plain values.

Shared by the driver's transport and the robot-side nodes (fake hardware, twin), so
both ends of every topic agree on layout: Float64MultiArray commands carry the joints in
the configured order; JointTrajectory commands name their joints; images use the
encodings of ``core.xr1.images``; camera_info carries the colour image's intrinsics.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import WrenchStamped
from rclpy.qos import QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from captain_backends.core.xr1.images import RawImage, encode_depth, encode_rgb

#: Readings: best effort, so the driver subscribes to reliable and best-effort publishers alike.
READING_QOS = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.BEST_EFFORT,
                         history=QoSHistoryPolicy.KEEP_LAST)
#: Images: best effort, only the latest matters.
IMAGE_QOS = QoSProfile(depth=2, reliability=QoSReliabilityPolicy.BEST_EFFORT, history=QoSHistoryPolicy.KEEP_LAST)
#: Commands and the robot side's state publishers: reliable, as ros2_control's controllers use.
RELIABLE_QOS = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE, history=QoSHistoryPolicy.KEEP_LAST)


def duration_msg(seconds: float) -> Duration:
    """A builtin_interfaces/Duration."""
    sec = int(np.floor(seconds))
    return Duration(sec=sec, nanosec=round((seconds - sec) * 1e9) % 1_000_000_000)


def joint_state_msg(names: Sequence[str], positions: Sequence[float], velocities: Sequence[float],
                    stamp: Time) -> JointState:
    """A JointState (positions rad or m, velocities rad/s or m/s)."""
    msg = JointState()
    msg.header.stamp = stamp
    msg.name = list(names)
    msg.position = [float(v) for v in positions]
    msg.velocity = [float(v) for v in velocities]
    return msg


def wrench_msg(force_n: Sequence[float], torque_nm: Sequence[float], frame_id: str, stamp: Time) -> WrenchStamped:
    """A WrenchStamped (N, N·m) expressed in ``frame_id``."""
    msg = WrenchStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    f, t = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z = (float(v) for v in force_n)
    t.x, t.y, t.z = (float(v) for v in torque_nm)
    return msg


def image_msg(raw: RawImage, frame_id: str, stamp: Time) -> Image:
    """An Image from a ``RawImage``."""
    msg = Image()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height, msg.width, msg.step = raw.height, raw.width, raw.step
    msg.encoding = raw.encoding
    msg.is_bigendian = int(raw.is_bigendian)
    msg.data = bytes(raw.data)
    return msg


def raw_image(msg: Image) -> RawImage:
    """The pixel fields of an Image (no copy of the data beyond rclpy's own)."""
    return RawImage(msg.encoding, int(msg.height), int(msg.width), int(msg.step), bool(msg.is_bigendian),
                    memoryview(msg.data))


def camera_info_msg(K: np.ndarray, width_px: int, height_px: int, frame_id: str, stamp: Time) -> CameraInfo:
    """A CameraInfo for an undistorted pinhole camera with intrinsics ``K`` (pixels)."""
    K = np.asarray(K, dtype=float)
    msg = CameraInfo()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.width, msg.height = int(width_px), int(height_px)
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = K.reshape(-1).tolist()
    msg.r = np.eye(3).reshape(-1).tolist()
    P = np.zeros((3, 4))
    P[:, :3] = K
    msg.p = P.reshape(-1).tolist()
    return msg


def camera_topics(base: str) -> tuple[str, str, str]:
    """The colour, registered depth and camera_info topics of a camera whose topics start
    with ``base`` (``<base>/color/image_raw``, ``<base>/aligned_depth_to_color/image_raw``,
    ``<base>/color/camera_info``)."""
    return f"{base}/color/image_raw", f"{base}/aligned_depth_to_color/image_raw", f"{base}/color/camera_info"


def publish_rgbd(publishers: Sequence, camera: str, rgb: np.ndarray, depth_m: np.ndarray, K: np.ndarray,
                 stamp: Time, depth_encoding: str = "32FC1") -> None:
    """Publish one camera frame: camera_info, registered depth (``depth_encoding``: ``32FC1`` m
    or ``16UC1`` mm) and colour, all stamped ``stamp`` in ``<camera>_optical_frame``.

    Args:
        publishers: the (colour, depth, camera_info) publishers of the camera.
    """
    image_pub, depth_pub, info_pub = publishers
    optical = f"{camera}_optical_frame"
    h, w = rgb.shape[:2]
    info_pub.publish(camera_info_msg(K, w, h, optical, stamp))
    depth_pub.publish(image_msg(encode_depth(depth_m, depth_encoding), optical, stamp))
    image_pub.publish(image_msg(encode_rgb(rgb), optical, stamp))


def positions_msg(positions: Sequence[float]) -> Float64MultiArray:
    """A forward-controller command: one value per joint, configured order."""
    msg = Float64MultiArray()
    msg.data = [float(v) for v in positions]
    return msg


def trajectory_msg(names: Sequence[str], positions: Sequence[float], time_from_start_s: float) -> JointTrajectory:
    """A one-point JointTrajectory reaching ``positions`` after ``time_from_start_s``
    (header stamp zero: start on receipt)."""
    msg = JointTrajectory()
    msg.joint_names = list(names)
    point = JointTrajectoryPoint()
    point.positions = [float(v) for v in positions]
    point.time_from_start = duration_msg(time_from_start_s)
    msg.points = [point]
    return msg


def trajectory_target(msg: JointTrajectory, names: Sequence[str]) -> np.ndarray | None:
    """The final point's positions in the order of ``names``, or None when the message
    lacks a joint or has no points."""
    if not msg.points:
        return None
    index = {n: i for i, n in enumerate(msg.joint_names)}
    last = msg.points[-1].positions
    if any(n not in index or index[n] >= len(last) for n in names):
        return None
    return np.array([last[index[n]] for n in names], dtype=float)


def stamp_age_s(stamp_ns: int) -> float | None:
    """Age now (s, never negative) of a middleware time stamp (``MessageInfo``'s
    ``received_timestamp`` / ``source_timestamp``: system clock, ns); None when the
    middleware gave none (0). Subtract it from a monotonic clock's now to place the
    stamp on that clock."""
    if stamp_ns <= 0:
        return None
    return max(0.0, (time.time_ns() - stamp_ns) * 1e-9)
