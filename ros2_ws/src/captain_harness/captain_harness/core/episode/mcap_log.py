"""Episode recordings as rosbag2 bags (MCAP storage, CDR-encoded standard messages), which
``ros2 bag play``, ``ros2 bag info``, Foxglove and any rosbag2 reader open without this
package. ROS-free: written with ``rosbags`` (pure Python), no ROS install needed.

Topics (the names of the live stack, so a replay drives the same RViz configuration):

* ``/joint_states`` (sensor_msgs/JointState): arm joints (rad, rad/s) and
  ``gripper_opening`` (m), at ``state_rate_hz`` of simulated time;
* ``/tf`` (tf2_msgs/TFMessage): the links moved by the arm joints, with each joint state;
  ``/tf_static`` (latched): fixed links, the TCP ``captain_tcp`` and the camera optical
  frames (``captain_harness.core.robot_frames``);
* ``/wrench`` (geometry_msgs/WrenchStamped): contact wrench on the tool, base frame;
* ``/<camera>/color/image_raw`` (sensor_msgs/Image, rgb8) and
  ``/<camera>/color/camera_info`` (sensor_msgs/CameraInfo) for every frame the driver
  captured (what ``observe`` saw), depth (``/<camera>/aligned_depth_to_color/image_raw``,
  32FC1 m) when ``depth`` is set;
* ``/captain/requests``, ``/captain/cells``, ``/captain/receipts`` (std_msgs/String, one
  JSON object each): a request's reasoning and code, each cell's code and output, each
  receipt;
* ``/captain/images/<camera>`` (sensor_msgs/CompressedImage): the images the cells
  attached for the policy.

Time: message stamps and bag timestamps are the simulator's time (driver time, s -> ns),
so a replay runs at the simulated speed; timestamps strictly increase through the bag
(a message that would not is moved 1 ns after its predecessor). Without a driver on this
side (episodes over ROS) the request topics are stamped with the wall clock.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from captain_harness.core.episode.event_payloads import event_payloads

#: The folder of an episode's bag inside the episode's record folder.
BAG_DIR = "episode_bag"


def _qos(latched: bool) -> Any:
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    zero = QosTime(sec=0, nsec=0)
    return Qos(history=QosHistory.KEEP_LAST, depth=1 if latched else 10, reliability=QosReliability.RELIABLE,
               durability=QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
               deadline=zero, lifespan=zero, liveliness=QosLiveliness.AUTOMATIC,
               liveliness_lease_duration=zero, avoid_ros_namespace_conventions=False)


class RosbagWriter:
    """A rosbag2 bag (MCAP, zstd chunks) of standard ROS 2 messages.

    Args:
        path: the bag's folder (must not exist; rosbag2 writes ``<name>.mcap`` and
            ``metadata.yaml`` into it).
    """

    def __init__(self, path: Path | str) -> None:
        from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        self.path = Path(path)
        self.typestore = get_typestore(Stores.ROS2_KILTED)
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self.last_ns = -1
        self.count = 0

    def msg(self, msgtype: str, **fields: Any) -> Any:
        """A message object of ``msgtype`` (e.g. ``std_msgs/msg/String``)."""
        return self.typestore.types[msgtype](**fields)

    def stamp(self, t_ns: int) -> Any:
        """A builtin_interfaces/Time of ``t_ns`` nanoseconds."""
        t_ns = max(0, int(t_ns))
        return self.msg("builtin_interfaces/msg/Time", sec=t_ns // 1_000_000_000, nanosec=t_ns % 1_000_000_000)

    def header(self, t_ns: int, frame_id: str = "") -> Any:
        """A std_msgs/Header."""
        return self.msg("std_msgs/msg/Header", stamp=self.stamp(t_ns), frame_id=frame_id)

    def next_ns(self, t_ns: int) -> int:
        """``t_ns``, or 1 ns after the last timestamp written when it is not later."""
        return max(int(t_ns), self.last_ns + 1)

    def _connection(self, topic: str, msgtype: str, latched: bool) -> Any:
        conn = self._connections.get(topic)
        if conn is None:
            conn = self._writer.add_connection(topic, msgtype, typestore=self.typestore,
                                               offered_qos_profiles=[_qos(latched)])
            self._connections[topic] = conn
        elif conn.msgtype != msgtype:
            raise ValueError(f"topic {topic} carries {conn.msgtype}, not {msgtype}")
        return conn

    def write(self, topic: str, message: Any, t_ns: int, latched: bool = False) -> int:
        """Serialise ``message`` (CDR) on ``topic`` at bag time ``t_ns`` (moved forward to keep
        timestamps strictly increasing); returns the timestamp used."""
        msgtype = type(message).__msgtype__
        data = self.typestore.serialize_cdr(message, msgtype)
        return self.write_cdr(topic, msgtype, data, t_ns, latched)

    def write_cdr(self, topic: str, msgtype: str, data: bytes | memoryview, t_ns: int, latched: bool = False) -> int:
        """Write an already CDR-serialised message (e.g. from a raw rclpy subscription)."""
        t = self.next_ns(t_ns)
        self._writer.write(self._connection(topic, msgtype, latched), t, data)
        self.last_ns = t
        self.count += 1
        return t

    def close(self) -> None:
        """Finish the bag (idempotent)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


# --------------------------------------------------------------------- messages
def transform_msgs(bag: RosbagWriter, transforms: list[tuple[str, str, np.ndarray]], t_ns: int) -> Any:
    """A tf2_msgs/TFMessage of ``(parent, child, T_parent_child)`` triples."""
    from scipy.spatial.transform import Rotation

    out = []
    for parent, child, T in transforms:
        x, y, z, w = Rotation.from_matrix(np.asarray(T, float)[:3, :3]).as_quat()
        out.append(bag.msg(
            "geometry_msgs/msg/TransformStamped", header=bag.header(t_ns, parent), child_frame_id=child,
            transform=bag.msg("geometry_msgs/msg/Transform",
                              translation=bag.msg("geometry_msgs/msg/Vector3", x=float(T[0, 3]), y=float(T[1, 3]),
                                                  z=float(T[2, 3])),
                              rotation=bag.msg("geometry_msgs/msg/Quaternion", x=float(x), y=float(y), z=float(z),
                                               w=float(w)))))
    return bag.msg("tf2_msgs/msg/TFMessage", transforms=out)


def camera_info(bag: RosbagWriter, K: np.ndarray, width: int, height: int, frame_id: str, t_ns: int) -> Any:
    """A sensor_msgs/CameraInfo of an undistorted pinhole camera (``K`` in pixels)."""
    K = np.asarray(K, float)
    P = np.zeros((3, 4))
    P[:, :3] = K
    roi = bag.msg("sensor_msgs/msg/RegionOfInterest", x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    return bag.msg("sensor_msgs/msg/CameraInfo", header=bag.header(t_ns, frame_id), height=int(height),
                   width=int(width), distortion_model="plumb_bob", d=np.zeros(5), k=K.reshape(-1),
                   r=np.eye(3).reshape(-1), p=P.reshape(-1), binning_x=0, binning_y=0, roi=roi)


def image(bag: RosbagWriter, array: np.ndarray, encoding: str, frame_id: str, t_ns: int) -> Any:
    """A sensor_msgs/Image of an HxW(xC) array (``rgb8`` uint8 or ``32FC1`` float32)."""
    array = np.ascontiguousarray(array)
    height, width = array.shape[:2]
    return bag.msg("sensor_msgs/msg/Image", header=bag.header(t_ns, frame_id), height=height, width=width,
                   encoding=encoding, is_bigendian=0, step=int(array.strides[0]),
                   data=np.frombuffer(array.tobytes(), dtype=np.uint8))


def string(bag: RosbagWriter, payload: dict[str, Any]) -> Any:
    """A std_msgs/String carrying ``payload`` as JSON."""
    return bag.msg("std_msgs/msg/String", data=json.dumps(payload, ensure_ascii=False, default=str))


# ------------------------------------------------------------------- the episode
class McapLog:
    """One episode's bag: request events from the episode loop, robot states and camera
    frames from the driver (``attach_driver``).

    Args:
        path: the bag folder (``<episode>/episode_bag``).
        state_rate_hz: joint states, TF and wrench per second of simulated time.
        depth: also record the depth images of captured frames.
    """

    def __init__(self, path: Path, state_rate_hz: float = 50.0, depth: bool = False) -> None:
        self.bag = RosbagWriter(path)
        self.path = Path(path)
        self.state_period_s = 1.0 / state_rate_hz
        self.depth = depth
        self._driver: Any = None
        self._originals: dict[str, Any] = {}
        self._tree: Any = None
        self._names: list[str] = []
        self._base = ""
        self._driver_s = 0.0
        self._next_state_s = 0.0
        self._wall_origin_ns = time.time_ns()

    # ---------------------------------------------------------------- the driver
    def attach_driver(self, driver: Any) -> None:
        """Record ``driver``'s states after its control periods and every frame it captures
        (its ``advance`` and ``capture`` are wrapped on this instance until ``close``)."""
        from captain_harness.core.robot_frames import FrameTree

        self._driver = driver
        description = driver.description()
        self._tree = FrameTree(description)
        self._names = [*description.arm_joint_names, "gripper_opening"]
        self._base = description.base_frame
        state = driver.read_state()
        self._driver_s = float(state.time_s)
        self._write_static(self._ns(self._driver_s))
        self._write_state(state)
        advance, capture = driver.advance, driver.capture
        self._originals = {"advance": advance, "capture": capture}

        def recorded_advance(*args: Any, **kwargs: Any) -> Any:
            report = advance(*args, **kwargs)
            self._driver_s += float(report.duration_s)
            if self._driver_s + 1e-9 >= self._next_state_s:
                self._write_state(driver.read_state())
            return report

        def recorded_capture(*args: Any, **kwargs: Any) -> Any:
            frames = capture(*args, **kwargs)
            self._write_frames(frames)
            return frames

        driver.advance = recorded_advance
        driver.capture = recorded_capture

    def _ns(self, t_s: float) -> int:
        return round(t_s * 1e9)

    def now_ns(self) -> int:
        """The recording's current time: driver time when a driver is attached, else wall time."""
        if self._driver is not None:
            return self._ns(self._driver_s)
        return time.time_ns()

    def _write_static(self, t_ns: int) -> None:
        self.bag.write("/tf_static", transform_msgs(self.bag, self._tree.static_transforms(), t_ns), t_ns,
                       latched=True)

    def _write_state(self, state: Any) -> None:
        bag = self.bag
        self._driver_s = max(self._driver_s, float(state.time_s))
        self._next_state_s = self._driver_s + self.state_period_s - 1e-9
        t_ns = bag.next_ns(self._ns(self._driver_s))
        q = np.asarray(state.joint_positions_rad, float)
        bag.write("/joint_states", bag.msg(
            "sensor_msgs/msg/JointState", header=bag.header(t_ns), name=self._names,
            position=np.array([*q, state.gripper_opening_m], float),
            velocity=np.array([*np.asarray(state.joint_velocities_rad_s, float), 0.0]), effort=np.zeros(0)), t_ns)
        bag.write("/tf", transform_msgs(bag, self._tree.moving_transforms(q), t_ns), t_ns)
        w = np.asarray(state.wrench_base, float)
        vec = "geometry_msgs/msg/Vector3"
        bag.write("/wrench", bag.msg(
            "geometry_msgs/msg/WrenchStamped", header=bag.header(t_ns, self._base),
            wrench=bag.msg("geometry_msgs/msg/Wrench", force=bag.msg(vec, x=w[0], y=w[1], z=w[2]),
                           torque=bag.msg(vec, x=w[3], y=w[4], z=w[5]))), t_ns)

    def _write_frames(self, frames: dict[str, Any]) -> None:
        from captain_backends.core.driver import WRIST_CAMERA

        bag = self.bag
        state = self._driver.read_state() if frames else None
        changed = False
        for name, frame in frames.items():
            parent = self._tree.description.flange_frame if name == WRIST_CAMERA else ""
            changed |= self._tree.set_camera(name, frame.T_base_camera, state.joint_positions_rad, parent)
        if changed:
            self._write_static(bag.next_ns(self.now_ns()))
        for name, frame in frames.items():
            t_ns = bag.next_ns(self._ns(max(float(frame.time_s), self._driver_s)))
            optical = f"{name}_optical_frame"
            w, h = frame.size_px
            bag.write(f"/{name}/color/camera_info", camera_info(bag, frame.K, w, h, optical, t_ns), t_ns)
            bag.write(f"/{name}/color/image_raw", image(bag, np.asarray(frame.rgb, np.uint8), "rgb8", optical, t_ns),
                      t_ns)
            if self.depth:
                bag.write(f"/{name}/aligned_depth_to_color/image_raw",
                          image(bag, np.asarray(frame.depth_m, np.float32), "32FC1", optical, t_ns), t_ns)

    # ----------------------------------------------------------------- requests
    def write_event(self, event: dict[str, Any], image_root: Path) -> None:
        """Log one request event (see ``loop.py``), its cells, receipts and attached images."""
        bag = self.bag
        t_ns = bag.next_ns(self.now_ns())
        for topic, payload in event_payloads(event):
            bag.write(f"/{topic}", string(bag, payload), t_ns)
        for cell in event.get("cells") or []:
            for path in cell.get("images") or []:
                name = Path(path).name
                camera = "wrist" if "wrist" in name else "head" if "head" in name else "attached"
                try:
                    data = (Path(image_root) / path).read_bytes()
                except OSError:
                    continue
                fmt = "jpeg" if name.lower().endswith((".jpg", ".jpeg")) else "png"
                bag.write(f"/captain/images/{camera}", bag.msg(
                    "sensor_msgs/msg/CompressedImage", header=bag.header(t_ns, camera), format=fmt,
                    data=np.frombuffer(data, dtype=np.uint8)), t_ns)

    def close(self) -> None:
        """Restore the driver's methods and finish the bag (idempotent)."""
        if self._driver is not None:
            for attr in self._originals:
                self._driver.__dict__.pop(attr, None)
            self._driver = None
        self.bag.close()
