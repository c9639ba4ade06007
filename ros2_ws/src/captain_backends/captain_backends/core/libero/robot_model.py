"""The Panda as LIBERO mounts it: names, an exported MJCF and the ``RobotDescription``.

LIBERO uses robosuite's Panda (``robots/panda/robot.xml``) with robosuite's Panda
gripper and a Rethink mount. The exported MJCF is the robot subtree of the simulated
scene itself (arm, gripper, mount; same names, masses, joint limits and meshes), with
the root body ``robot0_base`` moved to the origin, so Pinocchio's ``universe`` frame is
the robot base frame and ``pinocchio.buildModelFromMJCF`` gives exactly the simulated
kinematics. The tool centre point is the gripper's ``gripper0_grip_site`` (midway
between the finger pads), rigid on the flange body ``robot0_right_hand`` (the same
definition as the tabletop backend's Panda).

Pinocchio 4.1 misplaces MJCF *sites* (it composes a site's placement with its body's
offset twice), so in Pinocchio use the body ``gripper0_eef``, which coincides with
``gripper0_grip_site``, or ``flange_frame`` composed with ``T_flange_tcp``.

An SRDF with the self-collision pairs a checker may skip is written next to the MJCF,
computed with the tabletop backend's analysis (``tabletop/collision_pairs.py``) so both
backends describe the Panda the same way. Files go to ``$CAPTAIN_CACHE_DIR/libero``
(default ``~/.cache/captain/libero``), named by a hash of their content; LIBERO's floor
scenes mount the robot differently, so there are two robot files.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from captain_backends.core.driver import RobotDescription

ARM_JOINT_NAMES: tuple[str, ...] = tuple(f"robot0_joint{i}" for i in range(1, 8))
FINGER_JOINT_NAMES: tuple[str, str] = ("gripper0_finger_joint1", "gripper0_finger_joint2")
ARM_ACTUATOR_NAMES: tuple[str, ...] = tuple(f"robot0_torq_j{i}" for i in range(1, 8))
FINGER_ACTUATOR_NAMES: tuple[str, str] = ("gripper0_gripper_finger_joint1", "gripper0_gripper_finger_joint2")
BASE_BODY = "robot0_base"
FLANGE_BODY = "robot0_right_hand"
TCP_SITE = "gripper0_grip_site"
LEFT_PAD_GEOM = "gripper0_finger1_pad_collision"
RIGHT_PAD_GEOM = "gripper0_finger2_pad_collision"
#: Bodies of each finger (the finger link and its pad).
LEFT_FINGER_BODIES: tuple[str, ...] = ("gripper0_leftfinger", "gripper0_finger_joint1_tip")
RIGHT_FINGER_BODIES: tuple[str, ...] = ("gripper0_rightfinger", "gripper0_finger_joint2_tip")
#: LIBERO's MountedPanda home configuration, rad.
HOME_JOINT_POSITIONS_RAD = np.array([0.0, -0.161037389, 0.0, -2.44459747, 0.0, 2.2267522, np.pi / 4])
#: Franka Panda joint velocity limits, rad/s.
JOINT_VELOCITY_LIMIT_RAD_S = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])
_FORMAT_VERSION = "libero-panda-1"


def pose_matrix(xpos: np.ndarray, xmat: np.ndarray) -> np.ndarray:
    """4x4 homogeneous transform from a MuJoCo position and flattened 3x3 rotation."""
    T = np.eye(4)
    T[:3, :3] = np.asarray(xmat, dtype=float).reshape(3, 3)
    T[:3, 3] = xpos
    return T


def cache_dir() -> Path:
    """``$CAPTAIN_CACHE_DIR/libero`` or ``$XDG_CACHE_HOME/captain/libero`` or ``~/.cache/captain/libero``."""
    env = os.environ.get("CAPTAIN_CACHE_DIR")
    if env:
        return Path(env) / "libero"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "captain" / "libero"


def _write_cached(text: str, stem: str, suffix: str, folder: Path) -> Path:
    digest = hashlib.sha256((_FORMAT_VERSION + text).encode()).hexdigest()[:12]
    path = folder / f"{stem}_{digest}{suffix}"
    if path.is_file():
        return path
    _write_atomic(path, text)
    return path


def robot_mjcf_text(scene_xml: str) -> str:
    """The robot subtree of a LIBERO scene MJCF, base at the origin, unused assets dropped."""
    import mujoco

    spec = mujoco.MjSpec.from_string(scene_xml)
    world = spec.worldbody
    for body in list(world.bodies):
        if body.name != BASE_BODY:
            spec.delete(body)
    for element in list(world.geoms) + list(world.sites) + list(world.cameras) + list(world.lights):
        spec.delete(element)
    base = spec.body(BASE_BODY)
    base.pos = [0.0, 0.0, 0.0]
    base.quat = [1.0, 0.0, 0.0, 0.0]
    used_meshes = {g.meshname for g in spec.geoms if g.meshname}
    used_materials = {g.material for g in spec.geoms if g.material}
    for mesh in list(spec.meshes):
        if mesh.name not in used_meshes:
            spec.delete(mesh)
    used_textures: set[str] = set()
    for material in list(spec.materials):
        if material.name not in used_materials:
            spec.delete(material)
        else:
            used_textures.update(t for t in material.textures if t)
    for texture in list(spec.textures):
        if texture.name not in used_textures:
            spec.delete(texture)
    spec.modelname = "libero_panda"
    spec.compile()
    return spec.to_xml()


@dataclass(frozen=True)
class RobotFiles:
    """The exported robot files.

    Attributes:
        mjcf_path: arm + gripper + mount MJCF (base at the origin).
        srdf_path: disabled self-collision pairs, or None when they could not be computed.
    """

    mjcf_path: Path
    srdf_path: Path | None


def export_robot_files(scene_xml: str, folder: Path | None = None) -> RobotFiles:
    """Write (once; content-addressed) the robot MJCF and its SRDF."""
    import mujoco

    folder = folder if folder is not None else cache_dir()
    mjcf_path = _write_cached(robot_mjcf_text(scene_xml), "panda_libero", ".xml", folder)
    srdf_path = mjcf_path.with_suffix(".srdf")
    if not srdf_path.is_file():
        try:
            from captain_backends.core.tabletop.collision_pairs import disabled_collision_pairs, srdf_text
        except ImportError:
            return RobotFiles(mjcf_path, None)
        model = mujoco.MjModel.from_xml_path(str(mjcf_path))
        arm_ids = [model.joint(n).id for n in ARM_JOINT_NAMES]
        pairs = disabled_collision_pairs(model, arm_ids, HOME_JOINT_POSITIONS_RAD)
        _write_atomic(srdf_path, srdf_text("panda_libero", pairs))
    return RobotFiles(mjcf_path, srdf_path)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (safe when several processes start at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}_", suffix=path.suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def finger_gap_offset_m(model: Any) -> float:
    """Distance between the pad faces along the closing axis with both finger joints at 0
    (the opening is ``q1 - q2 + offset``)."""
    import mujoco

    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    axis = data.xaxis[model.joint(FINGER_JOINT_NAMES[0]).id]
    left, right = model.geom(LEFT_PAD_GEOM).id, model.geom(RIGHT_PAD_GEOM).id
    centre = float(np.dot(data.geom_xpos[left] - data.geom_xpos[right], axis))
    half = [float(np.abs(data.geom_xmat[g].reshape(3, 3).T @ axis) @ model.geom_size[g])
            for g in (left, right)]
    return centre - half[0] - half[1]


def describe_robot(model: Any, data: Any, files: RobotFiles) -> tuple[RobotDescription, float]:
    """The driver's ``RobotDescription`` measured from the simulated scene, and the
    finger gap offset (m). ``T_world_base`` is the robot base pose in the LIBERO world."""
    arm_ids = [model.joint(n).id for n in ARM_JOINT_NAMES]
    finger_ids = [model.joint(n).id for n in FINGER_JOINT_NAMES]
    base = model.body(BASE_BODY).id
    flange = model.body(FLANGE_BODY).id
    site = model.site(TCP_SITE).id
    T_world_base = pose_matrix(data.xpos[base], data.xmat[base])
    T_world_flange = pose_matrix(data.xpos[flange], data.xmat[flange])
    T_world_tcp = pose_matrix(data.site_xpos[site], data.site_xmat[site])
    T_flange_tcp = np.linalg.inv(T_world_flange) @ T_world_tcp
    T_flange_tcp[np.abs(T_flange_tcp) < 1e-9] = 0.0
    robot_model = _load_robot_model(files.mjcf_path)
    gap0 = finger_gap_offset_m(robot_model)
    max_opening = float(model.jnt_range[finger_ids[0], 1] - model.jnt_range[finger_ids[1], 0] + gap0)
    description = RobotDescription(
        name="panda",
        model_path=files.mjcf_path,
        model_format="mjcf",
        srdf_path=files.srdf_path,
        arm_joint_names=ARM_JOINT_NAMES,
        base_frame=BASE_BODY,
        flange_frame=FLANGE_BODY,
        T_flange_tcp=T_flange_tcp,
        T_world_base=T_world_base,
        joint_lower_rad=model.jnt_range[arm_ids, 0].copy(),
        joint_upper_rad=model.jnt_range[arm_ids, 1].copy(),
        joint_velocity_limit_rad_s=JOINT_VELOCITY_LIMIT_RAD_S.copy(),
        gripper_max_opening_m=max_opening,
        home_joint_positions_rad=HOME_JOINT_POSITIONS_RAD.copy(),
    )
    return description, gap0


def _load_robot_model(path: Path) -> Any:
    import mujoco

    return mujoco.MjModel.from_xml_path(str(path))
