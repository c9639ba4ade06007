"""Simulator ground truth for scoring perception: tests and benchmarks only.

Nothing here may be used at run time: it reads the simulator's model and state
(privileged), which the policy never sees. It gives, in the robot base frame:

* each object's true geometry from its rendered meshes (``ObjectTruth``: bounding-box
  centre, top and bottom heights, footprint radius = radius of the smallest circle
  containing the outline seen from above);
* a per-pixel geom-id image of a camera (MuJoCo segmentation rendering), hence each
  object's visible pixels;
* the exact surface point seen through a pixel (a ray cast against the rendered
  geoms), to score back-projection independently of the depth buffer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from captain_backends.core.driver import CameraFrame

#: Geom groups the drivers render (group 0 holds collision geoms, hidden from cameras).
RENDERED_GROUPS = (1, 2)


@dataclass(frozen=True)
class ObjectTruth:
    """True geometry of one object, base frame, metres."""

    name: str
    center_m: np.ndarray
    top_z_m: float
    bottom_z_m: float
    radius_m: float
    footprint_center_xy_m: np.ndarray
    geoms: np.ndarray


class SimTruth:
    """Ground truth of a MuJoCo scene (see the module docstring).

    Args:
        model / data: the simulator's ``MjModel`` / ``MjData``.
        T_world_base: 4x4 pose of the robot base in the world.
        objects: object name -> root body id.
    """

    def __init__(self, model: Any, data: Any, T_world_base: np.ndarray, objects: dict[str, int]) -> None:
        self.model = model
        self.data = data
        self.T_world_base = np.asarray(T_world_base, float)
        self.T_base_world = np.linalg.inv(self.T_world_base)
        self.objects = dict(objects)
        self._renderer: Any = None
        self._geoms = {name: self._subtree_geoms(body) for name, body in self.objects.items()}

    @classmethod
    def from_libero(cls, driver: Any, include_fixtures: bool = False) -> SimTruth:
        """Ground truth of a configured ``LiberoDriver`` (movable objects, optionally fixtures)."""
        s = driver.scene
        names = list(s.object_names) + (list(s.fixture_names) if include_fixtures else [])
        bodies = dict(zip(s.entity_names, s.entity_bodies, strict=True))
        return cls(s.model, s.data, driver.description().T_world_base, {n: bodies[n] for n in names})

    @classmethod
    def from_tabletop(cls, driver: Any) -> SimTruth:
        """Ground truth of a configured ``TabletopDriver``."""
        from captain_backends.core.tabletop.scene import OBJECTS

        m = driver.mj_model
        return cls(m, driver.mj_data, driver.description().T_world_base, {o.name: m.body(o.name).id for o in OBJECTS})

    # --------------------------------------------------------------- geometry
    def _subtree_geoms(self, root: int) -> np.ndarray:
        m = self.model
        bodies = set()
        for b in range(m.nbody):
            j = b
            while j != 0 and j != root:
                j = int(m.body_parentid[j])
            if j == root:
                bodies.add(b)
        return np.array([g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in bodies
                         and int(m.geom_group[g]) in RENDERED_GROUPS], dtype=int)

    def geoms(self, name: str) -> np.ndarray:
        """Rendered geom ids of an object."""
        return self._geoms[name]

    def vertices_base(self, name: str) -> np.ndarray:
        """Surface sample points (N, 3) of an object's rendered geoms, base frame."""
        import mujoco

        m, d = self.model, self.data
        out = []
        for g in self._geoms[name]:
            R = np.asarray(d.geom_xmat[g]).reshape(3, 3)
            p = np.asarray(d.geom_xpos[g])
            t = int(m.geom_type[g])
            s = np.asarray(m.geom_size[g])
            if t == mujoco.mjtGeom.mjGEOM_MESH:
                mid = int(m.geom_dataid[g])
                a, n = int(m.mesh_vertadr[mid]), int(m.mesh_vertnum[mid])
                v = np.asarray(m.mesh_vert[a:a + n])
            elif t == mujoco.mjtGeom.mjGEOM_BOX:
                v = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * s
            elif t in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_CAPSULE):
                ang = np.linspace(0, 2 * np.pi, 72, endpoint=False)
                ring = np.stack([s[0] * np.cos(ang), s[0] * np.sin(ang)], 1)
                half = s[1] + (s[0] if t == mujoco.mjtGeom.mjGEOM_CAPSULE else 0.0)
                v = np.concatenate([np.c_[ring, np.full(72, z)] for z in (-half, half)])
            elif t == mujoco.mjtGeom.mjGEOM_SPHERE:
                v = np.random.default_rng(0).normal(size=(200, 3))
                v = v / np.linalg.norm(v, axis=1, keepdims=True) * s[0]
            elif t == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
                v = np.random.default_rng(0).normal(size=(200, 3))
                v = v / np.linalg.norm(v, axis=1, keepdims=True) * s[:3]
            else:
                continue
            out.append(v @ R.T + p)
        if not out:
            raise KeyError(f"object {name!r} has no rendered geoms")
        w = np.concatenate(out)
        return w @ self.T_base_world[:3, :3].T + self.T_base_world[:3, 3]

    def object_truth(self, name: str) -> ObjectTruth:
        """True geometry of an object (see ``ObjectTruth``)."""
        P = self.vertices_base(name)
        lo, hi = P.min(0), P.max(0)
        (cx, cy), r = cv2.minEnclosingCircle((P[:, :2] * 1000.0).astype(np.float32))
        return ObjectTruth(name=name, center_m=0.5 * (lo + hi), top_z_m=float(hi[2]), bottom_z_m=float(lo[2]),
                           radius_m=float(r) / 1000.0, footprint_center_xy_m=np.array([cx, cy]) / 1000.0,
                           geoms=self._geoms[name])

    # ------------------------------------------------------------ segmentation
    def segmentation(self, camera: str, width: int = 512, height: int = 512) -> np.ndarray:
        """(H, W) int geom id seen by each pixel of a camera (-1: nothing)."""
        import mujoco

        os.environ.setdefault("MUJOCO_GL", "egl")
        if self._renderer is None or self._renderer.width != width or self._renderer.height != height:
            self.model.vis.global_.offwidth = max(int(self.model.vis.global_.offwidth), width)
            self.model.vis.global_.offheight = max(int(self.model.vis.global_.offheight), height)
            self._renderer = mujoco.Renderer(self.model, height, width)
            self._renderer.enable_segmentation_rendering()
        opt = mujoco.MjvOption()
        opt.geomgroup[:] = 0
        for g in RENDERED_GROUPS:
            opt.geomgroup[g] = 1
        self._renderer.update_scene(self.data, camera=camera, scene_option=opt)
        seg = self._renderer.render()
        ids = seg[..., 0].astype(int)
        ids[seg[..., 1] != int(mujoco.mjtObj.mjOBJ_GEOM)] = -1
        return ids

    def object_mask(self, segmentation: np.ndarray, name: str) -> np.ndarray:
        """Pixels of a segmentation image that see the object."""
        return np.isin(segmentation, self._geoms[name])

    def raycast(self, frame: CameraFrame, x: float, y: float) -> tuple[np.ndarray | None, int]:
        """Surface point (base frame) seen through pixel (x, y) (OpenCV centres) and its geom id."""
        import mujoco

        K = np.asarray(frame.K, float)
        T_world_camera = self.T_world_base @ np.asarray(frame.T_base_camera, float)
        d_cam = np.array([(x - K[0, 2]) / K[0, 0], (y - K[1, 2]) / K[1, 1], 1.0])
        d_world = T_world_camera[:3, :3] @ d_cam
        d_world /= np.linalg.norm(d_world)
        origin = T_world_camera[:3, 3].copy()
        groups = np.zeros(6, np.uint8)
        groups[list(RENDERED_GROUPS)] = 1
        geom = np.array([-1], np.int32)
        dist = mujoco.mj_ray(self.model, self.data, origin, d_world, groups, 1, -1, geom)
        if dist < 0:
            return None, -1
        p_world = origin + dist * d_world
        return self.T_base_world[:3, :3] @ p_world + self.T_base_world[:3, 3], int(geom[0])

    def close(self) -> None:
        """Free the segmentation renderer."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
