"""Scoring measurements of an object held in the gripper: tests and benchmarks only.

A LIBERO object is put in the gripper kinematically (no physics step): the arm stays
where it is, the object is placed upright (turned by a seeded yaw) so that the jaws
close on it, and the fingers are set to touch it. Bowls and other round, hollow
objects are held by the rim (the rim between the fingertips, on either side of the
jaw axis); other objects across their middle. The scene is then observed through
``Perception``, the held object is clicked near the middle of its visible pixels (from
the simulator's segmentation) with ``mark_point(granularity="object")`` in each camera
that sees it, and ``measure_object_geometry(held, destination)`` is compared with the
meshes' truth: the object's centre and its xy offset to the destination's centre.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA

#: Objects whose name has one of these words are held by the rim.
RIM_WORDS = ("bowl", "ramekin", "mug", "cup", "basket")
#: How deep the fingertips reach below a rim or the top of an object, m.
GRIP_DEPTH_M = 0.015
#: Clearance left between a finger and the object, m.
FINGER_CLEARANCE_M = 0.001


@dataclass(frozen=True)
class HeldScore:
    """One held object measured from one camera."""

    object: str
    grasp: str
    camera: str
    center_err_mm: float | None
    offset_err_mm: float | None
    reason: str = ""
    detection_id: str | None = None


def _free_joint_qpos(model: Any, body: int) -> int:
    j = int(model.body_jntadr[body])
    if j < 0:
        raise ValueError(f"body {model.body(body).name!r} has no free joint")
    return int(model.jnt_qposadr[j])


def hold(driver: Any, truth: Any, name: str, side: int = 1, yaw_rad: float = 0.0) -> str:
    """Put object ``name`` in the gripper (see the module docstring); returns the grasp's name."""
    import mujoco

    s = driver.scene
    m, d = s.model, s.data
    tcp = np.asarray(d.site_xpos[m.site("gripper0_grip_site").id], float).copy()
    pad1 = np.asarray(d.geom_xpos[m.geom("gripper0_finger1_pad_collision").id], float)
    pad2 = np.asarray(d.geom_xpos[m.geom("gripper0_finger2_pad_collision").id], float)
    jaw = pad2 - pad1
    jaw[2] = 0.0
    jaw /= np.linalg.norm(jaw)
    qa = _free_joint_qpos(m, truth.objects[name])
    quat = np.array([np.cos(yaw_rad / 2), 0.0, 0.0, np.sin(yaw_rad / 2)])
    d.qpos[qa + 3:qa + 7] = quat
    mujoco.mj_forward(m, d)
    # the object's mesh box and body origin in the world, upright and turned
    T_world_base = np.asarray(truth.T_world_base)
    P = truth.vertices_base(name) @ T_world_base[:3, :3].T + T_world_base[:3, 3]
    origin = np.asarray(d.qpos[qa:qa + 3], float).copy()
    lo, hi = P.min(0), P.max(0)
    centre = 0.5 * (lo + hi)
    rim = any(w in name for w in RIM_WORDS)
    if rim:
        # the wall at the rim: the outline's extent along the jaw axis from the centre
        along = (P - centre) @ jaw
        radius = float(np.max(np.abs(along)))
        target_xy = tcp[:2] + side * jaw[:2] * (radius - 0.004)
        grasp = f"rim{'+' if side > 0 else '-'}"
        width = 0.008
    else:
        target_xy = tcp[:2]
        grasp = "middle"
        width = float(np.ptp((P - centre) @ jaw))
    shift = np.array([target_xy[0] - centre[0], target_xy[1] - centre[1], tcp[2] + GRIP_DEPTH_M - hi[2]])
    d.qpos[qa:qa + 3] = origin + shift
    d.qvel[:] = 0.0
    opening = width + 2 * FINGER_CLEARANCE_M
    q = max(0.0, (opening - s.finger_gap_m) / 2.0)
    d.qpos[s.finger_qpos] = [q, -q]
    mujoco.mj_forward(m, d)
    return grasp


def score_held(perception: Any, truth: Any, name: str, grasp: str, destination: str,
               cameras: tuple[str, ...] = (HEAD_CAMERA, WRIST_CAMERA), min_visible_px: int = 150) -> list[HeldScore]:
    """Observe, click the held object in each camera (and the destination in the head
    camera), measure, and score against the truth."""
    res = perception.observe().result
    handle = res["value"]["observation_handle"]
    obs = perception.store.observation(handle)
    true_obj = truth.object_truth(name)
    true_dest = truth.object_truth(destination)
    true_offset = true_obj.center_m[:2] - true_dest.center_m[:2]

    def click(camera: str, obj: str) -> tuple[str | None, str]:
        w, h = obs.frames[camera].size_px
        mask = truth.object_mask(truth.segmentation(camera, w, h), obj)
        robot = obs.robot_mask(camera)
        if robot is not None:
            mask &= ~robot
        if mask.sum() < min_visible_px:
            return None, f"{int(mask.sum())} px visible"
        inner = cv2.erode(mask.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        inner = inner if inner.any() else mask
        ys, xs = np.nonzero(inner)
        k = int(np.argmin((xs - xs.mean()) ** 2 + (ys - ys.mean()) ** 2))
        out = perception.mark_point(handle, camera, (xs[k] + 0.5) / w, (ys[k] + 0.5) / h, label=obj,
                                    granularity="object").result
        if not out["success"]:
            return None, out["message"]
        return out["value"]["detection_id"], ""

    dest_id, why = click(HEAD_CAMERA, destination)
    scores = []
    for camera in cameras:
        det, reason = click(camera, name)
        if det is None:
            scores.append(HeldScore(name, grasp, camera, None, None, reason))
            continue
        geo = perception.measure_object_geometry(det, dest_id).result if dest_id else \
            perception.measure_object_geometry(det).result
        if not geo["success"]:
            scores.append(HeldScore(name, grasp, camera, None, None, geo["message"], det))
            continue
        v = geo["value"]
        c_err = float(np.linalg.norm(np.array(v["object"]["center_m"]) - true_obj.center_m) * 1000)
        o_err = None
        if v.get("object_to_destination_xy_offset_m") is not None:
            o_err = float(np.linalg.norm(np.array(v["object_to_destination_xy_offset_m"]) - true_offset) * 1000)
        scores.append(HeldScore(name, grasp, camera, c_err, o_err, "" if dest_id else f"destination: {why}", det))
    return scores
