"""The base of the perception calls: configuration, self-filter and helpers shared by the calls.

Frames and units: positions in the robot base frame (z up), metres; pixel coordinates
normalised ``(u, v)`` in [0, 1], u from the left, v from the top.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA, CameraFrame, RobotDriver
from captain_harness.core.arguments import as_float
from captain_harness.core.results import CallOutcome
from captain_perception.core.backproject import backproject, normalised_to_pixel, pixel_to_normalised, robust_depth
from captain_perception.core.contact import GripperGeometry
from captain_perception.core.detections import measure_detection
from captain_perception.core.errors import InvalidPerceptionArgument, NothingFoundError
from captain_perception.core.geometry import ObjectGeometry
from captain_perception.core.pointer import PointerConfig, PointingClient
from captain_perception.core.region import RegionParams
from captain_perception.core.robot_state import RobotStateProvider, kinematic_robot_state
from captain_perception.core.segmenters import ClassicalSegmenter, Segmenter
from captain_perception.core.self_filter import RobotSelfFilter, SelfFilterConfig
from captain_perception.core.store import Detection, Observation, PerceptionStore

#: File-name suffix of each camera's saved frame.
IMAGE_SUFFIX = {HEAD_CAMERA: "head", WRIST_CAMERA: "wrist"}
#: Other names accepted for the two cameras.
CAMERA_ALIASES = {"head": HEAD_CAMERA, "wrist": WRIST_CAMERA, "hand": WRIST_CAMERA}
GRANULARITIES = ("point", "object")
#: measure_object_geometry refuses an object and a destination of one image whose regions
#: share at least this fraction of their union (intersection over union: one region)
SAME_REGION_OVERLAP = 0.8
SELECT_CRITERIA = ("score", "largest", "smallest", "leftmost", "rightmost", "topmost", "bottommost",
                   "highest", "lowest", "nearest", "farthest", "between")


@dataclass(frozen=True)
class PerceptionConfig:
    """Parameters of the perception calls.

    Attributes:
        max_observations: observations kept; older handles are stale.
        max_detections: detections kept.
        png_compression: zlib level of the saved frames (0..9; 1 is fast).
        png_fixed_filter: encode every row with PNG's "Sub" filter instead of letting the
            encoder try all five per row (lossless either way; about half the encoding
            time of a 512 x 512 frame, files about as small).
        region: thresholds of region growing.
        gripper: the jaws, for contact geometry.
        max_points_returned: sample of object points returned by ``mark_point(granularity="object")``.
        self_filter: the robot self-filter (the robot's own pixels, from its kinematic
            model, are left out of regions, point clouds and measurements).
    """

    max_observations: int = 20
    max_detections: int = 400
    png_compression: int = 1
    png_fixed_filter: bool = True
    region: RegionParams = field(default_factory=RegionParams)
    gripper: GripperGeometry = field(default_factory=GripperGeometry)
    max_points_returned: int = 24
    self_filter: SelfFilterConfig = field(default_factory=SelfFilterConfig)


class PerceptionBase:
    """State and helpers shared by the perception and measurement calls.

    Args:
        driver: the robot driver (``capture()`` for frames).
        workspace: folder where observed frames are saved as ``obs_<kkk>_head.png`` (k as 3 digits) /
            ``obs_<kkk>_wrist.png``.
        robot_state: callable returning the policy-facing robot state (must contain
            ``end_effector_position_m``); defaults to forward kinematics of the driver's
            joints.
        segmenter: text-prompted segmenter (default: the classical one).
        pointer: pointing-model endpoint (default: none, ``point()`` says so).
        config: parameters.
    """

    def __init__(self, driver: RobotDriver, workspace: str | Path, *,
                 robot_state: RobotStateProvider | None = None, segmenter: Segmenter | None = None,
                 pointer: PointerConfig | PointingClient | None = None,
                 config: PerceptionConfig | None = None) -> None:
        self.driver = driver
        self.workspace = Path(workspace)
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.robot_state = robot_state or kinematic_robot_state(driver)
        self.segmenter = segmenter or ClassicalSegmenter()
        self.pointer = pointer if isinstance(pointer, PointingClient) else PointingClient(pointer)
        self.config = config or PerceptionConfig()
        self.store = PerceptionStore(self.config.max_observations, self.config.max_detections)
        self._writer = ThreadPoolExecutor(max_workers=2, thread_name_prefix="captain-png")
        self._self_filter: RobotSelfFilter | None = None
        #: why the self-filter is off ("" while it is on or not yet built)
        self.self_filter_error = "" if self.config.self_filter.enabled else "disabled in the configuration"
        # the robot's meshes load in the background (seconds), ready by the first observe()
        self._self_filter_future: Future[RobotSelfFilter] | None = None
        if self.config.self_filter.enabled:
            self._self_filter_future = self._writer.submit(self._build_self_filter)

    def _build_self_filter(self) -> RobotSelfFilter:
        return RobotSelfFilter(self.driver.description(), self.config.self_filter)

    # ------------------------------------------------------------ self-filter
    def prepare(self) -> None:
        """Finish what is otherwise built in the background (the self-filter's meshes) now;
        a failure is kept in ``self_filter_error`` as on first use."""
        self.self_filter()

    def self_filter(self) -> RobotSelfFilter | None:
        """The robot self-filter, built from the driver's description on first use; None
        when disabled or when the model cannot be read (``self_filter_error`` says why)."""
        if self._self_filter is None and not self.self_filter_error:
            future, self._self_filter_future = self._self_filter_future, None
            # a failure here (e.g. the driver was not configured yet when this object was made)
            # is retried once below
            with contextlib.suppress(Exception):
                self._self_filter = future.result() if future is not None else None
            if self._self_filter is None:
                try:
                    self._self_filter = self._build_self_filter()
                except Exception as exc:  # a driver without a readable model still perceives
                    self.self_filter_error = f"{type(exc).__name__}: {exc}"
        return self._self_filter

    def _robot_masker(self, frames: dict[str, CameraFrame]) -> Callable[[str], np.ndarray | None] | None:
        """Camera name -> the robot's own pixels of these frames, posed by the joints read now."""
        flt = self.self_filter()
        if flt is None:
            return None
        state = self.driver.read_state()
        q = np.asarray(state.joint_positions_rad, float).copy()
        opening = float(state.gripper_open_fraction)

        def masker(camera: str) -> np.ndarray | None:
            return flt.mask(frames[camera], q, opening)

        return masker

    def _on_robot(self, obs: Observation, camera: str, x: float, y: float) -> bool:
        """Whether pixel (x, y) of a camera is one of the robot's own (self-filter)."""
        mask = obs.robot_mask(camera)
        return bool(mask is not None and mask[int(y + 0.5), int(x + 0.5)])

    # ------------------------------------------------------------------ helpers
    def _write_png(self, item: tuple[Path, np.ndarray]) -> tuple[Path, bool]:
        path, rgb = item
        bgr = np.ascontiguousarray(rgb[..., :3][..., ::-1])
        flags = [cv2.IMWRITE_PNG_COMPRESSION, int(self.config.png_compression)]
        if self.config.png_fixed_filter and hasattr(cv2, "IMWRITE_PNG_FILTER"):
            flags += [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_SUB]
        return path, bool(cv2.imwrite(str(path), bgr, flags))

    def _camera(self, obs: Observation, camera: Any) -> str:
        if not isinstance(camera, str):
            raise InvalidPerceptionArgument(f"camera must be a string, one of {', '.join(map(repr, obs.frames))}; "
                                            f"got {type(camera).__name__}")
        name = CAMERA_ALIASES.get(camera.strip(), camera.strip())
        if name not in obs.frames:
            raise InvalidPerceptionArgument(f"camera={camera!r} is not valid; choose one of "
                                            f"{', '.join(map(repr, obs.frames))}")
        return name

    def _uv(self, u: Any, v: Any, frame: CameraFrame) -> tuple[float, float]:
        u = as_float("u", u, minimum=0.0, maximum=1.0)
        v = as_float("v", v, minimum=0.0, maximum=1.0)
        w, h = frame.size_px
        x, y = normalised_to_pixel(u, v, w, h)
        return float(np.clip(x, 0, w - 1)), float(np.clip(y, 0, h - 1))

    def _surface_point(self, obs: Observation, camera: str, x: float, y: float) -> tuple[np.ndarray, Any]:
        cloud = obs.cloud(camera)
        sd = robust_depth(cloud.depth_m, cloud.K, x, y)
        if sd is None:
            u, v = pixel_to_normalised(x, y, cloud.width, cloud.height)
            raise NothingFoundError(f"no depth at or near (u={u:.3f}, v={v:.3f}) in {camera} (the camera sees "
                                    "nothing there); choose a pixel on a surface")
        pc = backproject(x, y, sd.depth_m, cloud.K)
        pb = cloud.T_base_camera[:3, :3] @ pc + cloud.T_base_camera[:3, 3]
        return pb, sd

    def _geometry(self, det: Detection, shape: str, cameras: str) -> ObjectGeometry:
        obs = self.store.observation(det.observation_handle)
        key = ("geometry", shape, cameras)
        cached = det.info.get("_cache", {}).get(key)
        if cached is not None:
            return cached
        geom = measure_detection(obs, det, self.config.region, shape=shape, cameras=cameras)
        det.info.setdefault("_cache", {})[key] = geom
        return geom

    def _detection_summary(self, det: Detection) -> dict[str, Any]:
        frame = self.store.observation(det.observation_handle).frames[det.camera]
        w, h = frame.size_px
        u, v = pixel_to_normalised(det.pixel_xy[0], det.pixel_xy[1], w, h)
        out: dict[str, Any] = {
            "detection_id": det.detection_id, "label": det.label, "source": det.source,
            "observation_handle": det.observation_handle, "camera": det.camera,
            "position_m": np.round(det.position_m, 5).tolist(), "pixel_uv": [round(u, 4), round(v, 4)],
            "score": None if det.score is None else round(det.score, 4), "granularity": det.granularity,
        }
        if det.mask is not None:
            x0, y0, x1, y1 = det.mask.bbox_px
            out["mask_area_px"] = det.mask.area_px
            out["mask_bbox_uv"] = [round(x0 / w, 4), round(y0 / h, 4), round(x1 / w, 4), round(y1 / h, 4)]
        return out

    def _add_mask_detection(self, obs: Observation, camera: str, mask: np.ndarray, source: str, label: str,
                            score: float | None, info: dict[str, Any]) -> Detection:
        cloud = obs.cloud(camera)
        pts = cloud.points_base[mask]
        valid = np.isfinite(pts[:, 2])
        if valid.sum() == 0:
            raise NothingFoundError(f"the {label!r} mask in {camera} has no depth")
        ys, xs = np.nonzero(mask)
        # anchor pixel: the mask pixel nearest the mask's centroid
        k = int(np.argmin((xs - xs.mean()) ** 2 + (ys - ys.mean()) ** 2))
        centroid = np.median(pts[valid], axis=0)
        return self.store.add_detection(obs, camera, source, label, (float(xs[k]), float(ys[k])), centroid,
                                        mask=mask, score=score, granularity="object", info=info)

    def close(self) -> None:
        """Stop the image writer threads (the object stays usable for measurements)."""
        self._writer.shutdown(wait=True)

    # ------------------------------------------------------------------ timing
    def timed(self, name: str, *args: Any, **kwargs: Any) -> tuple[CallOutcome, float]:
        """Call a primitive by name and return its outcome and wall time (s); for benchmarks."""
        t = time.perf_counter()
        out = getattr(self, name)(*args, **kwargs)
        return out, time.perf_counter() - t

