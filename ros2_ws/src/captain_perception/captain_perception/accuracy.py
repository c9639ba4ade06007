"""Measurement accuracy on rendered scenes, object by object, with the cause of each error:
tests and benchmarks only.

Each object a camera sees well enough (``min_visible_px``, its silhouette off the image
border) is clicked once near the middle of its visible pixels with
``mark_point(granularity="object")`` and measured with ``measure_object_geometry``,
exactly as a policy would; the calls see only the frames. The result is scored against
the simulator's truth (``scenes.SceneRecord``): centre error (3-D, the bounding-box
centre of the object's meshes) and footprint radius error, millimetres.

Every scored object also gets a **cause class**, from the truth, so a bench can say what
makes the tail:

* ``merged``: the measured region holds a neighbouring object's pixels (more than
  ``MERGED_SHARE`` of the region, or of the neighbour);
* ``liner/container``: merged with, standing in, or being a container (basket, caddy);
* ``partly hidden``: the camera sees less than ``1 - HIDDEN_SHARE`` of the silhouette
  the object would have with nothing in front of it;
* ``region-goal``: standing on a fixture's region (stove, cabinet top, drawer, rack), or
  merged with the fixture;
* ``thin or tall``: narrower than ``THIN_M`` or taller than its footprint is wide;
* ``on plate``: standing on a plate (or a plate with something on it);
* ``plain``: none of these.

The first that applies is the class.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from captain_perception.scenes import CAMERAS, SceneRecord

MERGED_SHARE = 0.1
HIDDEN_SHARE = 0.15
THIN_M = 0.03
#: Substrings of entity names that are containers or plates (for the cause labels only;
#: the measurement itself never sees names).
CONTAINER_WORDS = ("basket", "caddy", "tray")
PLATE_WORDS = ("plate",)
CAUSES = ("merged", "liner/container", "partly hidden", "region-goal", "thin or tall", "on plate", "plain")


@dataclass(frozen=True)
class ObjectScore:
    """One measured object.

    Attributes:
        scene / camera / name: where and what.
        center_err_mm / radius_err_mm: errors against the truth (NaN when the call failed).
        center_xy_err_mm / center_z_err_mm: the centre error across and (signed,
            measured minus true) along z.
        cause: the cause class (see the module docstring).
        detail: what the class is based on (the neighbour merged with, the hidden share).
        iou: intersection over union of the measured region and the object's true pixels.
        failed: the message of a failed call, else ``""``.
    """

    scene: str
    camera: str
    name: str
    center_err_mm: float
    radius_err_mm: float
    cause: str
    detail: str
    iou: float
    failed: str = ""
    center_xy_err_mm: float = float("nan")
    center_z_err_mm: float = float("nan")

    @property
    def worst_mm(self) -> float:
        """The larger of the two errors (inf for a failed call)."""
        if self.failed:
            return float("inf")
        return max(self.center_err_mm, self.radius_err_mm)


class _ReplayDriver:
    """Stands in for a driver: ``capture()`` returns a record's frames."""

    def __init__(self, record: SceneRecord) -> None:
        self.record = record

    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, Any]:
        return {k: f for k, f in self.record.frames.items() if names is None or k in names}


def _is(name: str, words: tuple[str, ...]) -> bool:
    return any(w in name for w in words)


def classify(record: SceneRecord, camera: str, name: str, region: np.ndarray | None) -> tuple[str, str]:
    """Cause class and detail of one object in one camera (see the module docstring)."""
    merged_with = ""
    if region is not None and region.any():
        ent = record.entity_at(camera)
        names = record.entity_names
        own = names.index(name)
        inside = ent[region]
        best = 0.0
        for k in np.unique(inside):
            if k < 0 or k == own:
                continue
            n_k = int((inside == k).sum())
            other_px = int((ent == k).sum())
            share = max(n_k / max(len(inside), 1), n_k / max(other_px, 1) if names[k] in record.objects else 0.0)
            if share > MERGED_SHARE and share > best:
                best, merged_with = share, names[k]
    touches = record.touches.get(name, [])
    if merged_with:
        if _is(merged_with, CONTAINER_WORDS) or _is(name, CONTAINER_WORDS):
            return "liner/container", f"with {merged_with}"
        if merged_with not in record.objects:
            return "region-goal", f"merged with {merged_with}"
        return "merged", f"with {merged_with}"
    vis = record.visible_px[camera][name]
    unocc = max(record.unoccluded_px[camera][name], 1)
    hidden = 1.0 - vis / unocc
    if hidden > HIDDEN_SHARE:
        return "partly hidden", f"{hidden:.0%} hidden"
    if _is(name, CONTAINER_WORDS) or any(_is(t, CONTAINER_WORDS) for t in touches):
        return "liner/container", ",".join(touches) or name
    fixtures = [t for t in touches if t not in record.objects]
    if fixtures:
        return "region-goal", f"on {fixtures[0]}"
    t = record.truth[name]
    width = min(t["size_xy_m"])
    height = t["top_z_m"] - t["bottom_z_m"]
    if width < THIN_M or height > max(t["size_xy_m"]):
        return "thin or tall", f"{width * 100:.1f} cm wide, {height * 100:.1f} cm tall"
    if _is(name, PLATE_WORDS) or any(_is(t_, PLATE_WORDS) for t_ in touches):
        return "on plate", ",".join(touches)
    return "plain", ""


def score_record(record: SceneRecord, min_visible_px: int = 400, cameras: tuple[str, ...] = CAMERAS,
                 workspace: str | None = None) -> list[ObjectScore]:
    """Measure every well-seen object of a record from each camera and score it."""
    from captain_perception.core.primitives import Perception

    out: list[ObjectScore] = []
    with tempfile.TemporaryDirectory(prefix="captain_accuracy_") as tmp:
        perception = Perception(_ReplayDriver(record), workspace or tmp,  # type: ignore[arg-type]
                                robot_state=lambda: {"end_effector_position_m": None})
        try:
            handle = perception.observe().result["value"]["observation_handle"]
            for camera in cameras:
                if camera not in record.frames:
                    continue
                w, h = record.frames[camera].size_px
                for name in record.objects:
                    if record.at_border[camera][name] or record.visible_px[camera][name] < min_visible_px:
                        continue
                    out.append(_score_one(perception, record, handle, camera, name, w, h))
        finally:
            perception.close()
    return out


def _score_one(perception: Any, record: SceneRecord, handle: str, camera: str, name: str, w: int, h: int
               ) -> ObjectScore:
    mask = record.object_mask(camera, name)
    inner = cv2.erode(mask.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
    if not inner.any():
        inner = mask
    ys, xs = np.nonzero(inner)
    k = int(np.argmin((xs - xs.mean()) ** 2 + (ys - ys.mean()) ** 2))
    scene = record.spec.key
    mark = perception.mark_point(handle, camera, (xs[k] + 0.5) / w, (ys[k] + 0.5) / h, label=name,
                                 granularity="object").result
    if not mark["success"]:
        cause, detail = classify(record, camera, name, None)
        return ObjectScore(scene, camera, name, float("nan"), float("nan"), cause, detail, 0.0, mark["message"])
    det_id = mark["value"]["detection_id"]
    region = perception.store.detection(det_id).mask.full()
    iou = float((region & mask).sum() / max((region | mask).sum(), 1))
    cause, detail = classify(record, camera, name, region)
    geo = perception.measure_object_geometry(det_id).result
    if not geo["success"]:
        return ObjectScore(scene, camera, name, float("nan"), float("nan"), cause, detail, iou, geo["message"])
    g = geo["value"]["object"]
    t = record.truth[name]
    centre = float(np.linalg.norm(np.array(g["center_m"]) - np.array(t["center_m"])) * 1000.0)
    radius = float(abs(g["footprint"]["radius_m"] - t["radius_m"]) * 1000.0)
    xy = float(np.linalg.norm(np.array(g["center_m"][:2]) - np.array(t["center_m"][:2])) * 1000.0)
    dz = float((g["center_m"][2] - t["center_m"][2]) * 1000.0)
    return ObjectScore(scene, camera, name, centre, radius, cause, detail, iou, "", xy, dz)


def summarise(scores: list[ObjectScore]) -> dict[str, float]:
    """Medians and 90th percentiles of the errors over the scored objects (failed calls
    count as infinitely wrong in the percentiles and are also counted separately)."""
    ok = [s for s in scores if not s.failed]
    c = np.array([s.center_err_mm for s in scores if not s.failed] + [np.inf] * (len(scores) - len(ok)))
    r = np.array([s.radius_err_mm for s in scores if not s.failed] + [np.inf] * (len(scores) - len(ok)))

    def pct(v: np.ndarray, q: float) -> float:
        return float(np.percentile(v, q, method="higher")) if len(v) else float("nan")

    return {"center_err_mm_median": pct(c, 50), "center_err_mm_p90": pct(c, 90),
            "radius_err_mm_median": pct(r, 50), "radius_err_mm_p90": pct(r, 90),
            "objects_scored": float(len(ok)), "objects_failed": float(len(scores) - len(ok))}


def tail_table(scores: list[ObjectScore], limit_mm: float = 5.0) -> str:
    """Readable list of the objects whose centre or radius error exceeds ``limit_mm`` (and
    the failed calls), worst first, and the count of each cause class among them."""
    tail = sorted([s for s in scores if s.worst_mm > limit_mm], key=lambda s: -s.worst_mm)
    width = max([len(s.scene) for s in tail] + [5])  # arranged scenes differ only at the end of their key
    lines = [f"measurement tail: {len(tail)} of {len(scores)} objects off by more than {limit_mm:g} mm",
             f"{'scene':<{width}} {'camera':<18} {'object':<32} {'centre':>7} {'radius':>7} {'IoU':>5}  cause"]
    for s in tail:
        err = "failed" if s.failed else f"{s.center_err_mm:7.1f} {s.radius_err_mm:7.1f}"
        lines.append(f"{s.scene:<{width}} {s.camera:<18} {s.name[:32]:<32} {err:>15} {s.iou:5.2f}  "
                     f"{s.cause}{' (' + s.detail + ')' if s.detail else ''}")
    counts = {c: sum(1 for s in tail if s.cause == c) for c in CAUSES}
    lines.append("tail by cause: " + ", ".join(f"{c} {n}" for c, n in counts.items() if n) if tail else
                 "tail by cause: none")
    everyone = {c: sum(1 for s in scores if s.cause == c) for c in CAUSES}
    lines.append("scored by cause: " + ", ".join(f"{c} {n}" for c, n in everyone.items() if n))
    return "\n".join(lines)
