"""Rendered LIBERO scenes with their simulator truth, for scoring perception: tests and
benchmarks only.

A ``SceneRecord`` holds what one scene looks like to the cameras (RGB-D frames of the
head and wrist cameras, with intrinsics and poses) together with privileged truth that
the policy never sees: the simulator's per-pixel geom ids, each object's true geometry
(``groundtruth.ObjectTruth``), how much of each object each camera sees against what it
would see with nothing in front of it (``visible_px`` / ``unoccluded_px``), and what
each object touches. Records are plain arrays and can be cached on disk (``load_or_render``),
so the measurement can be re-scored without rendering again.

``ACCURACY_SCENES`` covers the four LIBERO suites: official initial states and
arrangements made with ``arrange.py`` (touching pairs, objects on plates and in baskets).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA, CameraFrame

CAMERAS = (HEAD_CAMERA, WRIST_CAMERA)
#: Bump when the contents of a record change, so cached records are rendered again.
RECORD_VERSION = 1


@dataclass(frozen=True)
class SceneSpec:
    """One scene: a LIBERO task, an official initial state and moves made before rendering.

    Attributes:
        task: task id, e.g. ``"libero_spatial/0"``.
        state: official initial state index.
        moves: ``("on", object, support)`` drops the object onto the support;
            ``("beside", object, other, dx, dy)`` pushes it against ``other`` from
            direction (dx, dy).
        note: what the scene shows (printed by the bench).
    """

    task: str
    state: int
    moves: tuple[tuple[Any, ...], ...] = ()
    note: str = ""

    @property
    def key(self) -> str:
        """File-safe name of the scene."""
        parts = [self.task.replace("/", "-"), f"s{self.state}"]
        for mv in self.moves:
            parts.append("_".join(str(v) for v in mv))
        return "__".join(parts).replace(".", "p").replace("-0p", "-0")


_BOWL_1, _BOWL_2, _PLATE, _RAMEKIN = ("akita_black_bowl_1", "akita_black_bowl_2", "plate_1",
                                      "glazed_rim_porcelain_ramekin_1")

#: Scenes of the accuracy figures: all four suites; official states, then arranged ones.
ACCURACY_SCENES: tuple[SceneSpec, ...] = (
    SceneSpec("libero_spatial/0", 11), SceneSpec("libero_spatial/0", 12), SceneSpec("libero_spatial/0", 13),
    SceneSpec("libero_spatial/3", 11), SceneSpec("libero_spatial/5", 11), SceneSpec("libero_spatial/7", 11),
    SceneSpec("libero_spatial/4", 11), SceneSpec("libero_spatial/9", 11),
    SceneSpec("libero_object/0", 11), SceneSpec("libero_object/4", 11), SceneSpec("libero_object/8", 11),
    SceneSpec("libero_goal/8", 11), SceneSpec("libero_goal/6", 12),
    SceneSpec("libero_10/0", 11), SceneSpec("libero_10/2", 11), SceneSpec("libero_10/4", 11),
    SceneSpec("libero_10/5", 11), SceneSpec("libero_10/6", 11), SceneSpec("libero_10/8", 11),
    SceneSpec("libero_spatial/0", 11, (("on", _BOWL_1, _PLATE),), "bowl on the plate"),
    SceneSpec("libero_spatial/0", 11, (("beside", _BOWL_1, _RAMEKIN, 0.0, 1.0, 0.12),), "bowl against ramekin"),
    SceneSpec("libero_spatial/0", 11, (("beside", _BOWL_1, _BOWL_2, 1.0, 0.0, 0.16),), "two bowls touching"),
    SceneSpec("libero_object/0", 11, (("on", "alphabet_soup_1", "basket_1"),), "can in the basket"),
    SceneSpec("libero_object/0", 11, (("on", "cream_cheese_1", "basket_1"),), "box in the basket"),
    SceneSpec("libero_10/0", 11, (("on", "butter_1", "basket_1"),), "box in the basket"),
    SceneSpec("libero_10/4", 11, (("on", "porcelain_mug_1", "plate_1"),), "mug on a plate"),
    SceneSpec("libero_goal/8", 11, (("on", "cream_cheese_1", "plate_1"),), "box on the plate"),
    SceneSpec("libero_10/6", 11, (("beside", "chocolate_pudding_1", "porcelain_mug_1", 1.0, 0.0, 0.1),),
              "box against a mug"),
)


@dataclass
class SceneRecord:
    """One rendered scene and its truth (see the module docstring).

    Attributes:
        spec: the scene.
        frames: camera -> frame (base-frame poses).
        segmentation: camera -> (H, W) geom id per pixel (-1: nothing).
        geoms: entity (objects and fixtures) -> rendered geom ids.
        objects: the movable objects.
        truth: object -> ``center_m``, ``top_z_m``, ``bottom_z_m``, ``radius_m``,
            ``size_xy_m`` (axis-aligned x, y extents), base frame, metres.
        visible_px / unoccluded_px: camera -> object -> pixels seen / pixels it would
            cover with nothing in front of it (within the image).
        at_border: camera -> object -> the unoccluded silhouette reaches the image border.
        touches: object -> entities it touches (not the table or floor).
    """

    spec: SceneSpec
    frames: dict[str, CameraFrame]
    segmentation: dict[str, np.ndarray]
    geoms: dict[str, np.ndarray]
    objects: list[str]
    truth: dict[str, dict[str, Any]]
    visible_px: dict[str, dict[str, int]] = field(default_factory=dict)
    unoccluded_px: dict[str, dict[str, int]] = field(default_factory=dict)
    at_border: dict[str, dict[str, bool]] = field(default_factory=dict)
    touches: dict[str, list[str]] = field(default_factory=dict)

    def object_mask(self, camera: str, name: str) -> np.ndarray:
        """Pixels of a camera that see the entity."""
        return np.isin(self.segmentation[camera], self.geoms[name])

    def entity_at(self, camera: str) -> np.ndarray:
        """(H, W) index into ``entity_names`` of the entity each pixel sees (-1: none of them)."""
        seg = self.segmentation[camera]
        out = np.full(seg.shape, -1, np.int32)
        for k, name in enumerate(self.entity_names):
            out[np.isin(seg, self.geoms[name])] = k
        return out

    @property
    def entity_names(self) -> list[str]:
        """Objects and fixtures, in a fixed order."""
        return list(self.geoms)

    # ------------------------------------------------------------------ disk
    def save(self, path: Path) -> None:
        """Write the record as one ``.npz`` file."""
        arrays: dict[str, np.ndarray] = {}
        for cam, f in self.frames.items():
            arrays[f"{cam}.rgb"] = np.asarray(f.rgb)
            arrays[f"{cam}.depth"] = np.asarray(f.depth_m, np.float32)
            arrays[f"{cam}.K"] = np.asarray(f.K, float)
            arrays[f"{cam}.T"] = np.asarray(f.T_base_camera, float)
            arrays[f"{cam}.seg"] = self.segmentation[cam].astype(np.int32)
        for name, g in self.geoms.items():
            arrays[f"geoms.{name}"] = np.asarray(g, np.int32)
        meta = {"version": RECORD_VERSION, "task": self.spec.task, "state": self.spec.state,
                "moves": [list(m) for m in self.spec.moves], "note": self.spec.note, "objects": self.objects,
                "truth": self.truth, "visible_px": self.visible_px, "unoccluded_px": self.unoccluded_px,
                "at_border": self.at_border, "touches": self.touches, "cameras": list(self.frames),
                "entities": list(self.geoms)}
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> SceneRecord:
        """Read a record written by ``save`` (ValueError when it is of another version)."""
        with np.load(path) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if meta.get("version") != RECORD_VERSION:
                raise ValueError(f"{path} is a record of version {meta.get('version')}, not {RECORD_VERSION}")
            frames = {cam: CameraFrame(name=cam, rgb=z[f"{cam}.rgb"], depth_m=z[f"{cam}.depth"], K=z[f"{cam}.K"],
                                       T_base_camera=z[f"{cam}.T"], time_s=0.0) for cam in meta["cameras"]}
            seg = {cam: z[f"{cam}.seg"] for cam in meta["cameras"]}
            geoms = {name: z[f"geoms.{name}"] for name in meta["entities"]}
        spec = SceneSpec(meta["task"], int(meta["state"]), tuple(tuple(m) for m in meta["moves"]), meta["note"])
        return cls(spec=spec, frames=frames, segmentation=seg, geoms=geoms, objects=list(meta["objects"]),
                   truth=meta["truth"], visible_px=meta["visible_px"], unoccluded_px=meta["unoccluded_px"],
                   at_border=meta["at_border"], touches=meta["touches"])


def apply_moves(driver: Any, spec: SceneSpec) -> None:
    """Make the scene's moves in a driver that shows its task and state."""
    from captain_perception import arrange

    for mv in spec.moves:
        if mv[0] == "on":
            arrange.put_on(driver, mv[1], mv[2])
        elif mv[0] == "beside":
            arrange.put_beside(driver, mv[1], mv[2], (float(mv[3]), float(mv[4])), float(mv[5]))
        else:
            raise ValueError(f"unknown move {mv[0]!r}: use 'on' or 'beside'")


def render_record(driver: Any, spec: SceneSpec) -> SceneRecord:
    """Load the scene in a configured ``LiberoDriver`` and render its record."""
    from captain_perception import arrange
    from captain_perception.groundtruth import RENDERED_GROUPS, SimTruth

    if driver.task_info().task_id != spec.task:
        driver.load_task(spec.task, init_state=spec.state)
    else:
        driver.reset(init_state=spec.state)
    apply_moves(driver, spec)
    frames = driver.capture((HEAD_CAMERA, WRIST_CAMERA))
    truth = SimTruth.from_libero(driver, include_fixtures=True)
    s = driver.scene
    objects = list(s.object_names)
    geoms = {name: truth.geoms(name) for name in truth.objects}
    seg, visible, unoccluded, border = {}, {}, {}, {}
    m = truth.model
    saved_groups = m.geom_group.copy()
    try:
        for cam, f in frames.items():
            w, h = f.size_px
            seg[cam] = truth.segmentation(cam, w, h)
            visible[cam], unoccluded[cam], border[cam] = {}, {}, {}
            for name in objects:
                visible[cam][name] = int(np.isin(seg[cam], geoms[name]).sum())
                others = np.setdiff1d(np.flatnonzero(np.isin(saved_groups, RENDERED_GROUPS)), geoms[name])
                m.geom_group[others] = 5
                alone = truth.segmentation(cam, w, h) >= 0
                m.geom_group[:] = saved_groups
                unoccluded[cam][name] = int(alone.sum())
                border[cam][name] = bool(alone[0].any() or alone[-1].any() or alone[:, 0].any() or alone[:, -1].any())
    finally:
        m.geom_group[:] = saved_groups
    table_like = {"floor"} | {n for n in s.fixture_names if "table" in n or n == "countertop"}
    entities = [n for n in truth.objects if n not in table_like]
    touches = {name: arrange.contacts_of(driver, name, entities) for name in objects}
    out = {}
    for name in objects:
        t = truth.object_truth(name)
        P = truth.vertices_base(name)
        out[name] = {"center_m": t.center_m.tolist(), "top_z_m": t.top_z_m, "bottom_z_m": t.bottom_z_m,
                     "radius_m": t.radius_m, "size_xy_m": (P[:, :2].max(0) - P[:, :2].min(0)).tolist()}
    truth.close()
    return SceneRecord(spec=spec, frames=frames, segmentation=seg, geoms=geoms, objects=objects, truth=out,
                       visible_px=visible, unoccluded_px=unoccluded, at_border=border, touches=touches)


def load_or_render(specs: tuple[SceneSpec, ...], cache_dir: str | Path | None = None, driver: Any = None,
                   **options: Any) -> list[SceneRecord]:
    """Records of the scenes, read from ``cache_dir`` where present, else rendered (and
    written there). A driver is created (and shut down) only when something must be rendered."""
    cache = Path(cache_dir) if cache_dir else None
    records: list[SceneRecord | None] = []
    todo = []
    for i, spec in enumerate(specs):
        rec = None
        if cache is not None and (cache / f"{spec.key}.npz").exists():
            try:
                rec = SceneRecord.load(cache / f"{spec.key}.npz")
            except (ValueError, KeyError, OSError):
                rec = None
        records.append(rec)
        if rec is None:
            todo.append(i)
    if todo:
        own = driver is None
        if own:
            os.environ.setdefault("MUJOCO_GL", "egl")
            from captain_backends.core.libero.driver import LiberoDriver

            first = specs[todo[0]]
            driver = LiberoDriver(task=first.task, init_state=first.state, **options)
            driver.configure()
        try:
            for i in todo:
                rec = render_record(driver, specs[i])
                if cache is not None:
                    rec.save(cache / f"{specs[i].key}.npz")
                records[i] = rec
        finally:
            if own:
                driver.shutdown()
    return [r for r in records if r is not None]
