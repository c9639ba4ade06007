"""Seeded appearance randomisation: lighting, head-camera pose, material colours.

Every reset first restores the scene's nominal appearance (captured when the driver is
configured), then applies the perturbations that are switched on:

* lighting: each light's diffuse intensity scaled by 0.5..1.3, its position moved by up
  to 0.5 m per axis, ambient light raised by up to 0.15;
* camera pose: the head camera (``agentview``) moved by up to ``translation_m`` per axis
  and turned by up to ``rotation_rad`` about a random axis (the wrist camera stays
  rigid on the hand, as a calibrated one would be);
* materials: the colour of every non-robot material and uncoloured geom multiplied by
  a per-channel factor in 0.8..1.2 (dark objects stay dark, so instructions that name
  colours stay true); the robot keeps its colours.

Only model fields that affect rendering change; physics is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


def _axis_angle_quat(axis: np.ndarray, angle: float) -> np.ndarray:
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2.0)], np.sin(angle / 2.0) * axis])


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


@dataclass(frozen=True)
class AppearanceFlags:
    """Which perturbations to apply, and the camera perturbation bounds (m, rad)."""

    lighting: bool = False
    camera_pose: bool = False
    materials: bool = False
    translation_m: float = 0.02
    rotation_rad: float = 0.035

    @property
    def any(self) -> bool:
        """True when at least one perturbation is on."""
        return self.lighting or self.camera_pose or self.materials


class AppearanceRandomizer:
    """Holds the nominal appearance of one model and perturbs it.

    Args:
        model: the MuJoCo model.
        head_camera_id: camera whose pose may be perturbed.
        robot_material_ids / robot_geom_ids: left untouched by material tints.
    """

    def __init__(self, model: Any, head_camera_id: int, robot_material_ids: set[int],
                 robot_geom_ids: set[int]) -> None:
        self.head_camera_id = int(head_camera_id)
        self._light_diffuse = model.light_diffuse.copy()
        self._light_ambient = model.light_ambient.copy()
        self._light_pos = model.light_pos.copy()
        self._cam_pos = model.cam_pos[self.head_camera_id].copy()
        self._cam_quat = model.cam_quat[self.head_camera_id].copy()
        self._mat_rgba = model.mat_rgba.copy()
        self._geom_rgba = model.geom_rgba.copy()
        self._materials = np.array(sorted(set(range(model.nmat)) - robot_material_ids), dtype=int)
        self._plain_geoms = np.array(
            [g for g in range(model.ngeom) if model.geom_matid[g] < 0 and g not in robot_geom_ids], dtype=int)

    def restore(self, model: Any) -> None:
        """Put the nominal appearance back."""
        model.light_diffuse[:] = self._light_diffuse
        model.light_ambient[:] = self._light_ambient
        model.light_pos[:] = self._light_pos
        model.cam_pos[self.head_camera_id] = self._cam_pos
        model.cam_quat[self.head_camera_id] = self._cam_quat
        model.mat_rgba[:] = self._mat_rgba
        model.geom_rgba[:] = self._geom_rgba

    def apply(self, model: Any, flags: AppearanceFlags, rng: np.random.Generator) -> dict[str, Any]:
        """Restore, then perturb what ``flags`` switch on; returns what was applied."""
        self.restore(model)
        applied: dict[str, Any] = {}
        if flags.lighting and model.nlight:
            scale = rng.uniform(0.5, 1.3, size=(model.nlight, 1))
            model.light_diffuse[:] = np.clip(self._light_diffuse * scale, 0.0, 1.0)
            model.light_pos[:] = self._light_pos + rng.uniform(-0.5, 0.5, size=self._light_pos.shape)
            model.light_ambient[:] = np.clip(self._light_ambient + rng.uniform(0.0, 0.15), 0.0, 1.0)
            applied["light_scale"] = scale.ravel().round(3).tolist()
        if flags.camera_pose:
            shift = rng.uniform(-flags.translation_m, flags.translation_m, size=3)
            angle = rng.uniform(0.0, flags.rotation_rad)
            dq = _axis_angle_quat(rng.normal(size=3), angle)
            model.cam_pos[self.head_camera_id] = self._cam_pos + shift
            q = _quat_mul(dq, self._cam_quat)
            model.cam_quat[self.head_camera_id] = q / np.linalg.norm(q)
            applied["camera_shift_m"] = shift.round(4).tolist()
            applied["camera_rotation_rad"] = round(float(angle), 4)
        if flags.materials:
            if self._materials.size:
                tint = rng.uniform(0.8, 1.2, size=(self._materials.size, 3))
                model.mat_rgba[self._materials, :3] = np.clip(
                    self._mat_rgba[self._materials, :3] * tint, 0, 1)
            if self._plain_geoms.size:
                tint = rng.uniform(0.8, 1.2, size=(self._plain_geoms.size, 3))
                model.geom_rgba[self._plain_geoms, :3] = np.clip(
                    self._geom_rgba[self._plain_geoms, :3] * tint, 0, 1)
            applied["materials_tinted"] = int(self._materials.size + self._plain_geoms.size)
        return applied
