"""Scoring the robot self-filter against the simulator's segmentation: tests and benchmarks only.

The self-filter (``core/self_filter.py``) computes the robot's own pixels from its
kinematic model; here the LIBERO arm is put in several poses (the official initial
state's joints plus seeded random offsets, the gripper at seeded openings) by writing
the simulator's joint positions directly, each pose is observed through ``Perception``,
and the mask ``observe()`` attached to each camera is compared with the pixels the
simulator's segmentation gives the robot's rendered geoms (intersection over union).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA

#: Root body of the robot in a LIBERO scene (arm, gripper and mount hang below it).
LIBERO_ROBOT_ROOT = "robot0_base"


@dataclass(frozen=True)
class MaskScore:
    """The robot mask of one camera in one pose."""

    pose: int
    camera: str
    iou: float
    truth_px: int
    mask_px: int
    missed_px: int
    extra_px: int


def robot_geoms(truth: Any, root: str = LIBERO_ROBOT_ROOT) -> np.ndarray:
    """Rendered geom ids of the robot (the subtree of ``root``) in a ``SimTruth``'s model."""
    from captain_perception.groundtruth import RENDERED_GROUPS

    m = truth.model
    rid = m.body(root).id
    out = []
    for g in range(m.ngeom):
        b = int(m.geom_bodyid[g])
        while b not in (0, rid):
            b = int(m.body_parentid[b])
        if b == rid and int(m.geom_group[g]) in RENDERED_GROUPS:
            out.append(g)
    return np.array(out, dtype=int)


def arm_poses(driver: Any, count: int, seed: int = 0, spread_rad: float = 0.35) -> list[tuple[np.ndarray, float]]:
    """``count`` (arm joints rad, finger opening m) poses: the current one, then seeded
    offsets within ``spread_rad`` of it (clipped to the limits) and random openings."""
    s = driver.scene
    desc = driver.description()
    q0 = np.asarray(s.data.qpos[s.arm_qpos], float).copy()
    open0 = float(s.data.qpos[s.finger_qpos][0])
    rng = np.random.default_rng(seed)
    poses = [(q0, open0)]
    for _ in range(count - 1):
        q = np.clip(q0 + rng.uniform(-spread_rad, spread_rad, len(q0)), desc.joint_lower_rad, desc.joint_upper_rad)
        poses.append((q, float(rng.uniform(0.0, 0.04))))
    return poses


def set_pose(driver: Any, q: np.ndarray, finger_m: float) -> None:
    """Write arm joints and a symmetric finger position into the LIBERO simulator (scoring only)."""
    import mujoco

    s = driver.scene
    s.data.qpos[s.arm_qpos] = q
    s.data.qpos[s.finger_qpos] = [finger_m, -finger_m]
    s.data.qvel[:] = 0.0
    mujoco.mj_forward(s.model, s.data)


def score_poses(driver: Any, perception: Any, truth: Any, poses: list[tuple[np.ndarray, float]],
                cameras: tuple[str, ...] = (HEAD_CAMERA, WRIST_CAMERA)) -> list[MaskScore]:
    """IoU of the self-filter's mask with the segmentation's robot pixels, per pose and camera.

    Leaves the arm in the last pose (reload the task to restore it)."""
    geoms = robot_geoms(truth)
    out = []
    for i, (q, finger) in enumerate(poses):
        set_pose(driver, q, finger)
        res = perception.observe().result
        if not res["success"]:
            raise RuntimeError(f"observe failed: {res['error']}")
        obs = perception.store.observation(res["value"]["observation_handle"])
        for cam in cameras:
            w, h = obs.frames[cam].size_px
            gt = np.isin(truth.segmentation(cam, w, h), geoms)
            mask = obs.robot_mask(cam)
            if mask is None:
                raise RuntimeError(f"no robot mask: {perception.self_filter_error}")
            union = int((gt | mask).sum())
            out.append(MaskScore(i, cam, float((gt & mask).sum() / union) if union else 1.0, int(gt.sum()),
                                 int(mask.sum()), int((gt & ~mask).sum()), int((mask & ~gt).sum())))
    return out
