"""Frames by reference (ROS-free): a perception request may name a frame by
``(camera, stamp_s)`` instead of carrying its pixels, when the perception node received
that frame on its camera topics (``<camera>/color/image_raw`` and
``<camera>/aligned_depth_to_color/image_raw``, header stamp = the frame's ``time_s``).

* ``FrameRing`` (node side): the latest frames of each camera, by stamp; the colour and
  depth images arrive as separate messages and a frame is complete once both have come.
* ``PublishedFrames`` (client side): the frames this process published on those topics,
  so that a request about one of them can go by reference. A frame is referenced only
  while its arrays are the very ones published (identity, not a copy that may have been
  changed) and no other content was published under the same ``(camera, stamp)``.

Stamps are matched at microsecond resolution (``stamp_key``); a stamp that names two
different frames (a simulator reset to the same time) makes the client send pixels, and
on the node the newer frame replaces the older.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from captain_backends.core.driver import CameraFrame

#: A frame's reference: camera name and capture time, s.
FrameRef = tuple[str, float]


def stamp_key(stamp_s: float) -> int:
    """A stamp in whole microseconds (the resolution references are matched at)."""
    return round(float(stamp_s) * 1e6)


def key_from_time(sec: int, nanosec: int) -> int:
    """``stamp_key`` of a ROS ``builtin_interfaces/Time``."""
    return int(sec) * 1_000_000 + round(int(nanosec) / 1000)


def time_from_key(key: int) -> tuple[int, int]:
    """``(sec, nanosec)`` of a ``stamp_key`` (the stamp a published frame carries)."""
    sec, us = divmod(int(key), 1_000_000)
    return sec, us * 1000


class FrameRing:
    """The latest ``per_camera`` frames of each camera, by stamp (thread-safe).

    Args:
        per_camera: frames kept per camera (the oldest stamp goes first).
    """

    def __init__(self, per_camera: int = 8) -> None:
        if per_camera < 1:
            raise ValueError("per_camera must be at least 1")
        self.per_camera = int(per_camera)
        self._lock = threading.Lock()
        self._frames: dict[str, OrderedDict[int, dict[str, Any]]] = {}
        self.received = 0

    def put(self, camera: str, key: int, *, rgb: np.ndarray | None = None, depth_m: np.ndarray | None = None,
            K: np.ndarray | None = None) -> None:
        """One part of a frame: its colour image (HxWx3 uint8), depth (HxW float32 m) or
        intrinsics (3x3 px), stamped ``key`` (``stamp_key``). A part that arrives again
        for a held stamp replaces the held one (the newest frame of that stamp wins)."""
        with self._lock:
            ring = self._frames.setdefault(camera, OrderedDict())
            entry = ring.get(key)
            if entry is None:
                entry = ring[key] = {}
                while len(ring) > self.per_camera:
                    ring.popitem(last=False)
            for name, value in (("rgb", rgb), ("depth_m", depth_m), ("K", K)):
                if value is not None:
                    entry[name] = value
            self.received += 1

    def get(self, camera: str, stamp_s: float) -> CameraFrame | None:
        """The complete frame of ``camera`` stamped ``stamp_s`` (colour and depth with the
        same size), or None. ``K`` is the camera_info's when one came (else identity) and
        ``T_base_camera`` identity: a request supplies both."""
        with self._lock:
            entry = dict(self._frames.get(camera, {}).get(stamp_key(stamp_s), {}))
        rgb, depth = entry.get("rgb"), entry.get("depth_m")
        if rgb is None or depth is None or rgb.shape[:2] != depth.shape[:2]:
            return None
        K = entry.get("K")
        return CameraFrame(name=camera, rgb=rgb, depth_m=depth, K=np.eye(3) if K is None else K,
                           T_base_camera=np.eye(4), time_s=float(stamp_s))

    def stamps(self, camera: str) -> list[int]:
        """The held stamp keys of ``camera``, oldest first."""
        with self._lock:
            return list(self._frames.get(camera, {}))


class PublishedFrames:
    """The frames this process published on the perception node's camera topics (client side).

    Args:
        capacity: frames remembered (the oldest is forgotten first).
    """

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = int(capacity)
        self._lock = threading.Lock()
        self._held: OrderedDict[tuple[str, int], tuple[Any, Any] | None] = OrderedDict()

    def note(self, frame: CameraFrame) -> None:
        """``frame`` was published (stamp ``frame.time_s``)."""
        key = (frame.name, stamp_key(frame.time_s))
        with self._lock:
            if key in self._held:
                held = self._held[key]
                same = held is not None and held[0]() is frame.rgb and held[1]() is frame.depth_m
                if not same:
                    self._held[key] = None  # two contents under one stamp: never by reference
                self._held.move_to_end(key)
                return
            self._held[key] = (weakref.ref(frame.rgb), weakref.ref(frame.depth_m))
            while len(self._held) > self.capacity:
                self._held.popitem(last=False)

    def reference(self, frame: CameraFrame) -> FrameRef | None:
        """``(camera, stamp_s)`` when ``frame``'s pixels are those published, else None."""
        with self._lock:
            held = self._held.get((frame.name, stamp_key(frame.time_s)))
        if held is None or held[0]() is not frame.rgb or held[1]() is not frame.depth_m:
            return None
        return frame.name, float(frame.time_s)

    def reference_rgb(self, rgb: np.ndarray) -> FrameRef | None:
        """``(camera, stamp_s)`` of the published frame whose colour image is ``rgb`` (the
        same array), else None (a pointing request needs only the colour image)."""
        with self._lock:
            for (camera, key), held in reversed(self._held.items()):
                if held is not None and held[0]() is rgb:
                    return camera, key / 1e6
        return None
