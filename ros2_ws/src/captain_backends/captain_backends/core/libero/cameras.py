"""RGB-D rendering of LIBERO's cameras with ``mujoco.Renderer``.

Images are rendered at the configured size (512x512 by default) with shadows,
reflections and multisampling off (the CPU renderer is several times faster), collision
geoms (group 0) and sites hidden, as robosuite shows them. Row 0 is the top of the
image. Depth is the metric distance along the optical axis (z), metres; pixels that see
nothing are 0.

Intrinsics follow from MuJoCo's vertical field of view: ``fy = (H/2) / tan(fovy/2)``,
``fx = fy`` (square pixels), principal point at the image centre in the OpenCV
convention where pixel (u, v) covers [u - 0.5, u + 0.5]: ``cx = (W - 1)/2``,
``cy = (H - 1)/2``.

Poses: MuJoCo cameras look along their -z axis with y up; the optical frame (OpenCV:
x right, y down, z forward) is the MuJoCo camera frame rotated by pi about x.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from captain_backends.core.libero.errors import LiberoError
from captain_backends.core.libero.robot_model import pose_matrix

#: MuJoCo camera frame -> OpenCV optical frame.
R_MUJOCO_OPTICAL = np.diag([1.0, -1.0, -1.0])


def intrinsics(fovy_deg: float, width_px: int, height_px: int) -> np.ndarray:
    """3x3 pinhole matrix (pixels) of a MuJoCo camera with vertical field of view ``fovy_deg``."""
    f = 0.5 * height_px / math.tan(math.radians(fovy_deg) / 2.0)
    return np.array([[f, 0.0, (width_px - 1) / 2.0], [0.0, f, (height_px - 1) / 2.0], [0.0, 0.0, 1.0]])


def optical_pose_world(data: Any, camera_id: int) -> np.ndarray:
    """4x4 pose of a camera's optical frame (OpenCV) in the world, metres."""
    T = pose_matrix(data.cam_xpos[camera_id], data.cam_xmat[camera_id])
    T[:3, :3] = T[:3, :3] @ R_MUJOCO_OPTICAL
    return T


class CameraRenderer:
    """Renders named cameras of one model: one OpenGL pass per camera, from which both
    the colour and the depth buffers are read (half the work of separate colour and
    depth passes; the CPU renderer's cost is dominated by LIBERO's ~300k triangles).

    Args:
        model: the MuJoCo model (its offscreen buffer is enlarged when needed).
        width_px / height_px: image size.
        camera_names: cameras that may be rendered.
        antialiasing: 4x multisampling (LIBERO's default; about twice the CPU time).
    """

    def __init__(self, model: Any, width_px: int, height_px: int, camera_names: tuple[str, ...],
                 antialiasing: bool = False) -> None:
        import mujoco

        self.width_px = int(width_px)
        self.height_px = int(height_px)
        self.camera_ids: dict[str, int] = {}
        for name in camera_names:
            cam = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
            if cam < 0:
                raise LiberoError(f"the scene has no camera {name!r}")
            self.camera_ids[name] = cam
        model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), self.width_px)
        model.vis.global_.offheight = max(int(model.vis.global_.offheight), self.height_px)
        model.vis.quality.offsamples = 4 if antialiasing else 0
        self._model = model
        self._gl = None
        self._context = None
        try:
            self._gl = mujoco.GLContext(self.width_px, self.height_px)
            self._gl.make_current()
            self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
        except Exception as exc:
            self.close()
            raise LiberoError(
                f"cannot create an offscreen renderer ({exc}); set MUJOCO_GL=egl (or osmesa) "
                "before anything imports mujoco"
            ) from exc
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._context)
        self._context.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        self._scene = mujoco.MjvScene(model, maxgeom=10_000)
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        self._scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        self._option = mujoco.MjvOption()
        self._option.geomgroup[0] = False
        self._option.sitegroup[:] = False
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._rect = mujoco.MjrRect(0, 0, self.width_px, self.height_px)
        self._rgb = np.empty((self.height_px, self.width_px, 3), dtype=np.uint8)
        self._depth = np.empty((self.height_px, self.width_px), dtype=np.float32)

    def K(self, model: Any, name: str) -> np.ndarray:
        """Intrinsics of a camera at the rendered size."""
        return intrinsics(float(model.cam_fovy[self.camera_ids[name]]), self.width_px, self.height_px)

    def render(self, data: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(rgb uint8 HxWx3, depth_m float32 HxW)`` of one camera at the current state."""
        import mujoco

        if self._context is None:
            raise LiberoError("the renderer is closed")
        model = self._model
        self._camera.fixedcamid = self.camera_ids[name]
        mujoco.mjv_updateScene(model, data, self._option, None, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL.value, self._scene)
        self._gl.make_current()
        mujoco.mjr_render(self._rect, self._scene, self._context)
        mujoco.mjr_readPixels(self._rgb, self._depth, self._rect, self._context)
        rgb = np.flipud(self._rgb).copy()
        depth = _metric_depth(np.flipud(self._depth), model)
        return rgb, depth

    def close(self) -> None:
        """Free the GL context."""
        if self._context is not None:
            self._context.free()
            self._context = None
        if self._gl is not None:
            self._gl.free()
            self._gl = None


def _metric_depth(buffer: np.ndarray, model: Any) -> np.ndarray:
    """Metric z-depth from MuJoCo's reversed-Z depth buffer (as ``mujoco.Renderer``
    converts it); 0 where nothing was hit."""
    extent = float(model.stat.extent)
    znear = np.float32(float(model.vis.map.znear) * extent)
    zfar = np.float32(float(model.vis.map.zfar) * extent)
    c_coef = -(zfar + znear) / (zfar - znear)
    d_coef = -(np.float32(2) * zfar * znear) / (zfar - znear)
    c_coef = np.float32(-0.5) * c_coef - np.float32(0.5)
    d_coef = np.float32(-0.5) * d_coef
    with np.errstate(divide="ignore"):
        depth = (d_coef / (buffer.astype(np.float64) + c_coef)).astype(np.float32)
    depth[~np.isfinite(depth) | (depth >= 0.99 * float(zfar)) | (depth <= 0)] = 0.0
    return depth
