"""``captain bench perception``: latency per call and accuracy against simulator truth.

Scenes: official LIBERO initial states rendered at 512 x 512 by the LIBERO driver.
Ground truth (``groundtruth.py``) is used only to choose where to click and to score;
the calls themselves see only the camera frames, as at run time.

* ``mark_point_err_mm_*``: 3-D distance between ``mark_point``'s position and the
  surface point a ray through the same pixel hits (pixels sampled on each visible
  movable object, away from its silhouette), millimetres.
* ``center_err_mm_*`` / ``radius_err_mm_*``: ``measure_object_geometry`` after
  ``mark_point(..., granularity="object")`` near the middle of each object a camera sees
  (head and wrist cameras) on the scenes of ``scenes.ACCURACY_SCENES`` (all four LIBERO
  suites: official initial states and arranged ones with touching pairs, objects on
  plates and in baskets, partly hidden objects), against the object's mesh (bounding-box
  centre; radius of the smallest circle containing its outline from above), millimetres
  (``accuracy.py``). ``objects_scored`` counts them; before the figures the bench prints
  the tail: every object off by more than 5 mm, with its scene, camera, errors and cause
  class (merged with a neighbour, liner/container, partly hidden, region-goal, thin or
  tall, on plate, plain). ``scene_cache=<folder>`` keeps the rendered scenes there and
  reads them back on later runs; ``timing=false`` skips the timed part.
  ``head_center_err_mm_*`` / ``head_radius_err_mm_*``: the earlier figures, from the head
  camera on the timed scenes only.
* ``observe_mark_measure_ms``: median wall time of ``observe()`` + ``mark_point`` +
  ``measure_object_geometry`` on one object of a fresh observation, the first click after
  ``observe()`` (so the frame's point cloud is built inside it; driver rendering
  included; ``observe_mark_measure_without_capture_ms`` the same less the driver's
  rendering), and the parts: ``capture_ms`` (the driver's rendering alone),
  ``observe_ms``, ``robot_mask_ms`` (the self-filter's mask of the camera used, included
  in the total), ``mark_point_ms``, ``mark_point_object_ms``, ``measure_ms``,
  ``segment_ms``.
* ``robot_mask_iou_median`` (and ``_min``, ``_head_median``, ``_wrist_median``): the robot
  self-filter's mask of each camera (computed from the robot's kinematic model) against
  the robot's pixels in the simulator's segmentation, intersection over union, in
  ``robot_mask_poses`` arm poses per timed scene (the official one, then seeded random
  offsets and gripper openings; ``robot_mask_score.py``). The timed calls run with the
  self-filter on (``mark_point`` computes the mask of its camera).
* ``held_center_err_mm_median`` / ``held_offset_err_mm_median`` (and ``_p90``,
  ``held_scored``): an object held in the gripper (``HELD_CASES`` on ``HELD_SCENE``: bowls
  by the rim from either side, a ramekin by the rim, a box across its middle; placed in
  the jaws kinematically, ``held_score.py``) clicked with ``mark_point(granularity=
  "object")`` in the head and the wrist camera and measured with
  ``measure_object_geometry(held, plate)``: centre error against its meshes, and error of
  the object-to-plate xy offset, millimetres. ``held=false`` skips them.
* ``segment_top1_accuracy`` (and ``segment_top1_relational_accuracy``, ``_prompts``):
  ``segment(text)`` in the head camera with the words of LIBERO's own instructions on
  ``grounding_score.GROUNDING_SCENES`` (the ten libero_spatial tasks, two official states
  each; two identical black bowls, told apart only by the relation in the instruction:
  ``"black bowl between the plate and the ramekin"``), right when the best detection is
  the object the task's goal names (IoU >= 0.5); a refusal is wrong. ``grounding=false``
  skips it.
* ``*_cpu_ms``: the same as CPU time of the whole process (every thread: the software
  renderer's, the PNG encoders'), median.

"One core": the bench limits OpenCV and BLAS to one thread and Mesa's llvmpipe
rasteriser to one worker thread (``LP_NUM_THREADS=1``, unless already set; it must be set
before the first GL context, so run the bench in a fresh process). The work is then
serial, and the CPU-time figures are what one dedicated core would take. The wall-clock
figures are what this process got: on a machine whose cores are shared with other work
they include time spent waiting for a core, and are then larger and noisy.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import numpy as np

#: Scene and (object, side, yaw rad) cases of the held-object figures; destination ``plate_1``.
HELD_SCENE = ("libero_spatial/0", 11)
HELD_CASES = (("akita_black_bowl_1", 1, 0.0), ("akita_black_bowl_1", -1, 0.7), ("akita_black_bowl_2", 1, 1.9),
              ("glazed_rim_porcelain_ramekin_1", 1, 0.3), ("glazed_rim_porcelain_ramekin_1", -1, 2.4),
              ("cookies_1", 1, 0.0), ("cookies_1", 1, 1.2))
DEFAULT_SCENES = (("libero_spatial/0", 11), ("libero_spatial/0", 12), ("libero_spatial/0", 13),
                  ("libero_spatial/3", 11), ("libero_spatial/5", 11), ("libero_spatial/7", 11))


def _single_thread() -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "LP_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    import cv2

    cv2.setNumThreads(1)


def run(scenes: tuple[tuple[str, int], ...] = DEFAULT_SCENES, points_per_object: int = 4,
        min_visible_px: int = 400, seed: int = 0, scene_cache: str | None = None, timing: bool = True,
        tail_mm: float = 5.0, robot_mask_poses: int = 2, held: bool = True, grounding: bool = True,
        **options: Any) -> dict[str, float]:
    """Score and time perception on LIBERO scenes (see the module docstring).

    Args:
        scenes: (task id, official initial state) pairs of the timed part and of
            ``mark_point_err_mm_*``.
        points_per_object: pixels clicked per visible object for ``mark_point``.
        min_visible_px: objects with fewer visible pixels (in that camera) are skipped.
        seed: seed of the pixel sampling.
        scene_cache: folder for rendered accuracy scenes (read when present), or None.
        timing: run the timed part (``False``: accuracy figures only).
        tail_mm: objects off by more than this are listed in the printed tail.
        robot_mask_poses: arm poses per timed scene scored for ``robot_mask_iou_*``.
        held: score the held-object figures.
        grounding: score ``segment_top1_accuracy``.
        options: extra ``LiberoDriver`` options.
    """
    _single_thread()
    os.environ.setdefault("MUJOCO_GL", "egl")
    import cv2

    from captain_backends.core.driver import HEAD_CAMERA
    from captain_backends.core.libero.driver import LiberoDriver
    from captain_perception import accuracy
    from captain_perception.core.primitives import Perception
    from captain_perception.groundtruth import SimTruth
    from captain_perception.robot_mask_score import arm_poses, score_poses
    from captain_perception.scenes import ACCURACY_SCENES, load_or_render

    rng = np.random.default_rng(seed)
    mark_err, centre_err, centre_xy_err, radius_err = [], [], [], []
    t_capture, t_observe, t_mark, t_mark_obj, t_measure, t_segment, t_total = [], [], [], [], [], [], []
    t_own: list[float] = []
    mask_scores: list[Any] = []
    t_mask: list[float] = []
    c_mask: list[float] = []
    c_capture, c_observe, c_total, c_own = [], [], [], []
    driver: LiberoDriver | None = None
    workspace = tempfile.mkdtemp(prefix="captain_bench_perception_")
    try:
        for task, state in scenes if timing else ():
            if driver is None:
                driver = LiberoDriver(task=task, init_state=state, **options)
                driver.configure()
            else:
                driver.load_task(task, init_state=state)
            truth = SimTruth.from_libero(driver)
            perception = Perception(driver, workspace)
            # warm caches of the driver and of numpy/cv2 code paths, then time
            perception.observe()
            t, c = time.perf_counter(), time.process_time()
            driver.capture()
            t_capture.append(time.perf_counter() - t)
            c_capture.append(time.process_time() - c)

            c = time.process_time()
            obs, dt = perception.timed("observe")
            t_observe.append(dt)
            c_observe.append(time.process_time() - c)
            handle = obs.result["value"]["observation_handle"]
            # the self-filter's mask of the head camera (computed on first use of the
            # camera, i.e. by the first mark_point below; timed here, then cached)
            t, c = time.perf_counter(), time.process_time()
            perception.store.observation(handle).robot_mask(HEAD_CAMERA)
            t_mask.append(time.perf_counter() - t)
            c_mask.append(time.process_time() - c)
            frame = perception.store.observation(handle).frames[HEAD_CAMERA]
            seg = truth.segmentation(HEAD_CAMERA, *frame.size_px)
            first = True
            for name in truth.objects:
                mask = truth.object_mask(seg, name)
                if mask.sum() < min_visible_px:
                    continue
                inner = cv2.erode(mask.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
                ys, xs = np.nonzero(inner)
                if len(xs) == 0:
                    continue
                w, h = frame.size_px
                # object measurement, clicking near the middle of the visible part; first after
                # observe(), so the timed sum pays for everything a policy's first click does
                # (the frame's point cloud included)
                k = int(np.argmin((xs - xs.mean()) ** 2 + (ys - ys.mean()) ** 2))
                c = time.process_time()
                out, dt_mark = perception.timed("mark_point", handle, HEAD_CAMERA, (xs[k] + 0.5) / w,
                                                (ys[k] + 0.5) / h, label=name, granularity="object")
                t_mark_obj.append(dt_mark)
                if out.result["success"]:
                    geo, dt_meas = perception.timed("measure_object_geometry", out.result["value"]["detection_id"])
                    c_mark_measure = time.process_time() - c
                    t_measure.append(dt_meas)
                    if first:
                        t_total.append(t_observe[-1] + t_mask[-1] + dt_mark + dt_meas)
                        t_own.append(t_observe[-1] - t_capture[-1] + t_mask[-1] + dt_mark + dt_meas)
                        c_total.append(c_observe[-1] + c_mask[-1] + c_mark_measure)
                        c_own.append(c_observe[-1] - c_capture[-1] + c_mask[-1] + c_mark_measure)
                        first = False
                    if geo.result["success"]:
                        g = geo.result["value"]["object"]
                        true = truth.object_truth(name)
                        centre_err.append(np.linalg.norm(np.array(g["center_m"]) - true.center_m) * 1000)
                        centre_xy_err.append(np.linalg.norm(np.array(g["center_xy_m"]) - true.center_m[:2]) * 1000)
                        radius_err.append(abs(g["footprint"]["radius_m"] - true.radius_m) * 1000)
                # point clicks on the object (the frame's point cloud is built by now)
                for k in rng.choice(len(xs), size=min(points_per_object, len(xs)), replace=False):
                    x, y = float(xs[k]), float(ys[k])
                    hit, geom = truth.raycast(frame, x, y)
                    if hit is None or geom not in truth.geoms(name):
                        continue
                    out, dt = perception.timed("mark_point", handle, HEAD_CAMERA, (x + 0.5) / w, (y + 0.5) / h,
                                               label=name)
                    t_mark.append(dt)
                    if out.result["success"]:
                        mark_err.append(np.linalg.norm(np.array(out.result["value"]["position_m"]) - hit) * 1000)
            _, dt = perception.timed("segment", handle, HEAD_CAMERA, "black bowl")
            t_segment.append(dt)
            if robot_mask_poses > 0:
                mask_scores += score_poses(driver, perception, truth,
                                           arm_poses(driver, robot_mask_poses, seed=seed + len(t_segment)))
            truth.close()
        held_scores: list[Any] = []
        if held:
            if driver is None:
                driver = LiberoDriver(task=HELD_SCENE[0], init_state=HELD_SCENE[1], **options)
                driver.configure()
            held_scores = _held_scores(driver, workspace)
        records = load_or_render(ACCURACY_SCENES, scene_cache, driver, **options)
        if grounding:
            from captain_perception.grounding_score import GROUNDING_SCENES

            grounding_records = load_or_render(GROUNDING_SCENES, scene_cache, driver, **options)
    finally:
        if driver is not None:
            driver.shutdown()

    def med(v: list[float]) -> float:
        return float(np.median(v)) if v else float("nan")

    def p90(v: list[float]) -> float:
        return float(np.percentile(v, 90)) if v else float("nan")

    scores = [s for rec in records for s in accuracy.score_record(rec, min_visible_px)]
    summary = accuracy.summarise(scores)
    print(accuracy.tail_table(scores, tail_mm), flush=True)
    from captain_perception import grounding_score

    ground_scores = [s for rec in (grounding_records if grounding else []) for s in grounding_score.score_record(rec)]
    if ground_scores:
        print(grounding_score.table(ground_scores), flush=True)
    ms = 1000.0
    return {
        "mark_point_err_mm_median": med(mark_err),
        "mark_point_err_mm_p90": p90(mark_err),
        "center_err_mm_median": summary["center_err_mm_median"],
        "center_err_mm_p90": summary["center_err_mm_p90"],
        "radius_err_mm_median": summary["radius_err_mm_median"],
        "radius_err_mm_p90": summary["radius_err_mm_p90"],
        "head_center_err_mm_median": med(centre_err),
        "head_center_err_mm_p90": p90(centre_err),
        "head_center_xy_err_mm_median": med(centre_xy_err),
        "head_radius_err_mm_median": med(radius_err),
        "head_radius_err_mm_p90": p90(radius_err),
        "observe_mark_measure_ms": med(t_total) * ms,
        "observe_mark_measure_without_capture_ms": med(t_own) * ms,
        "capture_ms": med(t_capture) * ms,
        "observe_ms": med(t_observe) * ms,
        "robot_mask_ms": med(t_mask) * ms,
        "robot_mask_cpu_ms": med(c_mask) * ms,
        "mark_point_ms": med(t_mark) * ms,
        "mark_point_object_ms": med(t_mark_obj) * ms,
        "measure_ms": med(t_measure) * ms,
        "segment_ms": med(t_segment) * ms,
        "observe_mark_measure_cpu_ms": med(c_total) * ms,
        "observe_mark_measure_without_capture_cpu_ms": med(c_own) * ms,
        "capture_cpu_ms": med(c_capture) * ms,
        "observe_cpu_ms": med(c_observe) * ms,
        "robot_mask_iou_median": med([s.iou for s in mask_scores]),
        "robot_mask_iou_min": min((s.iou for s in mask_scores), default=float("nan")),
        "robot_mask_iou_head_median": med([s.iou for s in mask_scores if s.camera == HEAD_CAMERA]),
        "robot_mask_iou_wrist_median": med([s.iou for s in mask_scores if s.camera != HEAD_CAMERA]),
        "held_center_err_mm_median": med([s.center_err_mm for s in held_scores if s.center_err_mm is not None]),
        "held_center_err_mm_p90": p90([s.center_err_mm for s in held_scores if s.center_err_mm is not None]),
        "held_offset_err_mm_median": med([s.offset_err_mm for s in held_scores if s.offset_err_mm is not None]),
        "held_offset_err_mm_p90": p90([s.offset_err_mm for s in held_scores if s.offset_err_mm is not None]),
        "held_scored": float(sum(s.center_err_mm is not None for s in held_scores)),
        "points_scored": float(len(mark_err)),
        "objects_scored": summary["objects_scored"],
        "objects_failed": summary["objects_failed"],
        "scenes_scored": float(len(records)),
        **(grounding_score.summarise(ground_scores) if grounding else {}),
    }


def _held_scores(driver: Any, workspace: str) -> list[Any]:
    """Held-object scores of ``HELD_CASES`` with a configured LIBERO driver (printed)."""
    from captain_perception.core.primitives import Perception
    from captain_perception.groundtruth import SimTruth
    from captain_perception.held_score import hold, score_held

    task, state = HELD_SCENE
    out: list[Any] = []
    perception = Perception(driver, workspace)
    for name, side, yaw in HELD_CASES:
        driver.load_task(task, init_state=state)
        truth = SimTruth.from_libero(driver, include_fixtures=True)
        grasp = hold(driver, truth, name, side, yaw)
        for s in score_held(perception, truth, name, grasp, "plate_1"):
            c = "-" if s.center_err_mm is None else f"{s.center_err_mm:.1f}"
            o = "-" if s.offset_err_mm is None else f"{s.offset_err_mm:.1f}"
            print(f"held {s.object:32s} {s.grasp:7s} {s.camera:20s} centre {c:>6s} mm  offset {o:>6s} mm {s.reason}",
                  flush=True)
            out.append(s)
        truth.close()
    perception.close()
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run()))
