"""Choosing among detections and re-finding one: ``select_detection``, ``track_target``."""

from __future__ import annotations

from typing import Any

import numpy as np

from captain_harness.core.api import primitive
from captain_harness.core.arguments import as_choice, as_position
from captain_harness.core.results import CallOutcome, format_receipt, ok
from captain_perception.core.detections import detection_mask
from captain_perception.core.errors import InvalidPerceptionArgument, NothingFoundError
from captain_perception.core.perception_base import SELECT_CRITERIA, PerceptionBase
from captain_perception.core.tracking import appearance_of, track


class SelectionCalls(PerceptionBase):
    """``select_detection`` and ``track_target``."""

    @primitive(group="perception")
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

