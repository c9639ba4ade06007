"""The observing calls: ``observe``, ``mark_point``, ``segment``, ``point``."""

from __future__ import annotations

from typing import Any

import numpy as np

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA
from captain_harness.core.api import primitive
from captain_harness.core.arguments import as_choice, as_int
from captain_harness.core.geometry import matrix_to_quat
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok
from captain_perception.core.backproject import normalised_to_pixel
from captain_perception.core.detections import detection_mask, mask_outline_uv
from captain_perception.core.errors import InvalidPerceptionArgument, NothingFoundError, PerceptionError
from captain_perception.core.perception_base import GRANULARITIES, IMAGE_SUFFIX, PerceptionBase


class ObservingCalls(PerceptionBase):
    """``observe`` and the calls that turn pixels or words into detections."""

    # ============================================================== perception
    @primitive(group="perception")
    def observe(self) -> CallOutcome:
        """Capture head and wrist RGB-D (512 x 512) with intrinsics and camera poses.

        Saves the frames as ``obs_<kkk>_head.png`` (k as 3 digits) and ``obs_<kkk>_wrist.png`` in the
        workspace. Value: ``observation_handle`` (pass it to mark_point, segment, ...),
        ``images`` (file names for image()), ``robot_state`` with
        ``end_effector_position_m`` (base frame, m), and ``cameras``: per camera
        ``K`` (3x3 px), ``T_base_camera`` (4x4, OpenCV optical frame in the base frame),
        ``position_m``, ``quaternion_wxyz``, ``width_px``, ``height_px``;
        ``robot_self_filter``: ``"kinematic"`` when the robot's own pixels (from its
        kinematic model) are left out of every later call on this observation.
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
        obs = self.store.add_observation(frames, state, images, robot_masker=self._robot_masker(frames))
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
        value = {"observation_handle": obs.handle, "images": ordered, "robot_state": state, "cameras": cams,
                 "robot_self_filter": "kinematic" if obs.robot_masker is not None else
                 f"off ({self.self_filter_error})"}
        result = ok(value)
        fields: list[tuple[str, Any]] = [("observation_handle", obs.handle), ("images", ordered)]
        if state.get("end_effector_position_m") is not None:
            fields.append(("end_effector_position_m", state["end_effector_position_m"]))
        return CallOutcome(result, format_receipt("observe", result, fields))

    @primitive(group="perception")
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
        if self._on_robot(obs, camera, x, y):
            raise NothingFoundError(f"(u={float(u):.3f}, v={float(v):.3f}) in {camera} is on the robot itself (its "
                                    "arm or gripper, from its kinematic model); choose a pixel on the object or "
                                    "surface you mean, clear of the robot")
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
    def point(self, observation_handle: str, camera: str, text: str, max_points: int = 5) -> CallOutcome:
        """Ask the pointing model (Molmo2 in the paper) where ``text`` is; points become detections.

        Needs an OpenAI-compatible endpoint in the configuration; without one the call
        fails with ``not_available``. Points on the robot itself are skipped. Value:
        ``detections`` (``detection_id``, ``position_m``, ``pixel_uv``), ``detection_id``
        of the first, ``raw_text``, ``skipped_no_depth``, ``skipped_on_robot``.
        """
        obs = self.store.observation(observation_handle)
        camera = self._camera(obs, camera)
        if not isinstance(text, str) or not text.strip():
            raise InvalidPerceptionArgument("text must be a non-empty string naming the object, e.g. 'red mug'")
        max_points = as_int("max_points", max_points, minimum=1, maximum=20)
        frame = obs.frames[camera]
        answer = self.pointer.point(frame.rgb, text.strip())
        w, h = frame.size_px
        dets, skipped, on_robot = [], 0, 0
        for u, v in answer.points_uv[:max_points]:
            x, y = normalised_to_pixel(u, v, w, h)
            x, y = float(np.clip(x, 0, w - 1)), float(np.clip(y, 0, h - 1))
            if self._on_robot(obs, camera, x, y):
                on_robot += 1
                continue
            try:
                position, sd = self._surface_point(obs, camera, x, y)
            except NothingFoundError:
                skipped += 1
                continue
            det = self.store.add_detection(obs, camera, "point", text, (x, y), position,
                                           info={"depth_m": sd.depth_m})
            dets.append(self._detection_summary(det))
        if not dets:
            why = f"are on the robot itself ({on_robot}) or have no depth ({skipped})" if on_robot else "have no depth"
            raise NothingFoundError(f"the pointing model's {len(answer.points_uv)} point(s) for {text!r} {why}")
        value = {"detections": dets, "detection_id": dets[0]["detection_id"], "count": len(dets),
                 "raw_text": answer.raw_text[:500], "latency_s": round(answer.latency_s, 3),
                 "skipped_no_depth": skipped, "skipped_on_robot": on_robot}
        result = ok(value)
        fields = [("detections", [d["detection_id"] for d in dets]), ("position_m", np.round(dets[0]["position_m"], 4))]
        return CallOutcome(result, format_receipt("point", result, fields))

