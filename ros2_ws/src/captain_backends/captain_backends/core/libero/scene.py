"""One loaded LIBERO task: the environment and everything the driver derives from it."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA
from captain_backends.core.libero.appearance import AppearanceRandomizer
from captain_backends.core.libero.cameras import CameraRenderer
from captain_backends.core.libero.catalogue import LiberoTask
from captain_backends.core.libero.config import LiberoConfig
from captain_backends.core.libero.contacts import ContactClassifier
from captain_backends.core.libero.control import JointTracker
from captain_backends.core.libero.environment import build_env
from captain_backends.core.libero.layout import ARENA_SURFACES, LayoutLimits, LayoutSampler
from captain_backends.core.libero.robot_model import (
    ARM_ACTUATOR_NAMES,
    ARM_JOINT_NAMES,
    BASE_BODY,
    FINGER_ACTUATOR_NAMES,
    FINGER_JOINT_NAMES,
    FLANGE_BODY,
    LEFT_FINGER_BODIES,
    RIGHT_FINGER_BODIES,
    TCP_SITE,
    describe_robot,
    export_robot_files,
)

_HAND_BODIES = (FLANGE_BODY, "gripper0_right_gripper", "gripper0_eef")
_MOUNT_ROOT = "mount0_base"


class LiberoScene:
    """Everything built for one task: LIBERO's environment and the driver's views of its
    MuJoCo model (joint addresses, tracker, contact classes, cameras, robot description,
    appearance and layout randomisers).

    Args:
        task: the catalogue entry.
        config: the driver parameters.
    """

    def __init__(self, task: LiberoTask, config: LiberoConfig) -> None:
        self.task = task
        self.env = build_env(task, seed=config.seed)
        self.cameras: CameraRenderer | None = None
        try:
            self._build(config)
        except BaseException:
            self.close()
            raise

    def _build(self, config: LiberoConfig) -> None:
        import mujoco

        self.domain = self.env.env
        self.model = self.domain.sim.model._model
        self.data = self.domain.sim.data._data
        m = self.model
        self.substeps = config.substeps(float(m.opt.timestep))
        self.timestep_s = float(m.opt.timestep)

        joints = [m.joint(n) for n in ARM_JOINT_NAMES]
        self.arm_qpos = np.array([int(j.qposadr[0]) for j in joints])
        self.arm_dof = np.array([int(j.dofadr[0]) for j in joints])
        fingers = [m.joint(n) for n in FINGER_JOINT_NAMES]
        self.finger_qpos = np.array([int(j.qposadr[0]) for j in fingers])
        finger_actuators = np.array([m.actuator(n).id for n in FINGER_ACTUATOR_NAMES])
        finger_open = np.array([r[np.argmax(np.abs(r))] for r in m.actuator_ctrlrange[finger_actuators]])
        self.tracker = JointTracker(
            m, self.arm_qpos, self.arm_dof, np.array([m.actuator(n).id for n in ARM_ACTUATOR_NAMES]),
            finger_actuators, finger_open, config.joint_bandwidth_rad_s, config.joint_damping_ratio)

        # LIBERO objects: movable objects then fixtures, each by its root body.
        self.object_names = tuple(sorted(self.domain.objects_dict))
        self.fixture_names = tuple(sorted(self.domain.fixtures_dict))
        self.entity_names = self.object_names + self.fixture_names
        self.entity_bodies = [int(self.domain.obj_body_id[n]) for n in self.entity_names]
        self.base_body = m.body(BASE_BODY).id
        self.tcp_site = m.site(TCP_SITE).id
        self.contacts = ContactClassifier(
            m, self.base_body, [m.body(n).id for n in _HAND_BODIES],
            [m.body(n).id for n in LEFT_FINGER_BODIES], [m.body(n).id for n in RIGHT_FINGER_BODIES],
            _body_id(m, _MOUNT_ROOT), self.entity_bodies, self.tcp_site)
        self.articulated = self._articulated_joints()

        mujoco.mj_forward(m, self.data)
        files = export_robot_files(self.domain.model.get_xml())
        self.description, self.finger_gap_m = describe_robot(m, self.data, files)
        self.T_base_world = np.linalg.inv(self.description.T_world_base)

        self.cameras = CameraRenderer(m, config.camera_width_px, config.camera_height_px,
                                      (HEAD_CAMERA, WRIST_CAMERA), config.antialiasing)
        robot_geoms = self.contacts.geom_class != 0
        self.appearance = AppearanceRandomizer(
            m, self.cameras.camera_ids[HEAD_CAMERA],
            {int(m.geom_matid[g]) for g in np.flatnonzero(robot_geoms) if m.geom_matid[g] >= 0},
            set(np.flatnonzero(robot_geoms).tolist()))
        fixture_geoms = np.zeros(m.ngeom, dtype=bool)
        for name in self.fixture_names:
            if name in ARENA_SURFACES:
                continue
            index = self.entity_names.index(name)
            fixture_geoms |= self.contacts.geom_object == index
        base_xy = self.description.T_world_base[:2, 3]
        self.layout = LayoutSampler(
            self.domain, m, self.data, base_xy,
            LayoutLimits(spread_m=config.layout_spread_m, yaw_rad=config.layout_yaw_rad),
            robot_geoms, fixture_geoms)

    def _articulated_joints(self) -> dict[str, int]:
        """Non-free joints of LIBERO objects and fixtures: name -> qpos address."""
        import mujoco

        m = self.model
        owned = set()
        for root in self.entity_bodies:
            owned.update(b for b in range(m.nbody) if _descends(m, b, root))
        joints = {}
        for j in range(m.njnt):
            if m.jnt_bodyid[j] in owned and m.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE:
                joints[m.joint(j).name] = int(m.jnt_qposadr[j])
        return joints

    def close(self) -> None:
        """Free the renderer and LIBERO's environment."""
        if self.cameras is not None:
            self.cameras.close()
            self.cameras = None
        with contextlib.suppress(Exception):  # robosuite's close may fail on a half-built env
            self.env.close()


def _body_id(model: Any, name: str) -> int | None:
    import mujoco

    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    return body if body >= 0 else None


def _descends(model: Any, body: int, ancestor: int) -> bool:
    while True:
        if body == ancestor:
            return True
        if body == 0:
            return False
        body = int(model.body_parentid[body])
