"""Camera frames on the camera topics, for perception requests by reference
(``captain_perception.core.frame_refs``).

Per camera: ``<camera>/color/image_raw`` (sensor_msgs/Image), ``<camera>/aligned_depth_to_color/image_raw``
(sensor_msgs/Image, ``32FC1`` metres keeps the depth exact; ``16UC1`` mm is read too) and
``<camera>/color/camera_info``; the header stamp is the frame's capture time.

* ``CameraFrameCache`` (perception node): subscribes to those topics (best effort, so it
  matches a reliable or a sensor-data publisher) and keeps the latest frames in a
  ``FrameRing``.
* ``FrameTopicPublisher`` (client side): publishes a ``CameraFrame`` on them (stamp =
  ``frame.time_s`` at microsecond resolution, depth ``32FC1``) and notes it in a
  ``PublishedFrames``, so that later requests about it go by reference.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.qos import QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image

from captain_backends.core.driver import CameraFrame
from captain_backends.core.xr1.images import decode_depth_m, decode_rgb
from captain_backends.nodes import xr1_messages as xm
from captain_perception.core.frame_refs import FrameRing, PublishedFrames, key_from_time, stamp_key, time_from_key

#: Subscriptions: best effort (matches reliable and best-effort publishers), the last 5.
SUBSCRIBE_QOS = QoSProfile(depth=5, history=QoSHistoryPolicy.KEEP_LAST, reliability=QoSReliabilityPolicy.BEST_EFFORT)
#: Publications: reliable, the last 5 (a frame must arrive for its reference to work).
PUBLISH_QOS = QoSProfile(depth=5, history=QoSHistoryPolicy.KEEP_LAST, reliability=QoSReliabilityPolicy.RELIABLE)


def topics(prefix: str, camera: str) -> tuple[str, str, str]:
    """The colour, depth and camera_info topics of ``camera`` under ``prefix`` ("" or a namespace)."""
    return xm.camera_topics(f"{prefix.rstrip('/')}/{camera}" if prefix.strip("/") else camera)


def _depth(msg: Image) -> np.ndarray:
    if msg.encoding == "32FC1" and not msg.is_bigendian and msg.step == msg.width * 4:
        # exact, NaN included (decode_depth_m would set non-finite values to 0)
        return np.frombuffer(msg.data, dtype="<f4").reshape(msg.height, msg.width).astype(np.float32)
    return decode_depth_m(xm.raw_image(msg))


class CameraFrameCache:
    """The perception node's ring of recent camera frames (see the module docstring).

    Args:
        node: the rclpy node.
        cameras: camera names to subscribe to.
        prefix: the topics' namespace (the harness's), "" for the node's own.
        per_camera: frames kept per camera.
        callback_group: the subscriptions' callback group.
    """

    def __init__(self, node: Any, cameras: list[str], prefix: str = "", per_camera: int = 8,
                 callback_group: Any = None) -> None:
        self.node = node
        self.ring = FrameRing(per_camera)
        self.cameras = tuple(cameras)
        self._subscriptions = []
        for camera in self.cameras:
            colour, depth, info = topics(prefix, camera)
            for topic, kind, handler in ((colour, Image, self._on_rgb), (depth, Image, self._on_depth),
                                         (info, CameraInfo, self._on_info)):
                self._subscriptions.append(node.create_subscription(
                    kind, topic, lambda msg, c=camera, h=handler: h(c, msg), SUBSCRIBE_QOS,
                    callback_group=callback_group))

    def _key(self, msg: Any) -> int:
        return key_from_time(msg.header.stamp.sec, msg.header.stamp.nanosec)

    def _on_rgb(self, camera: str, msg: Image) -> None:
        try:
            self.ring.put(camera, self._key(msg), rgb=decode_rgb(xm.raw_image(msg)))
        except Exception as exc:  # an unsupported encoding: requests by reference fall back to pixels
            self.node.get_logger().warning(f"{camera} colour image not kept: {exc}", throttle_duration_sec=10.0)

    def _on_depth(self, camera: str, msg: Image) -> None:
        try:
            self.ring.put(camera, self._key(msg), depth_m=_depth(msg))
        except Exception as exc:
            self.node.get_logger().warning(f"{camera} depth image not kept: {exc}", throttle_duration_sec=10.0)

    def _on_info(self, camera: str, msg: CameraInfo) -> None:
        self.ring.put(camera, self._key(msg), K=np.array(msg.k, dtype=float).reshape(3, 3))

    def frame(self, camera: str, stamp_s: float) -> CameraFrame | None:
        """The held frame of ``camera`` stamped ``stamp_s``, or None (``PerceptionServer``'s ``frames``)."""
        return self.ring.get(camera, stamp_s)

    def destroy(self) -> None:
        """Remove the subscriptions."""
        for sub in self._subscriptions:
            self.node.destroy_subscription(sub)
        self._subscriptions.clear()


class FrameTopicPublisher:
    """Publishes camera frames on the camera topics and notes them for requests by reference.

    Args:
        node: the rclpy node publishing them.
        prefix: the topics' namespace (the one the perception node subscribes to).
        published: where published frames are noted (a new one when None).
    """

    def __init__(self, node: Any, prefix: str = "", published: PublishedFrames | None = None) -> None:
        self.node = node
        self.prefix = prefix
        self.published = published if published is not None else PublishedFrames()
        self._publishers: dict[str, tuple[Any, Any, Any]] = {}
        self._lock = threading.Lock()

    def _for(self, camera: str) -> tuple[Any, Any, Any]:
        with self._lock:
            pubs = self._publishers.get(camera)
            if pubs is None:
                colour, depth, info = topics(self.prefix, camera)
                pubs = self._publishers[camera] = (self.node.create_publisher(Image, colour, PUBLISH_QOS),
                                                   self.node.create_publisher(Image, depth, PUBLISH_QOS),
                                                   self.node.create_publisher(CameraInfo, info, PUBLISH_QOS))
            return pubs

    def subscribers(self, camera: str) -> int:
        """Subscriptions matched by ``camera``'s colour and depth topics (the fewer of the two)."""
        colour, depth, _ = self._for(camera)
        return min(colour.get_subscription_count(), depth.get_subscription_count())

    def publish(self, frame: CameraFrame) -> None:
        """Publish ``frame`` (stamp ``frame.time_s``) and note it in ``published``."""
        colour, depth, info = self._for(frame.name)
        sec, nanosec = time_from_key(stamp_key(frame.time_s))
        xm.publish_rgbd((colour, depth, info), frame.name, frame.rgb, frame.depth_m, frame.K,
                        Time(sec=sec, nanosec=nanosec), "32FC1")
        self.published.note(frame)
