"""The latest robot readings, shared between the transport's thread and the driver.

The transport (ROS callbacks, another thread) pushes joint states, wrenches, images and
camera infos; each is stamped with its receipt time on the buffer's clock
(``time.monotonic``): the time the middleware received it when the transport knows it
(so a reading that waited in this process for the interpreter is not younger than it
is), else the time of the push. Joint states are merged per joint (a robot may publish
several partial messages), so the staleness of the arm is the age of its least recently
updated joint. Every push notifies waiters, so the driver can react to a new reading
within the period.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from captain_backends.core.xr1.images import RawImage


@dataclass(frozen=True)
class WrenchReading:
    """One F/T reading: force (N) and torque (N·m) in ``frame_id``, received at ``time_s``."""

    force_n: np.ndarray
    torque_nm: np.ndarray
    frame_id: str
    time_s: float


@dataclass(frozen=True)
class CameraReading:
    """The latest colour, depth and intrinsics of one camera with their receipt times."""

    rgb: RawImage | None = None
    rgb_time_s: float | None = None
    depth: RawImage | None = None
    depth_time_s: float | None = None
    K: np.ndarray | None = None
    info_size_px: tuple[int, int] | None = None
    info_time_s: float | None = None


@dataclass(frozen=True)
class MessageTiming:
    """When the newest joint state message was sent (by the robot, on its clock as the
    middleware reports it; None when unknown), received by the middleware and stored
    here, all on the buffer's clock, seconds."""

    sent_s: float | None
    received_s: float
    stored_s: float


class StateBuffer:
    """Thread-safe store of the latest readings.

    Args:
        joint_names: every joint whose value is kept (arm and gripper).
        clock: the receipt clock, seconds (``time.monotonic`` by default).
    """

    def __init__(self, joint_names: Sequence[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._index = {n: i for i, n in enumerate(joint_names)}
        n = len(joint_names)
        self._position = np.full(n, np.nan)
        self._velocity = np.zeros(n)
        self._has_velocity = np.zeros(n, dtype=bool)
        self._time = np.full(n, np.nan)
        self._prev_position = np.full(n, np.nan)
        self._prev_time = np.full(n, np.nan)
        self._updates = 0
        self._timing: MessageTiming | None = None
        self._wrench: WrenchReading | None = None
        self._wrench_queue: deque[WrenchReading] = deque(maxlen=1000)
        self._cameras: dict[str, CameraReading] = {}
        self._cond = threading.Condition()

    # --------------------------------------------------------------- producers
    def push_joint_state(self, names: Sequence[str], positions: Sequence[float],
                         velocities: Sequence[float], received_s: float | None = None,
                         sent_s: float | None = None) -> None:
        """A JointState: values of unknown joints are ignored; velocities may be empty.

        Args:
            received_s: when the middleware received it (buffer clock, s); None: now.
            sent_s: when the robot sent it (buffer clock, s), for diagnostics only.
        """
        stored = self.clock()
        now = stored if received_s is None else min(received_s, stored)
        with self._cond:
            self._timing = MessageTiming(sent_s, now, stored)
            has_v = len(velocities) == len(names)
            for k, name in enumerate(names):
                i = self._index.get(name)
                if i is None or k >= len(positions):
                    continue
                self._prev_position[i], self._prev_time[i] = self._position[i], self._time[i]
                self._position[i] = positions[k]
                self._time[i] = now
                self._has_velocity[i] = has_v
                if has_v:
                    self._velocity[i] = velocities[k]
            self._updates += 1
            self._cond.notify_all()

    def push_wrench(self, force_n: Sequence[float], torque_nm: Sequence[float], frame_id: str,
                    received_s: float | None = None) -> None:
        """A WrenchStamped (kept as the latest and queued for the guard checks);
        ``received_s`` as for ``push_joint_state``."""
        stored = self.clock()
        reading = WrenchReading(np.asarray(force_n, dtype=float), np.asarray(torque_nm, dtype=float), frame_id,
                                stored if received_s is None else min(received_s, stored))
        with self._cond:
            self._wrench = reading
            self._wrench_queue.append(reading)
            self._updates += 1
            self._cond.notify_all()

    def push_image(self, camera: str, kind: str, image: RawImage) -> None:
        """A colour (``kind="rgb"``) or depth (``kind="depth"``) image of ``camera``."""
        now = self.clock()
        with self._cond:
            old = self._cameras.get(camera, CameraReading())
            if kind == "rgb":
                new = CameraReading(image, now, old.depth, old.depth_time_s, old.K, old.info_size_px, old.info_time_s)
            else:
                new = CameraReading(old.rgb, old.rgb_time_s, image, now, old.K, old.info_size_px, old.info_time_s)
            self._cameras[camera] = new
            self._cond.notify_all()

    def push_camera_info(self, camera: str, K: Sequence[float], width_px: int, height_px: int) -> None:
        """A CameraInfo: ``K`` row-major 3x3 intrinsics in pixels."""
        now = self.clock()
        with self._cond:
            old = self._cameras.get(camera, CameraReading())
            self._cameras[camera] = CameraReading(old.rgb, old.rgb_time_s, old.depth, old.depth_time_s,
                                                  np.asarray(K, dtype=float).reshape(3, 3),
                                                  (int(width_px), int(height_px)), now)
            self._cond.notify_all()

    # --------------------------------------------------------------- consumers
    def joints(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, list[float | None]]:
        """Positions, velocities and receipt times (None: never received) of ``names``.

        Velocities come from the message when it carries them, else from the last two
        values' finite difference (0 until two values arrived).
        """
        idx = [self._index[n] for n in names]
        with self._cond:
            q = self._position[idx].copy()
            v = self._velocity[idx].copy()
            t = self._time[idx].copy()
            pq, pt = self._prev_position[idx], self._prev_time[idx]
            has_v = self._has_velocity[idx]
        dt = t - pt
        fd = np.where(np.isfinite(dt) & (dt > 0), (q - pq) / np.where(dt > 0, dt, 1.0), 0.0)
        v = np.where(has_v, v, np.nan_to_num(fd))
        return q, v, [None if np.isnan(x) else float(x) for x in t]

    def joint_state_timing(self) -> MessageTiming | None:
        """Send, reception and storage times of the newest joint state (None before one)."""
        with self._cond:
            return self._timing

    def latest_wrench(self) -> WrenchReading | None:
        """The latest F/T reading."""
        with self._cond:
            return self._wrench

    def drain_wrenches(self) -> list[WrenchReading]:
        """Every F/T reading received since the last drain, oldest first."""
        with self._cond:
            out = list(self._wrench_queue)
            self._wrench_queue.clear()
            return out

    def camera(self, name: str) -> CameraReading:
        """The latest readings of one camera (fields None until received)."""
        with self._cond:
            return self._cameras.get(name, CameraReading())

    @property
    def update_count(self) -> int:
        """Joint state and wrench messages received so far."""
        with self._cond:
            return self._updates

    def wait(self, timeout_s: float, seen_updates: int | None = None) -> int:
        """Block until a reading arrives after ``seen_updates`` (or any push when None)
        or ``timeout_s`` passes; returns the update count."""
        with self._cond:
            start = self._updates if seen_updates is None else seen_updates
            if self._updates == start and timeout_s > 0:
                self._cond.wait_for(lambda: self._updates != start, timeout=timeout_s)
            return self._updates

    def wait_for_camera(self, timeout_s: float) -> None:
        """Block until any image or camera_info arrives or ``timeout_s`` passes."""
        with self._cond:
            self._cond.wait(timeout=timeout_s)
