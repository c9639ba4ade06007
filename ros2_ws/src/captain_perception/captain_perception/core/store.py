"""Observations and detections of one episode, addressed by handles and ids.

* An **observation** is what one ``observe()`` captured: the camera frames (with their
  intrinsics and poses), the robot state, and the saved image files. Handles are
  ``"obs_<k>"`` with ``k`` counting from 0 in the episode. Only the most recent
  ``max_observations`` are kept; an older handle is *stale*.
* A **detection** is a thing found in one camera of one observation (a marked point, a
  segment, a pointed location, a re-found target). Ids are ``"det_<n>"``. A detection
  keeps its own pixel, 3-D position and mask, but measurements that look at the image
  again need its observation, so a detection whose observation is gone is stale too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from captain_backends.core.driver import CameraFrame
from captain_perception.core.errors import InvalidPerceptionArgument, StaleHandleError, UnknownHandleError
from captain_perception.core.pointcloud import FrameCloud

_HANDLE_RE = re.compile(r"^obs_(\d+)$")
_DETECTION_RE = re.compile(r"^det_(\d+)$")


@dataclass
class Observation:
    """One ``observe()``: frames by camera name, robot state, saved image paths.

    Attributes:
        handle: ``"obs_<k>"``.
        index: ``k``.
        frames: camera name -> ``CameraFrame`` (base-frame camera poses).
        robot_state: the policy-facing robot state dict captured with the frames.
        images: camera name -> image file name relative to the workspace.
        robot_masker: camera name -> the robot's own pixels in that frame (the
            self-filter), or None.
    """

    handle: str
    index: int
    frames: dict[str, CameraFrame]
    robot_state: dict[str, Any]
    images: dict[str, str]
    robot_masker: Callable[[str], np.ndarray | None] | None = field(default=None, repr=False)
    _clouds: dict[str, FrameCloud] = field(default_factory=dict, repr=False)
    _robot_masks: dict[str, np.ndarray | None] = field(default_factory=dict, repr=False)

    def robot_mask(self, camera: str) -> np.ndarray | None:
        """(H, W) bool: the robot's own pixels in one camera (computed once, on first use),
        or None when no self-filter is configured."""
        if camera not in self._robot_masks:
            self._robot_masks[camera] = None if self.robot_masker is None else self.robot_masker(camera)
        return self._robot_masks[camera]

    def cloud(self, camera: str) -> FrameCloud:
        """The (cached) point cloud of one camera of this observation, without the robot's
        own pixels (``robot_mask``)."""
        if camera not in self._clouds:
            self._clouds[camera] = FrameCloud(self.frames[camera], exclude=self.robot_mask(camera))
        return self._clouds[camera]


@dataclass
class MaskCrop:
    """A boolean mask stored as its bounding box crop (saves memory for many detections).

    Attributes:
        y0 / x0: top-left pixel of the crop.
        crop: bool array of the crop.
        shape: (H, W) of the full image.
    """

    y0: int
    x0: int
    crop: np.ndarray
    shape: tuple[int, int]

    @classmethod
    def from_mask(cls, mask: np.ndarray) -> MaskCrop:
        """Crop a full-image mask to its bounding box."""
        ys, xs = np.nonzero(mask)
        if len(xs) == 0:
            return cls(0, 0, np.zeros((0, 0), bool), tuple(mask.shape))
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        return cls(int(y0), int(x0), mask[y0:y1, x0:x1].copy(), tuple(mask.shape))

    def full(self) -> np.ndarray:
        """The mask over the full image."""
        out = np.zeros(self.shape, bool)
        h, w = self.crop.shape
        out[self.y0:self.y0 + h, self.x0:self.x0 + w] = self.crop
        return out

    @property
    def area_px(self) -> int:
        """Pixels in the mask."""
        return int(self.crop.sum())

    @property
    def bbox_px(self) -> tuple[int, int, int, int]:
        """``(x0, y0, x1, y1)`` with x1, y1 exclusive."""
        h, w = self.crop.shape
        return self.x0, self.y0, self.x0 + w, self.y0 + h


@dataclass
class Detection:
    """One detection (see the module docstring).

    Attributes:
        detection_id: ``"det_<n>"``.
        observation_handle: the observation it was found in.
        camera: camera name.
        source: ``"mark_point"``, ``"segment"``, ``"point"``, ``"track"``.
        label: the caller's or the segmenter's label ("" if none).
        pixel_xy: pixel (OpenCV centres) the detection is anchored at.
        position_m: base-frame 3-D point of the detection (the surface point at the pixel,
            or the centroid of the mask's points), metres.
        mask: the object's pixels, or None for a bare point not yet grown.
        score: a confidence in [0, 1] when the source gives one.
        granularity: ``"point"`` or ``"object"``.
        info: extra per-source details (kept for results and tracking).
    """

    detection_id: str
    observation_handle: str
    camera: str
    source: str
    label: str
    pixel_xy: tuple[float, float]
    position_m: np.ndarray
    mask: MaskCrop | None = None
    score: float | None = None
    granularity: str = "point"
    info: dict[str, Any] = field(default_factory=dict)


class PerceptionStore:
    """Observations and detections by handle and id (see the module docstring).

    Args:
        max_observations: how many recent observations are kept.
        max_detections: how many recent detections are kept.
    """

    def __init__(self, max_observations: int = 20, max_detections: int = 400) -> None:
        self.max_observations = int(max_observations)
        self.max_detections = int(max_detections)
        self._observations: dict[int, Observation] = {}
        self._detections: dict[int, Detection] = {}
        self._next_observation = 0
        self._next_detection = 0

    # ------------------------------------------------------------ observations
    def next_observation_index(self) -> int:
        """The index the next observation will get."""
        return self._next_observation

    def add_observation(self, frames: dict[str, CameraFrame], robot_state: dict[str, Any],
                        images: dict[str, str],
                        robot_masker: Callable[[str], np.ndarray | None] | None = None) -> Observation:
        """Keep a new observation; the oldest one is dropped past ``max_observations``."""
        k = self._next_observation
        self._next_observation += 1
        obs = Observation(handle=f"obs_{k}", index=k, frames=dict(frames), robot_state=dict(robot_state),
                          images=dict(images), robot_masker=robot_masker)
        self._observations[k] = obs
        for old in [i for i in self._observations if i <= k - self.max_observations]:
            del self._observations[old]
        return obs

    def latest_observation(self) -> Observation | None:
        """The most recent observation, or None before the first ``observe()``."""
        return self._observations[max(self._observations)] if self._observations else None

    def observation(self, handle: Any) -> Observation:
        """The observation of a handle.

        Raises:
            InvalidPerceptionArgument: not a handle string.
            UnknownHandleError: never issued.
            StaleHandleError: issued but no longer kept.
        """
        handle = _unwrap_handle(handle)
        m = _HANDLE_RE.match(handle)
        if m is None:
            raise UnknownHandleError(
                f"{handle!r} is not an observation handle; pass the 'observation_handle' value of an "
                f"observe() result, e.g. {self._handle_example()}")
        k = int(m.group(1))
        if k in self._observations:
            return self._observations[k]
        if k < self._next_observation:
            raise StaleHandleError(
                f"observation {handle} is no longer kept (only the last {self.max_observations} "
                f"observations are); call observe() again and use its handle, latest is {self._handle_example()}")
        raise UnknownHandleError(f"observation {handle} was never issued; latest is {self._handle_example()}")

    def _handle_example(self) -> str:
        latest = self.latest_observation()
        return f"'{latest.handle}'" if latest else "none yet: call observe() first"

    # -------------------------------------------------------------- detections
    def add_detection(self, observation: Observation, camera: str, source: str, label: str,
                      pixel_xy: tuple[float, float], position_m: np.ndarray, *,
                      mask: np.ndarray | MaskCrop | None = None, score: float | None = None,
                      granularity: str = "point", info: dict[str, Any] | None = None) -> Detection:
        """Keep a new detection and give it the next id."""
        n = self._next_detection
        self._next_detection += 1
        if mask is not None and not isinstance(mask, MaskCrop):
            mask = MaskCrop.from_mask(np.asarray(mask, bool))
        det = Detection(detection_id=f"det_{n}", observation_handle=observation.handle, camera=camera,
                        source=source, label=label, pixel_xy=(float(pixel_xy[0]), float(pixel_xy[1])),
                        position_m=np.asarray(position_m, dtype=float), mask=mask, score=score,
                        granularity=granularity, info=dict(info or {}))
        self._detections[n] = det
        for old in [i for i in self._detections if i <= n - self.max_detections]:
            del self._detections[old]
        return det

    def detection(self, detection_id: Any, *, name: str = "detection_id") -> Detection:
        """The detection of an id; its observation must still be kept.

        Raises:
            InvalidPerceptionArgument: not an id string.
            UnknownHandleError: never issued.
            StaleHandleError: no longer kept, or its observation is no longer kept.
        """
        detection_id = _unwrap_detection(detection_id, name)
        m = _DETECTION_RE.match(detection_id)
        if m is None:
            raise UnknownHandleError(
                f"{name}={detection_id!r} is not a detection id; pass the 'detection_id' value of a "
                f"mark_point/segment/point/track_target result, e.g. {self._detection_example()}")
        n = int(m.group(1))
        det = self._detections.get(n)
        if det is None:
            if n < self._next_detection:
                raise StaleHandleError(f"{name}={detection_id} is no longer kept; mark the object again in a "
                                       "recent observation")
            raise UnknownHandleError(f"{name}={detection_id} was never issued; latest is "
                                     f"{self._detection_example()}")
        try:
            self.observation(det.observation_handle)
        except StaleHandleError as exc:
            raise StaleHandleError(
                f"{name}={detection_id} came from {det.observation_handle}, which is no longer kept (only the "
                f"last {self.max_observations} observations are); observe() again and mark the object anew"
            ) from exc
        return det

    def _detection_example(self) -> str:
        if not self._detections:
            return "none yet: call mark_point() or segment() first"
        return f"'det_{max(self._detections)}'"


def _unwrap_handle(handle: Any) -> str:
    """Accept a handle string, an observe() result or its value."""
    if isinstance(handle, dict):
        value = handle.get("value", handle)
        if isinstance(value, dict) and isinstance(value.get("observation_handle"), str):
            return value["observation_handle"]
        raise InvalidPerceptionArgument(
            "observation_handle must be a string such as 'obs_3' (the 'observation_handle' of an observe() "
            "result); got a dict without that key")
    if not isinstance(handle, str):
        raise InvalidPerceptionArgument(
            f"observation_handle must be a string such as 'obs_3', got {type(handle).__name__}")
    return handle.strip()


def _unwrap_detection(detection_id: Any, name: str) -> str:
    """Accept a detection id string, a result carrying one, or its value."""
    if isinstance(detection_id, dict):
        value = detection_id.get("value", detection_id)
        if isinstance(value, dict) and isinstance(value.get("detection_id"), str):
            return value["detection_id"]
        raise InvalidPerceptionArgument(
            f"{name} must be a string such as 'det_4' (the 'detection_id' of a mark_point/segment result); "
            "got a dict without that key")
    if not isinstance(detection_id, str):
        raise InvalidPerceptionArgument(f"{name} must be a string such as 'det_4', got "
                                        f"{type(detection_id).__name__}")
    return detection_id.strip()
