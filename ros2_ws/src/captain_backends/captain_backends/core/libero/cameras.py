"""RGB-D rendering of LIBERO's cameras with ``mujoco.Renderer``.

Images are rendered at the configured size (512x512 by default) with shadows,
reflections and multisampling off (the CPU renderer is several times faster), collision
geoms (group 0) and sites hidden, as robosuite shows them. Row 0 is the top of the
image.

The CPU renderer's cost grows with the triangles it is given (LIBERO scenes have ~300k),
so geoms whose bounding sphere lies wholly outside the camera's view frustum are left
out of each pass (``view_culling``). Without shadows and reflections such a geom cannot
change a single pixel, so the images are identical; with either turned on, nothing is
culled. Depth is the metric distance along the optical axis (z), metres; pixels that see
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
        view_culling: leave out geoms outside the view frustum (same pixels, less work;
            the wrist camera typically drops a third of the triangles, the head camera
            an eighth).
    """

    def __init__(self, model: Any, width_px: int, height_px: int, camera_names: tuple[str, ...],
                 antialiasing: bool = False, view_culling: bool = True) -> None:
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
        self.view_culling = bool(view_culling)
        #: triangles of each mesh (0 for other geoms), for ``last_pass_triangles``
        self._mesh_faces = np.asarray(model.mesh_facenum, dtype=np.int64).copy()
        #: triangles of mesh geoms drawn in the last pass and of those culled from it
        self.last_pass_triangles = (0, 0)
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
        if self.view_culling:
            self._cull_outside_view()
        self._gl.make_current()
        mujoco.mjr_render(self._rect, self._scene, self._context)
        mujoco.mjr_readPixels(self._rgb, self._depth, self._rect, self._context)
        rgb = np.flipud(self._rgb).copy()
        depth = _metric_depth(np.flipud(self._depth), model)
        return rgb, depth

    def _cull_outside_view(self) -> None:
        """Turn the scene's model geoms whose bounding sphere is wholly outside the view
        frustum into ``mjGEOM_NONE`` (not drawn). Skipped when shadows or reflections are
        on (an unseen geom may cast a shadow or a reflection into view)."""
        import mujoco

        scene = self._scene
        if scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] or scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION]:
            return
        gl_camera = scene.camera[0]
        if gl_camera.orthographic:
            return
        near = float(gl_camera.frustum_near)
        if near <= 0:
            return
        # half-angle tangents of the frustum (as mjr_render builds it: the width follows
        # the viewport's aspect ratio when frustum_width is 0)
        tan_y = max(abs(float(gl_camera.frustum_bottom)), abs(float(gl_camera.frustum_top))) / near
        if float(gl_camera.frustum_width) > 0:
            tan_x = (abs(float(gl_camera.frustum_center)) + float(gl_camera.frustum_width)) / near
        else:
            tan_x = tan_y * self.width_px / self.height_px
        sec_x, sec_y = math.sqrt(1.0 + tan_x * tan_x), math.sqrt(1.0 + tan_y * tan_y)
        eye = np.asarray(gl_camera.pos, dtype=float)
        forward = np.asarray(gl_camera.forward, dtype=float)
        up = np.asarray(gl_camera.up, dtype=float)
        right = np.cross(forward, up)
        rbound = self._model.geom_rbound
        geom_obj = mujoco.mjtObj.mjOBJ_GEOM
        mesh = mujoco.mjtGeom.mjGEOM_MESH
        drawn = culled = 0
        for i in range(scene.ngeom):
            geom = scene.geoms[i]
            faces = int(self._mesh_faces[geom.dataid // 2]) if geom.type == mesh and geom.dataid >= 0 else 0
            radius = float(rbound[geom.objid]) if geom.objtype == geom_obj and geom.objid >= 0 else 0.0
            if radius <= 0.0:  # planes (infinite), decor and non-geom objects: always drawn
                drawn += faces
                continue
            radius = radius * 1.02 + 0.002  # margin for float error
            offset = np.asarray(geom.pos, dtype=float) - eye
            x, y, z = float(offset @ right), float(offset @ up), float(offset @ forward)
            if z + radius < near or (abs(x) - tan_x * z) > radius * sec_x or (abs(y) - tan_y * z) > radius * sec_y:
                geom.type = mujoco.mjtGeom.mjGEOM_NONE
                culled += faces
            else:
                drawn += faces
        self.last_pass_triangles = (drawn, culled)

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
