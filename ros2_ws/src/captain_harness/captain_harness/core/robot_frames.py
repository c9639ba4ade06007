"""The robot's frame tree (what ``/tf``, ``/tf_static`` and ``/robot_description`` carry),
from the driver's own kinematic model. ROS-free.

The tree is the Pinocchio model the harness plans with (``kinematics.Kinematics``: the
driver's MJCF or URDF, non-arm joints such as the fingers locked at the middle of their
range). Its links are the model's bodies plus the tool centre point ``captain_tcp``
(child of the flange) and, once their poses are known, the camera optical frames
``<camera>_optical_frame`` (OpenCV: x right, y down, z forward).

Each edge joins a link to its parent link, as robot_state_publisher publishes them:

* an edge through an arm joint moves: its transform depends on that joint's position and
  goes on ``/tf`` at the joint-state rate;
* every other edge (fixed mounts, the locked fingers, the TCP, the cameras) is static and
  goes on ``/tf_static`` once.

``urdf()`` writes the same tree as a kinematic URDF (links and joints with origins,
axes and limits; no meshes), so RViz's RobotModel display and any robot_state_publisher
read the frames the harness uses. Transforms are 4x4 homogeneous matrices in metres,
``T_parent_child`` (child coordinates to parent coordinates).
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

import numpy as np
import pinocchio as pin

from captain_backends.core.driver import RobotDescription
from captain_harness.core.kinematics import TCP_FRAME_NAME, Kinematics

#: How a camera's optical frame is named in the tree.
OPTICAL_SUFFIX = "_optical_frame"


@dataclass(frozen=True)
class Edge:
    """One parent -> child link of the tree.

    Attributes:
        parent / child: link names.
        joint: the arm joint that moves the child ("" for a static edge).
        frame_id: Pinocchio frame id of the child (-1 for cameras).
    """

    parent: str
    child: str
    joint: str
    frame_id: int


def _rpy(R: np.ndarray) -> tuple[float, float, float]:
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) of a rotation matrix."""
    return tuple(float(v) for v in pin.rpy.matrixToRpy(np.asarray(R, float)))


def _origin(T: np.ndarray) -> str:
    xyz = " ".join(f"{float(v):.9g}" for v in T[:3, 3])
    rpy = " ".join(f"{v:.9g}" for v in _rpy(T[:3, :3]))
    return f'<origin xyz="{xyz}" rpy="{rpy}"/>'


class FrameTree:
    """Links, edges and transforms of one driver's robot (see the module docstring).

    Args:
        description: the driver's ``RobotDescription``.
        kinematics: an already built ``Kinematics`` of it (built when omitted).
    """

    def __init__(self, description: RobotDescription, kinematics: Kinematics | None = None) -> None:
        self.description = description
        self.kin = kinematics or Kinematics(description)
        model = self.kin.model
        self.model = model
        self.data = model.createData()
        frames = model.frames
        keep = [i for i, f in enumerate(frames) if f.type == pin.FrameType.BODY or f.name == TCP_FRAME_NAME]
        kept = set(keep)
        edges: list[Edge] = []
        self._joint_frame: dict[str, int] = {}
        for fid in keep:
            joint = ""
            parent = frames[fid].parentFrame
            seen = {fid}
            while parent not in kept and parent != 0:
                if parent in seen:  # a frame of a locked joint is its own parent: take the
                    # first link moved by the same joint (same rigid body, so the same transforms)
                    parent = next(i for i in keep if frames[i].parentJoint == frames[fid].parentJoint)
                    break
                seen.add(parent)
                if frames[parent].type == pin.FrameType.JOINT:
                    joint = frames[parent].name
                    self._joint_frame[joint] = parent
                parent = frames[parent].parentFrame
            if parent == fid:
                continue
            if parent == 0 and parent not in kept:
                continue  # a root body (under the model's universe): the tree starts here
            edges.append(Edge(frames[parent].name, frames[fid].name, joint, fid))
        self.edges = tuple(edges)
        self.root = next((frames[i].name for i in keep if all(e.child != frames[i].name for e in edges)),
                         description.base_frame)
        self.link_names = tuple(frames[i].name for i in keep)
        self.moving = tuple(e for e in edges if e.joint)
        self.static_edges = tuple(e for e in edges if not e.joint)
        self._id = {frames[i].name: i for i in keep}
        self._neutral = pin.neutral(model)
        pin.framesForwardKinematics(model, self.data, self._neutral)
        self._static = [(e.parent, e.child, self._relative(e.parent, e.child)) for e in self.static_edges]
        #: camera optical frames: name -> (parent link, T_parent_camera)
        self.cameras: dict[str, tuple[str, np.ndarray]] = {}

    # ------------------------------------------------------------------ transforms
    def _relative(self, parent: str, child: str) -> np.ndarray:
        """``T_parent_child`` of the current ``self.data`` placements."""
        oMp = self.data.oMf[self._id[parent]]
        oMc = self.data.oMf[self._id[child]]
        return (oMp.actInv(oMc)).homogeneous

    def static_transforms(self) -> list[tuple[str, str, np.ndarray]]:
        """``(parent, child, T_parent_child)`` of every static edge, cameras included."""
        cams = [(parent, f"{name}{OPTICAL_SUFFIX}", T) for name, (parent, T) in sorted(self.cameras.items())]
        return [*self._static, *cams]

    def moving_transforms(self, q_rad: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
        """``(parent, child, T_parent_child)`` of every edge moved by an arm joint, at the
        arm configuration ``q_rad`` (rad, the description's command order)."""
        pin.framesForwardKinematics(self.model, self.data, self.kin.to_model(np.asarray(q_rad, float)))
        return [(e.parent, e.child, self._relative(e.parent, e.child)) for e in self.moving]

    def T_base_link(self, q_rad: np.ndarray, link: str) -> np.ndarray:
        """Pose of ``link`` in the base frame at ``q_rad`` (4x4, m)."""
        pin.framesForwardKinematics(self.model, self.data, self.kin.to_model(np.asarray(q_rad, float)))
        return self._relative(self.description.base_frame, link)

    def set_camera(self, name: str, T_base_camera: np.ndarray, q_rad: np.ndarray, parent: str = "") -> bool:
        """Record where camera ``name``'s optical frame sits: on ``parent`` (a link; "" =
        the base frame), from its pose ``T_base_camera`` captured at arm configuration
        ``q_rad``. Returns True when the static transform changed (by more than 0.1 mm or
        1 mrad), i.e. ``/tf_static`` should be published again."""
        parent = parent or self.description.base_frame
        if parent not in self._id:
            raise ValueError(f"camera {name!r}: parent link {parent!r} is not in the model; links: "
                             f"{', '.join(self.link_names)}")
        T_base_parent = self.T_base_link(q_rad, parent)
        T = np.linalg.inv(T_base_parent) @ np.asarray(T_base_camera, float)
        old = self.cameras.get(name)
        if old is not None and old[0] == parent and np.allclose(old[1], T, atol=1e-4):
            return False
        self.cameras[name] = (parent, T)
        return True

    # ------------------------------------------------------------------------ URDF
    def urdf(self) -> str:
        """The tree as a kinematic URDF (no meshes; cameras not included: they are on
        ``/tf_static`` once known). Arm joints are revolute (or prismatic) with the
        model's limits; every other edge is a fixed joint."""
        model, data = self.model, self.data
        pin.framesForwardKinematics(model, data, self._neutral)
        pin.computeJointJacobians(model, data, self._neutral)
        lines = ['<?xml version="1.0"?>', f"<robot name={quoteattr(self.description.name or 'robot')}>",
                 f"  <link name={quoteattr(self.root)}/>"]
        for e in self.edges:
            lines.append(f"  <link name={quoteattr(e.child)}/>")
        for e in self.edges:
            if not e.joint:
                lines += [f"  <joint name={quoteattr(e.child + '_fixed_joint')} type=\"fixed\">",
                          f"    <parent link={quoteattr(e.parent)}/>", f"    <child link={quoteattr(e.child)}/>",
                          f"    {_origin(self._relative(e.parent, e.child))}", "  </joint>"]
                continue
            jid = model.getJointId(e.joint)
            jframe = self._joint_frame[e.joint]
            oMp, oMj = data.oMf[self._id[e.parent]], data.oMf[jframe]
            T_parent_joint = oMp.actInv(oMj).homogeneous
            J = pin.getJointJacobian(model, data, jid, pin.LOCAL)[:, model.joints[jid].idx_v]
            angular, linear = J[3:], J[:3]
            kind = "revolute" if np.linalg.norm(angular) > 0.5 else "prismatic"
            axis = angular if kind == "revolute" else linear
            axis = axis / np.linalg.norm(axis)
            iq = model.joints[jid].idx_q
            lo, hi = float(model.lowerPositionLimit[iq]), float(model.upperPositionLimit[iq])
            vel = float(model.velocityLimit[model.joints[jid].idx_v])
            eff = float(model.effortLimit[model.joints[jid].idx_v])
            vel, eff = (v if np.isfinite(v) else 0.0 for v in (vel, eff))
            child = e.child
            T_joint_child = oMj.actInv(data.oMf[e.frame_id]).homogeneous
            offset = not np.allclose(T_joint_child, np.eye(4), atol=1e-9)
            if offset:
                child = f"{e.joint}_frame"
                lines.append(f"  <link name={quoteattr(child)}/>")
            lines += [f"  <joint name={quoteattr(e.joint)} type=\"{kind}\">",
                      f"    <parent link={quoteattr(e.parent)}/>", f"    <child link={quoteattr(child)}/>",
                      f"    {_origin(T_parent_joint)}",
                      f"    <axis xyz=\"{' '.join(f'{float(v):.9g}' for v in axis)}\"/>",
                      f"    <limit lower=\"{lo:.9g}\" upper=\"{hi:.9g}\" velocity=\"{vel:.9g}\" "
                      f"effort=\"{eff:.9g}\"/>",
                      "  </joint>"]
            if offset:
                lines += [f"  <joint name={quoteattr(e.joint + '_offset')} type=\"fixed\">",
                          f"    <parent link={quoteattr(child)}/>", f"    <child link={quoteattr(e.child)}/>",
                          f"    {_origin(T_joint_child)}", "  </joint>"]
        lines.append("</robot>")
        return "\n".join(lines) + "\n"
