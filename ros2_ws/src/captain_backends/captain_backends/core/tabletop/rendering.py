"""RGB-D rendering of MuJoCo cameras with calibration, headless (``MUJOCO_GL=egl``).

One ``mjr_render`` per camera fills colour and depth; both are read with one
``mjr_readPixels``. MuJoCo renders with reversed Z (``mjDEPTH_ZEROFAR``: 1 at the near
plane, 0 at the far plane), so the metric depth along the optical axis is

    z = near * far / (d * (far - near) + near),   near/far = znear/zfar * extent,

and pixels at the far plane (nothing hit) are reported as 0 (invalid). Shadows,
reflections and the skybox are off; robot collision geoms (group 0) and all sites are
hidden.

Intrinsics follow the OpenCV convention (pixel centres at integer coordinates):
``fy = (H/2) / tan(fovy/2)``, ``fx = fy`` (MuJoCo's ``fovy`` is vertical, pixels are
square), ``cx = (W-1)/2``, ``cy = (H-1)/2``. The optical frame is MuJoCo's camera
frame with y and z flipped (x right, y down, z forward).

GL contexts are bound to threads, so a renderer keeps one context per calling thread.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import weakref

import numpy as np

#: MuJoCo camera frame (x right, y up, looking along -z) -> OpenCV optical frame.
R_MJCAM_OPTICAL = np.diag([1.0, -1.0, -1.0])

_LIVE_RENDERERS: weakref.WeakSet = weakref.WeakSet()


def intrinsics_from_fovy(fovy_deg: float, width_px: int, height_px: int) -> np.ndarray:
    """3x3 pinhole intrinsics in pixels for a vertical field of view ``fovy_deg``."""
    fy = 0.5 * height_px / math.tan(math.radians(fovy_deg) / 2.0)
    return np.array([[fy, 0.0, (width_px - 1) / 2.0], [0.0, fy, (height_px - 1) / 2.0], [0.0, 0.0, 1.0]])


def camera_pose_world(data, camera_id: int) -> np.ndarray:
    """4x4 pose of a camera's OpenCV optical frame in the MuJoCo world, metres."""
    T = np.eye(4)
    T[:3, :3] = np.asarray(data.cam_xmat[camera_id]).reshape(3, 3) @ R_MJCAM_OPTICAL
    T[:3, 3] = data.cam_xpos[camera_id]
    return T


def _gl_context_class():
    """EGL unless another backend was asked for (``MUJOCO_GL``) or a display exists.

    MuJoCo picks its default context class when it is first imported; a process that
    imported MuJoCo before setting ``MUJOCO_GL=egl`` still renders headless here.
    """
    import mujoco

    backend = os.environ.get("MUJOCO_GL", "").lower()
    if backend == "egl" or (backend == "" and not os.environ.get("DISPLAY")):
        from mujoco.egl import GLContext

        return GLContext
    if mujoco.GLContext is None:
        raise RuntimeError(f"MuJoCo has no OpenGL context for MUJOCO_GL={backend!r}; set MUJOCO_GL=egl")
    return mujoco.GLContext


_atexit_registered = False


class _ThreadContext:
    def __init__(self, model, width: int, height: int, max_geom: int) -> None:
        import mujoco

        global _atexit_registered
        self.gl = _gl_context_class()(width, height)
        if not _atexit_registered:
            # Registered after MuJoCo's own EGL atexit hook so that it runs first
            # (contexts must be freed before the display is terminated).
            atexit.register(_close_live_renderers)
            _atexit_registered = True
        self.gl.make_current()
        self.mjr = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self.mjr)
        self.mjr.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        self.scene = mujoco.MjvScene(model, maxgeom=max_geom)
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION,
                     mujoco.mjtRndFlag.mjRND_SKYBOX):
            self.scene.flags[flag] = 0

    def free(self) -> None:
        try:
            self.gl.make_current()
            self.mjr.free()
        except Exception:
            pass
        try:
            self.gl.free()
        except Exception:
            if hasattr(self.gl, "_context"):
                self.gl._context = None


class RgbdRenderer:
    """Renders named MuJoCo cameras to RGB (uint8) and metric depth (float32).

    Args:
        model: the MuJoCo model (its offscreen buffer must be at least the image size).
        width_px / height_px: image size.
        max_geom: capacity of the visual scene.
    """

    def __init__(self, model, width_px: int, height_px: int, max_geom: int = 2000) -> None:
        import mujoco

        os.environ.setdefault("MUJOCO_GL", "egl")
        self.model = model
        self.width_px = width_px
        self.height_px = height_px
        self.max_geom = max_geom
        self.option = mujoco.MjvOption()
        self.option.geomgroup[:] = 0
        self.option.geomgroup[1] = 1
        self.option.geomgroup[2] = 1
        self.option.sitegroup[:] = 0
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._rect = mujoco.MjrRect(0, 0, width_px, height_px)
        self._contexts: dict[int, _ThreadContext] = {}
        self._lock = threading.Lock()
        extent = float(model.stat.extent)
        self.near_m = float(model.vis.map.znear) * extent
        self.far_m = float(model.vis.map.zfar) * extent
        self._rgb = np.empty((height_px, width_px, 3), dtype=np.uint8)
        self._depth = np.empty((height_px, width_px), dtype=np.float32)
        _LIVE_RENDERERS.add(self)

    def _context(self) -> _ThreadContext:
        tid = threading.get_ident()
        ctx = self._contexts.get(tid)
        if ctx is None:
            with self._lock:
                ctx = _ThreadContext(self.model, self.width_px, self.height_px, self.max_geom)
                self._contexts[tid] = ctx
        else:
            ctx.gl.make_current()
        return ctx

    def render(self, data, camera_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(rgb HxWx3 uint8, depth_m HxW float32) of one camera, row 0 at the top.

        ``data`` must be up to date (positions and camera poses, i.e. after
        ``mj_forward`` or a physics step). Depth is 0 where nothing was hit.
        """
        import mujoco

        ctx = self._context()
        self._camera.fixedcamid = camera_id
        mujoco.mjv_updateScene(self.model, data, self.option, None, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL, ctx.scene)
        mujoco.mjr_render(self._rect, ctx.scene, ctx.mjr)
        mujoco.mjr_readPixels(self._rgb, self._depth, self._rect, ctx.mjr)
        rgb = np.flipud(self._rgb).copy()
        buffer = np.flipud(self._depth)
        near, far = np.float32(self.near_m), np.float32(self.far_m)
        depth = (near * far) / (buffer * (far - near) + near)
        depth[buffer <= 0.0] = 0.0
        return rgb, depth.astype(np.float32, copy=False)

    def close(self) -> None:
        """Free every thread's GL context (safe to call more than once)."""
        with self._lock:
            for ctx in self._contexts.values():
                ctx.free()
            self._contexts.clear()


def _close_live_renderers() -> None:
    # GL contexts must be freed before the OpenGL bindings are torn down at exit.
    for renderer in list(_LIVE_RENDERERS):
        renderer.close()
