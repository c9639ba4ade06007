"""The tabletop scene: a table, a pedestal with the Panda, a few objects, two cameras.

World frame: z up, origin on the floor below the table centre. The table top is at
``TABLE_TOP_Z_M``; the robot base sits on a pedestal behind the table's -x edge at
``ROBOT_BASE_POSITION_M`` (the same height above the table as in robosuite's and
LIBERO's table arenas), axes aligned with the world. Physics: 1 kHz, elliptic friction
cones with ``impratio`` 20 (as robosuite sets them).

Geom groups: robot collision geoms are group 0 (hidden from cameras), robot visual
meshes group 1, scene geoms group 2.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from captain_backends.core.driver import HEAD_CAMERA

TIMESTEP_S = 0.001
TABLE_TOP_Z_M = 0.8
TABLE_HALF_SIZE_M = (0.4, 0.45, 0.025)
ROBOT_BASE_POSITION_M = (-0.56, 0.0, 0.912)
#: Objects are placed uniformly in this world-frame box on the table, metres.
PLACEMENT_X_RANGE_M = (-0.14, 0.14)
PLACEMENT_Y_RANGE_M = (-0.24, 0.24)
#: Head camera: in front of the table, looking back at the robot and down at the table.
HEAD_CAMERA_POSITION_M = (0.62, 0.0, 1.42)
HEAD_CAMERA_TARGET_M = (-0.12, 0.0, 0.86)
HEAD_CAMERA_FOVY_DEG = 45.0
IMAGE_SIZE_PX = 512


@dataclass(frozen=True)
class SceneObject:
    """A movable object on the table.

    Attributes:
        name: body name (also the object's name in snapshots and goals).
        shape: ``"box"`` or ``"plate"`` (a flat cylinder).
        half_size_m: box half extents (x, y, z); for a plate (radius, radius, half height).
        rgba: colour.
        mass_kg: mass.
        min_clearance_m: keep-out radius around the centre when placing objects.
    """

    name: str
    shape: str
    half_size_m: tuple[float, float, float]
    rgba: tuple[float, float, float, float]
    mass_kg: float
    min_clearance_m: float

    @property
    def footprint_radius_m(self) -> float:
        """Radius of the object's footprint on the table."""
        return float(np.hypot(*self.half_size_m[:2])) if self.shape == "box" else self.half_size_m[0]


CUBE_HALF_M = 0.02
OBJECTS: tuple[SceneObject, ...] = (
    SceneObject("red_cube", "box", (CUBE_HALF_M,) * 3, (0.85, 0.12, 0.10, 1.0), 0.05, 0.035),
    SceneObject("blue_cube", "box", (CUBE_HALF_M,) * 3, (0.10, 0.25, 0.85, 1.0), 0.05, 0.035),
    SceneObject("green_cube", "box", (CUBE_HALF_M,) * 3, (0.12, 0.65, 0.20, 1.0), 0.05, 0.035),
    SceneObject("plate", "plate", (0.08, 0.08, 0.006), (0.92, 0.90, 0.84, 1.0), 0.2, 0.085),
)
TABLE_BODY = "table"


def _look_at_quat_wxyz(position: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Quaternion of a MuJoCo camera (looking along its -z, y up) at ``position`` that
    looks at ``target`` with the image's up direction closest to world +z."""
    forward = target - position
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    R = np.column_stack([right, up, -forward])
    import mujoco

    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, R.flatten())
    return quat


def _fmt(values) -> str:
    return " ".join(f"{float(v):.6g}" for v in values)


def _object_element(obj: SceneObject) -> ET.Element:
    body = ET.Element("body", name=obj.name, pos=_fmt((0.0, 0.0, TABLE_TOP_Z_M + obj.half_size_m[2])))
    ET.SubElement(body, "freejoint", name=f"{obj.name}_joint")
    if obj.shape == "box":
        ET.SubElement(body, "geom", name=f"{obj.name}_geom", type="box", size=_fmt(obj.half_size_m),
                      rgba=_fmt(obj.rgba), mass=f"{obj.mass_kg}", group="2", condim="4",
                      friction="1 0.005 0.0001")
    elif obj.shape == "plate":
        ET.SubElement(body, "geom", name=f"{obj.name}_geom", type="cylinder",
                      size=_fmt((obj.half_size_m[0], obj.half_size_m[2])), rgba=_fmt(obj.rgba),
                      mass=f"{obj.mass_kg}", group="2", condim="4", friction="1 0.005 0.0001")
    else:
        raise ValueError(f"unknown object shape {obj.shape!r}; valid shapes: box, plate")
    return body


def build_scene_mjcf(robot_mjcf_text: str, objects: tuple[SceneObject, ...] = OBJECTS,
                     image_size_px: int = IMAGE_SIZE_PX) -> str:
    """The scene MJCF text with the robot model of ``robot_mjcf_text`` mounted on the
    pedestal (the robot's elements are copied unchanged)."""
    robot = ET.fromstring(robot_mjcf_text)
    root = ET.Element("mujoco", model="captain_tabletop")
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    ET.SubElement(root, "option", timestep=f"{TIMESTEP_S}", cone="elliptic", impratio="20")
    ET.SubElement(root, "statistic", extent="2", center="0 0 0.9")
    visual = ET.SubElement(root, "visual")
    ET.SubElement(visual, "global", offwidth=str(image_size_px), offheight=str(image_size_px))
    # near = 0.01 * extent = 2 cm (the wrist camera sees the fingers from ~6 cm), far = 100 m.
    ET.SubElement(visual, "map", znear="0.01", zfar="50")
    ET.SubElement(visual, "quality", shadowsize="0", offsamples="0")
    ET.SubElement(visual, "headlight", ambient="0.35 0.35 0.35", diffuse="0.45 0.45 0.45", specular="0 0 0")

    asset = ET.SubElement(root, "asset")
    for child in robot.find("asset") if robot.find("asset") is not None else []:
        asset.append(child)
    ET.SubElement(asset, "texture", name="floor_tex", type="2d", builtin="checker", width="256",
                  height="256", rgb1="0.45 0.47 0.50", rgb2="0.38 0.40 0.43")
    ET.SubElement(asset, "material", name="floor_mat", texture="floor_tex", texrepeat="8 8",
                  reflectance="0")
    ET.SubElement(asset, "material", name="table_mat", rgba="0.62 0.48 0.33 1", reflectance="0",
                  specular="0.1")

    world = ET.SubElement(root, "worldbody")
    ET.SubElement(world, "light", name="key", directional="true", pos="0.5 0.3 3", dir="-0.2 -0.1 -1",
                  diffuse="0.55 0.55 0.55", specular="0.1 0.1 0.1", castshadow="false")
    ET.SubElement(world, "geom", name="floor", type="plane", size="3 3 0.1", material="floor_mat",
                  group="2")
    table = ET.SubElement(world, "body", name=TABLE_BODY,
                          pos=_fmt((0.0, 0.0, TABLE_TOP_Z_M - TABLE_HALF_SIZE_M[2])))
    ET.SubElement(table, "geom", name="table_top", type="box", size=_fmt(TABLE_HALF_SIZE_M),
                  material="table_mat", group="2", friction="1 0.005 0.0001")
    leg_z = (TABLE_TOP_Z_M - 2 * TABLE_HALF_SIZE_M[2]) / 2
    for i, (sx, sy) in enumerate(((1, 1), (1, -1), (-1, 1), (-1, -1))):
        ET.SubElement(table, "geom", name=f"table_leg{i}", type="box", size=_fmt((0.025, 0.025, leg_z)),
                      pos=_fmt((sx * (TABLE_HALF_SIZE_M[0] - 0.05), sy * (TABLE_HALF_SIZE_M[1] - 0.05),
                                -TABLE_HALF_SIZE_M[2] - leg_z)),
                      material="table_mat", group="2", contype="0", conaffinity="0")
    base = np.asarray(ROBOT_BASE_POSITION_M)
    ET.SubElement(world, "geom", name="pedestal", type="box",
                  pos=_fmt((base[0], base[1], base[2] / 2)), size=_fmt((0.13, 0.13, base[2] / 2)),
                  rgba="0.25 0.25 0.27 1", group="2")
    mount = ET.SubElement(world, "body", name="robot_mount", pos=_fmt(base))
    for body in robot.find("worldbody"):
        mount.append(body)
    position = np.asarray(HEAD_CAMERA_POSITION_M)
    quat = _look_at_quat_wxyz(position, np.asarray(HEAD_CAMERA_TARGET_M))
    ET.SubElement(world, "camera", name=HEAD_CAMERA, mode="fixed", pos=_fmt(position), quat=_fmt(quat),
                  fovy=f"{HEAD_CAMERA_FOVY_DEG}")
    for obj in objects:
        world.append(_object_element(obj))

    actuator = ET.SubElement(root, "actuator")
    for child in robot.find("actuator") if robot.find("actuator") is not None else []:
        actuator.append(child)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def T_world_base() -> np.ndarray:
    """4x4 pose of the robot base in the world, metres."""
    T = np.eye(4)
    T[:3, 3] = ROBOT_BASE_POSITION_M
    return T
