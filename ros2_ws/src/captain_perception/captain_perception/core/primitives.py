"""The policy-facing perception and measurement calls (``@primitive`` methods).

``Perception`` is registered with ``RobotAPI.register_object``. Every method returns a
``CallOutcome`` (result dict with the fixed keys + one receipt line) and never raises:
argument errors, unknown or stale handles and ids, missing backends and internal errors
all become failed results with a precise ``failure_category`` and a message that says
how to fix the call.

Frames and units: positions in the robot base frame (z up), metres; quaternions
``[w, x, y, z]``; pixel coordinates normalised ``(u, v)`` in [0, 1], u from the left,
v from the top. Cameras: ``"agentview"`` (head) and ``"robot0_eye_in_hand"`` (wrist).
"""

from __future__ import annotations

import functools
import inspect
import math
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA, CameraFrame, RobotDriver
from captain_harness.core.api import primitive
from captain_harness.core.arguments import as_choice, as_float, as_int, as_position, as_quaternion
from captain_harness.core.errors import ArgumentError, HarnessError
from captain_harness.core.geometry import matrix_to_quat, quat_to_matrix
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok
from captain_perception.core.backproject import backproject, normalised_to_pixel, pixel_to_normalised, robust_depth
from captain_perception.core.contact import GripperGeometry, inspect_contact, predict_release
from captain_perception.core.detections import (
    CAMERA_CHOICES,
    detection_mask,
    mask_outline_uv,
    measure_detection,
    object_views,
)
from captain_perception.core.errors import (
    BackendUnavailableError,
    InvalidPerceptionArgument,
    NothingFoundError,
    PerceptionError,
)
from captain_perception.core.geometry import RESTING_TOLERANCE_M, SHAPES, ObjectGeometry
from captain_perception.core.pointer import PointerConfig, PointingClient
from captain_perception.core.region import RegionParams
from captain_perception.core.robot_state import RobotStateProvider, kinematic_robot_state
from captain_perception.core.segmenters import ClassicalSegmenter, Segmenter
from captain_perception.core.store import Detection, Observation, PerceptionStore
from captain_perception.core.tracking import appearance_of, track

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
    """

    max_observations: int = 20
    max_detections: int = 400
    png_compression: int = 1
    png_fixed_filter: bool = True
    region: RegionParams = field(default_factory=RegionParams)
    gripper: GripperGeometry = field(default_factory=GripperGeometry)
    max_points_returned: int = 24


def _guarded(fn: Callable[..., CallOutcome]) -> Callable[..., CallOutcome]:
    """Run a primitive so that nothing raises: every error becomes a failed result."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(self: Perception, *args: Any, **kwargs: Any) -> CallOutcome:
        name = fn.__name__
        try:
            try:
                sig.bind(self, *args, **kwargs)
            except TypeError as exc:
                params = ", ".join(str(p) for p in list(sig.parameters.values())[1:])
                raise ArgumentError(f"{name}(): {exc}; signature is {name}({params})") from exc
            return fn(self, *args, **kwargs)
        except HarnessError as exc:
            result = fail(exc.category, str(exc))
            return CallOutcome(result, format_receipt(name, result))
        except Exception as exc:
            result = fail(FailureCategory.INTERNAL_ERROR,
                          f"{name} hit an internal error ({type(exc).__name__}: {exc}); try again or use another call",
                          diagnostics={"traceback": traceback.format_exc(limit=6)})
            return CallOutcome(result, format_receipt(name, result))

    return wrapper


class Perception:
    """Perception and measurement primitives over one driver (see the module docstring).

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

    # ============================================================== perception
    @primitive(group="perception")
    @_guarded
    def observe(self) -> CallOutcome:
        """Capture head and wrist RGB-D (512 x 512) with intrinsics and camera poses.

        Saves the frames as ``obs_<kkk>_head.png`` (k as 3 digits) and ``obs_<kkk>_wrist.png`` in the
        workspace. Value: ``observation_handle`` (pass it to mark_point, segment, ...),
        ``images`` (file names for image()), ``robot_state`` with
        ``end_effector_position_m`` (base frame, m), and ``cameras``: per camera
        ``K`` (3x3 px), ``T_base_camera`` (4x4, OpenCV optical frame in the base frame),
        ``position_m``, ``quaternion_wxyz``, ``width_px``, ``height_px``.
        """
        frames = self.driver.capture()
        state = self.robot_state()
        k = self.store.next_observation_index()
        images = {name: f"obs_{k:03d}_{IMAGE_SUFFIX.get(name, name)}.png" for name in frames}
        # encode the frames in parallel (the encoder releases the GIL); all are written
        # before observe() returns
        written = list(self._writer.map(self._write_png, [(self.workspace / images[n], f.rgb)
                                                          for n, f in frames.items()]))
        for path, good in written:
            if not good:
                raise PerceptionError(f"cannot write {path}; check the workspace folder")
        obs = self.store.add_observation(frames, state, images)
        cams = {}
        for name, frame in frames.items():
            T = np.asarray(frame.T_base_camera, float)
            cams[name] = {
                "K": np.round(np.asarray(frame.K, float), 4).tolist(),
                "T_base_camera": np.round(T, 6).tolist(),
                "position_m": np.round(T[:3, 3], 5).tolist(),
                "quaternion_wxyz": np.round(matrix_to_quat(T[:3, :3]), 6).tolist(),
                "width_px": frame.size_px[0], "height_px": frame.size_px[1], "time_s": float(frame.time_s),
            }
        ordered = [images[c] for c in (HEAD_CAMERA, WRIST_CAMERA) if c in images] + \
                  [v for c, v in images.items() if c not in (HEAD_CAMERA, WRIST_CAMERA)]
        value = {"observation_handle": obs.handle, "images": ordered, "robot_state": state, "cameras": cams}
        result = ok(value)
        fields: list[tuple[str, Any]] = [("observation_handle", obs.handle), ("images", ordered)]
        if state.get("end_effector_position_m") is not None:
            fields.append(("end_effector_position_m", state["end_effector_position_m"]))
        return CallOutcome(result, format_receipt("observe", result, fields))

    @primitive(group="perception")
    @_guarded
    def mark_point(self, observation_handle: str, camera: str, u: float, v: float, label: str = "",
                   granularity: str = "point") -> CallOutcome:
        """Back-project the pixel (u, v) you chose (normalised, u from the left, v from the top).

        Depth is read robustly (holes and object edges are handled). With
        ``granularity="object"`` the object's region is grown around the pixel from
        depth and colour and returned as a mask outline and sample points. Value:
        ``detection_id`` (usable by every measurement call), ``position_m`` (base
        frame, m), ``depth_m``, ``on_edge``, and for objects ``mask_outline_uv``,
        ``mask_area_px``, ``points_m``, ``centroid_m``.
        """
        obs = self.store.observation(observation_handle)
        camera = self._camera(obs, camera)
        granularity = as_choice("granularity", granularity, GRANULARITIES)
        if not isinstance(label, str):
            raise InvalidPerceptionArgument(f"label must be a string, got {type(label).__name__}")
        x, y = self._uv(u, v, obs.frames[camera])
        position, sd = self._surface_point(obs, camera, x, y)
        det = self.store.add_detection(obs, camera, "mark_point", label, (x, y), position,
                                       granularity=granularity,
                                       info={"depth_m": sd.depth_m, "on_edge": sd.on_edge})
        value = self._detection_summary(det)
        value.update(depth_m=round(sd.depth_m, 5), on_edge=sd.on_edge, depth_method=sd.method)
        fields: list[tuple[str, Any]] = [("detection_id", det.detection_id), ("position_m", np.round(position, 4))]
        if granularity == "object":
            mask = detection_mask(obs, det, self.config.region)
            cloud = obs.cloud(camera)
            pts = cloud.points_base[mask]
            pts = pts[np.isfinite(pts[:, 2])]
            step = max(1, len(pts) // self.config.max_points_returned)
            value.update(self._detection_summary(det))
            value.update(mask_outline_uv=mask_outline_uv(mask), centroid_m=np.round(np.median(pts, 0), 5).tolist(),
                         points_m=np.round(pts[::step][: self.config.max_points_returned], 4).tolist(),
                         point_count=len(pts), region_is_support_surface=bool(det.info.get("region_on_support")))
            fields.append(("object_points", len(pts)))
        result = ok(value)
        return CallOutcome(result, format_receipt("mark_point", result, fields))

    @primitive(group="perception")
    @_guarded
    def segment(self, observation_handle: str, camera: str, text: str, max_detections: int = 5) -> CallOutcome:
        """Text-prompted instance masks (e.g. ``"black bowl"``) as detections, best first.

        Backend: SAM 3 when configured, else the offline classical segmenter (table
        removal, clustering, shape and colour cues), which fails with a list of what it
        saw when it cannot ground the prompt. Value: ``detections`` (each with
        ``detection_id``, ``score``, ``position_m``, ``pixel_uv``, ``mask_bbox_uv``),
        ``detection_id`` of the best, ``backend``.
        """
        obs = self.store.observation(observation_handle)
        camera = self._camera(obs, camera)
        if not isinstance(text, str) or not text.strip():
            raise InvalidPerceptionArgument("text must be a non-empty string naming the object, e.g. 'black bowl'")
        max_detections = as_int("max_detections", max_detections, minimum=1, maximum=20)
        cloud = obs.cloud(camera)
        try:
            segments = self.segmenter.segment(cloud, text.strip(), max_detections)
        except NothingFoundError as exc:
            result = fail(FailureCategory.NOT_FOUND, str(exc), value={"backend": self.segmenter.name,
                                                                       "detections": []})
            return CallOutcome(result, format_receipt("segment", result, [("backend", self.segmenter.name)]))
        dets = []
        for s in segments:
            det = self._add_mask_detection(obs, camera, s.mask, "segment", s.label or text, s.score,
                                           {"evidence": s.evidence})
            entry = self._detection_summary(det)
            entry["evidence"] = s.evidence
            dets.append(entry)
        value = {"detections": dets, "detection_id": dets[0]["detection_id"], "count": len(dets),
                 "backend": self.segmenter.name, "text": text}
        result = ok(value)
        fields = [("backend", self.segmenter.name), ("detections", [d["detection_id"] for d in dets]),
                  ("best_position_m", np.round(dets[0]["position_m"], 4)), ("score", dets[0]["score"])]
        return CallOutcome(result, format_receipt("segment", result, fields))

    @primitive(group="perception")
    @_guarded
    def point(self, observation_handle: str, camera: str, text: str, max_points: int = 5) -> CallOutcome:
        """Ask the pointing model (Molmo2 in the paper) where ``text`` is; points become detections.

        Needs an OpenAI-compatible endpoint in the configuration; without one the call
        fails with ``not_available``. Value: ``detections`` (``detection_id``,
        ``position_m``, ``pixel_uv``), ``detection_id`` of the first, ``raw_text``.
        """
        obs = self.store.observation(observation_handle)
        camera = self._camera(obs, camera)
        if not isinstance(text, str) or not text.strip():
            raise InvalidPerceptionArgument("text must be a non-empty string naming the object, e.g. 'red mug'")
        max_points = as_int("max_points", max_points, minimum=1, maximum=20)
        frame = obs.frames[camera]
        answer = self.pointer.point(frame.rgb, text.strip())
        w, h = frame.size_px
        dets, skipped = [], 0
        for u, v in answer.points_uv[:max_points]:
            x, y = normalised_to_pixel(u, v, w, h)
            x, y = float(np.clip(x, 0, w - 1)), float(np.clip(y, 0, h - 1))
            try:
                position, sd = self._surface_point(obs, camera, x, y)
            except NothingFoundError:
                skipped += 1
                continue
            det = self.store.add_detection(obs, camera, "point", text, (x, y), position,
                                           info={"depth_m": sd.depth_m})
            dets.append(self._detection_summary(det))
        if not dets:
            raise NothingFoundError(f"the pointing model's {len(answer.points_uv)} point(s) for {text!r} have no "
                                    "depth")
        value = {"detections": dets, "detection_id": dets[0]["detection_id"], "count": len(dets),
                 "raw_text": answer.raw_text[:500], "latency_s": round(answer.latency_s, 3),
                 "skipped_no_depth": skipped}
        result = ok(value)
        fields = [("detections", [d["detection_id"] for d in dets]), ("position_m", np.round(dets[0]["position_m"], 4))]
        return CallOutcome(result, format_receipt("point", result, fields))

    @primitive(group="perception")
    @_guarded
    def select_detection(self, detection_ids: list, criterion: str = "score", reference: Any = None) -> CallOutcome:
        """Choose one of several detections.

        ``criterion``: ``"score"``, ``"largest"``/``"smallest"`` (mask area),
        ``"leftmost"``/``"rightmost"``/``"topmost"``/``"bottommost"`` (in the image),
        ``"highest"``/``"lowest"`` (base z), ``"nearest"``/``"farthest"`` (to
        ``reference``: a detection id or a base-frame point [x, y, z]), ``"between"``
        (``reference`` = [id_a, id_b]: closest to the segment joining them). Value:
        ``detection_id`` chosen and the ``ranking``.
        """
        if isinstance(detection_ids, (str, dict)):
            detection_ids = [detection_ids]
        if not isinstance(detection_ids, (list, tuple)) or not detection_ids:
            raise InvalidPerceptionArgument("detection_ids must be a non-empty list of ids, e.g. ['det_3', 'det_4'] "
                                            "(or a segment() result's value['detections'])")
        criterion = as_choice("criterion", criterion, SELECT_CRITERIA)
        dets = [self.store.detection(d.get("detection_id") if isinstance(d, dict) and "detection_id" in d else d)
                for d in detection_ids]
        keys: list[float] = []
        ref_pt: np.ndarray | None = None
        seg: tuple[np.ndarray, np.ndarray] | None = None
        if criterion in ("nearest", "farthest"):
            ref_pt = self._reference_point(reference)
        if criterion == "between":
            if not isinstance(reference, (list, tuple)) or len(reference) != 2:
                raise InvalidPerceptionArgument("criterion='between' needs reference=[id_a, id_b] (two detections or "
                                                "points)")
            seg = (self._reference_point(reference[0]), self._reference_point(reference[1]))
        for d in dets:
            frame = self.store.observation(d.observation_handle).frames[d.camera]
            w, h = frame.size_px
            if criterion == "score":
                key = -(d.score if d.score is not None else 0.0)
            elif criterion in ("largest", "smallest"):
                area = d.mask.area_px if d.mask is not None else detection_mask(
                    self.store.observation(d.observation_handle), d, self.config.region).sum()
                key = -float(area) if criterion == "largest" else float(area)
            elif criterion == "leftmost":
                key = d.pixel_xy[0] / w
            elif criterion == "rightmost":
                key = -d.pixel_xy[0] / w
            elif criterion == "topmost":
                key = d.pixel_xy[1] / h
            elif criterion == "bottommost":
                key = -d.pixel_xy[1] / h
            elif criterion in ("highest", "lowest"):
                z = float(d.position_m[2])
                key = -z if criterion == "highest" else z
            elif criterion in ("nearest", "farthest"):
                dist = float(np.linalg.norm(d.position_m - ref_pt))
                key = dist if criterion == "nearest" else -dist
            else:
                a, b = seg
                ab = b - a
                t = float(np.clip(np.dot(d.position_m - a, ab) / max(np.dot(ab, ab), 1e-12), 0.0, 1.0))
                key = float(np.linalg.norm(d.position_m - (a + t * ab)))
            keys.append(key)
        order = np.argsort(keys, kind="stable")
        ranking = [{"detection_id": dets[i].detection_id, "key": round(abs(keys[i]), 5),
                    "position_m": np.round(dets[i].position_m, 4).tolist()} for i in order]
        chosen = ranking[0]["detection_id"]
        result = ok({"detection_id": chosen, "criterion": criterion, "ranking": ranking})
        return CallOutcome(result, format_receipt("select_detection", result,
                                                  [("detection_id", chosen), ("criterion", criterion),
                                                   ("position_m", ranking[0]["position_m"])]))

    def _reference_point(self, reference: Any) -> np.ndarray:
        if isinstance(reference, (str, dict)):
            return self.store.detection(reference, name="reference").position_m
        if reference is None:
            raise InvalidPerceptionArgument("this criterion needs reference= a detection id or a point [x, y, z] (m)")
        return as_position("reference", reference)

    @primitive(group="perception")
    @_guarded
    def track_target(self, detection_id: str, observation_handle: str | None = None,
                     camera: str | None = None) -> CallOutcome:
        """Re-find a detected object in a newer observation (default: the latest, same camera).

        Matches colour, size and position; fails with ``not_found`` rather than guess.
        Value: the new ``detection_id``, ``position_m``, ``moved_m`` (distance from the
        old position) and the match ``score``.
        """
        old = self.store.detection(detection_id)
        old_obs = self.store.observation(old.observation_handle)
        obs = self.store.observation(observation_handle) if observation_handle is not None else \
            self.store.latest_observation()
        if obs is None:
            raise NothingFoundError("no observation yet: call observe() first")
        camera = self._camera(obs, old.camera if camera is None else camera)
        target = appearance_of(old_obs.cloud(old.camera), detection_mask(old_obs, old, self.config.region))
        mask, score, parts = track(target, obs.cloud(camera), self.config.region)
        det = self._add_mask_detection(obs, camera, mask, "track", old.label, score,
                                       {"tracked_from": old.detection_id, "match": parts})
        moved = float(np.linalg.norm(det.position_m - target.centre_m))
        value = self._detection_summary(det)
        value.update(tracked_from=old.detection_id, moved_m=round(moved, 5), match=parts)
        result = ok(value)
        return CallOutcome(result, format_receipt("track_target", result, [
            ("detection_id", det.detection_id), ("position_m", np.round(det.position_m, 4)), ("moved_m", moved),
            ("score", score)]))

    # ============================================================= measurement
    @primitive(group="measurement")
    @_guarded
    def measure_object_geometry(self, object_id: str, destination_id: str | None = None, shape: str = "box",
                                cameras: str = "primary") -> CallOutcome:
        """Centre, extents, yaw, top height and footprint of an object, and its offset to a destination.

        ``shape``: ``"box"`` (oriented-box extents; the footprint is classified circle or
        rectangle from the outline), ``"auto"`` (extents from that fit) or ``"cylinder"``
        (circular footprint). ``cameras``: ``"primary"`` (the detection's camera) or
        ``"all"`` (also the observation's other cameras). Value: ``object`` and
        ``destination`` (None without one), each with ``center_m``, ``center_xy_m``,
        ``top_z_m``, ``bottom_z_m``, ``extents_m`` [length, width, height],
        ``yaw_rad``, ``footprint`` {``shape``, ``radius_m``, ...}, ``resting``; and
        ``object_to_destination_xy_offset_m`` = object centre minus destination centre
        (x, y; subtract it from a carried object's position to centre it),
        ``xy_distance_m``, ``resting_height_consistent`` (the object's bottom sits on the
        destination when above it, else on the surface around it).
        """
        shape = as_choice("shape", shape, SHAPES)
        cameras = as_choice("cameras", cameras, CAMERA_CHOICES)
        obj_det = self.store.detection(object_id, name="object_id")
        dest_det = self.store.detection(destination_id, name="destination_id") if destination_id is not None else None
        if dest_det is not None:
            self._require_distinct_regions(obj_det, dest_det)
        obj = self._geometry(obj_det, shape, cameras)
        dest = self._geometry(dest_det, shape, cameras) if dest_det is not None else None
        value: dict[str, Any] = {"object": {"detection_id": obj_det.detection_id, **obj.to_dict()},
                                 "destination": None, "object_to_destination_xy_offset_m": None,
                                 "xy_distance_m": None, "shape": shape, "cameras": cameras}
        fields: list[tuple[str, Any]] = [("object", obj_det.detection_id), ("center_m", np.round(obj.center_m, 4)),
                                         ("radius_m", obj.footprint.radius_m), ("top_z_m", obj.top_z_m)]
        consistent = bool(obj.resting) if obj.resting is not None else False
        if dest is not None:
            offset = np.array(obj.center_xy_m) - np.array(dest.center_xy_m)
            dist = float(np.linalg.norm(offset))
            over = dist <= dest.footprint.radius_m
            if over:
                # resting on the destination: bottom between the destination's bottom and top (+ tolerance)
                consistent = bool(dest.bottom_z_m - RESTING_TOLERANCE_M <= obj.bottom_z_m
                                  <= dest.top_z_m + RESTING_TOLERANCE_M) and bool(obj.resting is not False)
            value.update(destination={"detection_id": dest_det.detection_id, **dest.to_dict()},
                         object_to_destination_xy_offset_m=np.round(offset, 5).tolist(),
                         xy_distance_m=round(dist, 5), object_over_destination=bool(over),
                         object_within_destination_footprint=bool(dist + obj.footprint.radius_m
                                                                  <= dest.footprint.radius_m + 0.005))
            fields = [("object", obj_det.detection_id), ("destination", dest_det.detection_id),
                      ("object_to_destination_xy_offset_m", np.round(offset, 4)), ("xy_distance_m", dist),
                      ("radius_m", obj.footprint.radius_m)]
        value["resting_height_consistent"] = consistent
        fields.append(("resting_height_consistent", consistent))
        result = ok(value)
        return CallOutcome(result, format_receipt("measure_object_geometry", result, fields))

    def _require_distinct_regions(self, obj_det: Detection, dest_det: Detection) -> None:
        """Refuse an object and a destination that are one region of one image: their offset
        would be about zero whatever the scene (e.g. both clicks landed on the object, or
        the object and what it rests on were segmented together)."""
        if obj_det.observation_handle != dest_det.observation_handle or obj_det.camera != dest_det.camera:
            return
        obs = self.store.observation(obj_det.observation_handle)
        a = detection_mask(obs, obj_det, self.config.region)
        b = detection_mask(obs, dest_det, self.config.region)
        either = int(np.count_nonzero(a | b))
        shared = int(np.count_nonzero(a & b))
        if either and shared >= SAME_REGION_OVERLAP * either:
            raise InvalidPerceptionArgument(
                f"{obj_det.detection_id} and {dest_det.detection_id} are the same region of {obj_det.camera} "
                f"({shared} of {either} pixels shared), so their offset would mean nothing; mark each on its own "
                "body (the object where it does not touch the destination), or look from another camera")

    @primitive(group="measurement")
    @_guarded
    def measure_image_points(self, observation_handle: str, camera: str, points: list) -> CallOutcome:
        """Metric base-frame points for pixels ``points`` = [[u, v], ...] (normalised, at most 32).

        Value: ``points`` (each ``uv``, ``position_m`` or None, ``depth_m``, ``on_edge``)
        and ``distances_m`` (pairwise, for up to 8 points).
        """
        obs = self.store.observation(observation_handle)
        camera = self._camera(obs, camera)
        if not isinstance(points, (list, tuple, np.ndarray)) or len(points) == 0:
            raise InvalidPerceptionArgument("points must be a non-empty list of [u, v] pairs, e.g. [[0.5, 0.4]]")
        if len(points) > 32:
            raise InvalidPerceptionArgument(f"at most 32 points per call, got {len(points)}")
        out, positions = [], []
        for i, p in enumerate(points):
            if not isinstance(p, (list, tuple, np.ndarray)) or len(p) != 2:
                raise InvalidPerceptionArgument(f"points[{i}] must be [u, v], got {p!r}")
            x, y = self._uv(p[0], p[1], obs.frames[camera])
            try:
                pos, sd = self._surface_point(obs, camera, x, y)
                out.append({"uv": [float(p[0]), float(p[1])], "position_m": np.round(pos, 5).tolist(),
                            "depth_m": round(sd.depth_m, 5), "on_edge": sd.on_edge})
                positions.append(pos)
            except NothingFoundError:
                out.append({"uv": [float(p[0]), float(p[1])], "position_m": None, "depth_m": None, "on_edge": None})
                positions.append(None)
        value: dict[str, Any] = {"points": out, "valid": sum(p is not None for p in positions)}
        if 2 <= len(positions) <= 8:
            value["distances_m"] = [[None if a is None or b is None else round(float(np.linalg.norm(a - b)), 5)
                                     for b in positions] for a in positions]
        result = ok(value)
        fields = [("valid", value["valid"]), ("count", len(out))]
        if positions and positions[0] is not None:
            fields.append(("first_position_m", np.round(positions[0], 4)))
        return CallOutcome(result, format_receipt("measure_image_points", result, fields))

    @primitive(group="measurement")
    @_guarded
    def inspect_contact_geometry(self, detection_id: str, position: list, quaternion: list,
                                 opening_m: float | None = None) -> CallOutcome:
        """How the jaws would meet the object with the TCP at ``position`` / ``quaternion``.

        Tool frame: z = approach, x = jaw-closing axis. Value: ``width_needed_m``,
        ``fits`` (below the opening), ``straddles`` (fingers close on both sides),
        ``clearance_m`` per finger and ``min_clearance_m`` (negative: a finger would
        hit the object on the way in), ``contact_depth_m``, ``palm_contact``,
        ``fingertip_height_above_support_m``, ``obstructed_fingers`` (other things in
        an open finger's way), ``tcp_to_object_center_m``.
        """
        det = self.store.detection(detection_id)
        pos = as_position("position", position)
        q = as_quaternion("quaternion", quaternion)
        gripper = self.config.gripper
        opening = None if opening_m is None else as_float("opening_m", opening_m, minimum=0.0,
                                                         maximum=gripper.max_opening_m, unit="m")
        obs = self.store.observation(det.observation_handle)
        views = object_views(obs, det, self.config.region, "primary")
        geom = self._geometry(det, "box", "primary")
        cloud = obs.cloud(det.camera)
        mask = views[0].mask
        others = cloud.points_base[::2, ::2][~mask[::2, ::2]]
        others = others[np.isfinite(others[:, 2])]
        near = np.linalg.norm(others - pos, axis=1) < 0.15
        R = quat_to_matrix(q)
        info = inspect_contact(views[0].points, pos, R, gripper, opening_m=opening,
                               support_z_m=geom.support_z_m, obstacle_points=others[near])
        info["detection_id"] = det.detection_id
        info["tcp_to_object_center_m"] = np.round(np.array(geom.center_m) - pos, 5).tolist()
        info["object_top_z_m"] = round(geom.top_z_m, 5)
        info["observed_points_only"] = True
        result = ok(info)
        fields = [("detection_id", det.detection_id), ("width_needed_m", info["width_needed_m"]),
                  ("straddles", info["straddles"]), ("min_clearance_m", info["min_clearance_m"]),
                  ("contact_depth_m", info["contact_depth_m"])]
        if info["obstructed_fingers"]:
            fields.append(("obstructed", info["obstructed_fingers"]))
        return CallOutcome(result, format_receipt("inspect_contact_geometry", result, fields))

    @primitive(group="measurement")
    @_guarded
    def inspect_release_geometry(self, object_id: str, position: list, quaternion: list | None = None,
                                 destination_id: str | None = None) -> CallOutcome:
        """What releasing the held object with the TCP at ``position`` would do.

        The object is carried rigidly from its measured pose relative to the current
        TCP. Value: ``predicted_center_m``, ``predicted_bottom_z_m``, ``support_z_m``
        (over the destination: its top for boxy ones, half its height for round ones
        such as plates and bowls; else the table), ``drop_height_m``,
        ``object_to_destination_xy_offset_m``, ``xy_distance_m``,
        ``center_over_destination``, ``footprint_within_destination``.
        """
        det = self.store.detection(object_id, name="object_id")
        pos = as_position("position", position)
        q = None if quaternion is None else as_quaternion("quaternion", quaternion)
        dest_det = self.store.detection(destination_id, name="destination_id") if destination_id is not None else None
        obs = self.store.observation(det.observation_handle)
        tcp = obs.robot_state.get("end_effector_position_m")
        if tcp is None:
            raise BackendUnavailableError("the observation has no end_effector_position_m; the robot state provider "
                                          "is missing forward kinematics")
        geom = self._geometry(det, "box", "primary")
        R_now = None
        if q is not None and obs.robot_state.get("end_effector_quaternion_wxyz") is not None:
            R_now = quat_to_matrix(np.asarray(obs.robot_state["end_effector_quaternion_wxyz"], float))
        pred = predict_release(np.array(geom.center_m), geom.bottom_z_m, np.asarray(tcp, float), pos, R_now,
                               None if q is None or R_now is None else quat_to_matrix(q))
        centre = pred["predicted_center_m"]
        value: dict[str, Any] = {"detection_id": det.detection_id,
                                 "predicted_center_m": np.round(centre, 5).tolist(),
                                 "predicted_bottom_z_m": round(pred["predicted_bottom_z_m"], 5),
                                 "held_offset_m": np.round(pred["held_offset_m"], 5).tolist(),
                                 "rotation_applied": R_now is not None and q is not None}
        support = obs.cloud(det.camera).table_height_m()
        fields: list[tuple[str, Any]] = [("detection_id", det.detection_id),
                                         ("predicted_center_m", np.round(centre, 4))]
        if dest_det is not None:
            dest = self._geometry(dest_det, "box", "primary")
            offset = centre[:2] - np.array(dest.center_xy_m)
            dist = float(np.linalg.norm(offset))
            over = dist <= dest.footprint.radius_m
            if over:
                support = dest.top_z_m if dest.footprint.shape == "rectangle" else \
                    max(dest.bottom_z_m, dest.top_z_m - 0.5 * (dest.top_z_m - dest.bottom_z_m))
            value.update(destination_id=dest_det.detection_id,
                         object_to_destination_xy_offset_m=np.round(offset, 5).tolist(), xy_distance_m=round(dist, 5),
                         center_over_destination=bool(over),
                         footprint_within_destination=bool(dist + geom.footprint.radius_m
                                                           <= dest.footprint.radius_m + 0.005))
            fields += [("object_to_destination_xy_offset_m", np.round(offset, 4)), ("xy_distance_m", dist)]
        value["support_z_m"] = None if support is None else round(float(support), 5)
        drop = None if support is None else float(pred["predicted_bottom_z_m"] - support)
        value["drop_height_m"] = None if drop is None else round(drop, 5)
        if drop is not None:
            fields.append(("drop_height_m", drop))
        result = ok(value)
        return CallOutcome(result, format_receipt("inspect_release_geometry", result, fields))

    @primitive(group="measurement")
    @_guarded
    def compare_object_observations(self, first_id: str, second_id: str, shape: str = "box") -> CallOutcome:
        """How an object moved between two detections of it (e.g. before and after a push).

        Value: ``displacement_m`` (second minus first centre), ``xy_distance_m``,
        ``top_z_change_m``, ``yaw_change_rad`` (rectangles only), ``size_ratio``,
        ``moved`` (more than 1 cm), ``first`` and ``second`` geometry.
        """
        shape = as_choice("shape", shape, SHAPES)
        a_det = self.store.detection(first_id, name="first_id")
        b_det = self.store.detection(second_id, name="second_id")
        a = self._geometry(a_det, shape, "primary")
        b = self._geometry(b_det, shape, "primary")
        disp = np.array(b.center_m) - np.array(a.center_m)
        xy = float(np.linalg.norm(disp[:2]))
        yaw = None
        if a.footprint.shape == "rectangle" and b.footprint.shape == "rectangle":
            yaw = (b.yaw_rad - a.yaw_rad + math.pi / 2) % math.pi - math.pi / 2
        ratio = b.footprint.radius_m / a.footprint.radius_m if a.footprint.radius_m > 0 else None
        moved = bool(xy > 0.01 or abs(disp[2]) > 0.01)
        value = {"first": {"detection_id": a_det.detection_id, **a.to_dict()},
                 "second": {"detection_id": b_det.detection_id, **b.to_dict()},
                 "displacement_m": np.round(disp, 5).tolist(), "xy_distance_m": round(xy, 5),
                 "top_z_change_m": round(b.top_z_m - a.top_z_m, 5),
                 "yaw_change_rad": None if yaw is None else round(yaw, 4),
                 "size_ratio": None if ratio is None else round(ratio, 3), "moved": moved}
        result = ok(value)
        return CallOutcome(result, format_receipt("compare_object_observations", result, [
            ("displacement_m", np.round(disp, 4)), ("xy_distance_m", xy), ("moved", moved)]))

    def close(self) -> None:
        """Stop the image writer threads (the object stays usable for measurements)."""
        self._writer.shutdown(wait=True)

    # ------------------------------------------------------------------ timing
    def timed(self, name: str, *args: Any, **kwargs: Any) -> tuple[CallOutcome, float]:
        """Call a primitive by name and return its outcome and wall time (s); for benchmarks."""
        t = time.perf_counter()
        out = getattr(self, name)(*args, **kwargs)
        return out, time.perf_counter() - t


def build(driver: RobotDriver, workspace: str | Path, robot_state: RobotStateProvider | None = None) -> Perception:
    """Factory of the ``captain.primitives`` entry point: the perception and measurement
    calls over ``driver``, saving frames in ``workspace``, with the harness's robot state."""
    return Perception(driver, workspace, robot_state=robot_state)
