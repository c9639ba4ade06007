"""Forward kinematics of the XR1 description model (Pinocchio), without tf2.

tf2 is not available, so poses of frames that move with the arm (a wrist camera, the
F/T sensor frame) are computed here from the measured joint positions and the same
URDF/MJCF the harness uses. Static offsets in the configuration are URDF-style
``xyz`` + ``rpy`` (R = Rz(yaw) Ry(pitch) Rx(roll)).

Frames: every pose returned is expressed in the model's base frame (``base_frame``),
metres.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from captain_backends.core.xr1.errors import XR1ConfigError


def transform_from_xyz_rpy(xyz_m: Sequence[float], rpy_rad: Sequence[float]) -> np.ndarray:
    """4x4 homogeneous transform from a URDF-style origin (metres, roll-pitch-yaw rad)."""
    roll, pitch, yaw = (float(v) for v in rpy_rad)
    cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    T = np.eye(4)
    T[:3, :3] = np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])
    T[:3, 3] = [float(v) for v in xyz_m]
    return T


class ArmKinematics:
    """Frame poses of the description model as functions of the arm joint positions.

    Args:
        model_path: URDF or MJCF file.
        model_format: ``"urdf"`` or ``"mjcf"``.
        base_frame: the model frame every returned pose is expressed in.
        arm_joint_names: the arm joints in command order (other joints stay at the
            model's neutral configuration).

    Raises:
        XR1ConfigError: when the model cannot be loaded or lacks a named joint/frame
            (the message lists the ones it has).
    """

    def __init__(self, model_path: Path, model_format: str, base_frame: str,
                 arm_joint_names: Sequence[str]) -> None:
        import pinocchio as pin

        self._pin = pin
        try:
            if model_format == "urdf":
                model = pin.buildModelFromUrdf(str(model_path))
            else:
                model = pin.buildModelFromMJCF(str(model_path))
        except Exception as exc:  # pinocchio raises plain RuntimeError / ValueError
            raise XR1ConfigError(f"could not load the {model_format} model {model_path}: {exc}") from exc
        self.model = model
        self._data = model.createData()
        self._lock = threading.Lock()
        joints = [model.names[i] for i in range(1, model.njoints)]
        missing = [n for n in arm_joint_names if not model.existJointName(n)]
        if missing:
            raise XR1ConfigError(f"arm joint(s) {missing} are not in the model {model_path.name}; "
                                 f"its joints: {', '.join(joints)}")
        ids = [model.getJointId(n) for n in arm_joint_names]
        if any(model.joints[i].nq != 1 for i in ids):
            raise XR1ConfigError("every arm joint must be a 1-dof (revolute or prismatic) joint")
        self._q_index = np.array([model.joints[i].idx_q for i in ids])
        self.lower_rad = model.lowerPositionLimit[self._q_index].copy()
        self.upper_rad = model.upperPositionLimit[self._q_index].copy()
        self.base_frame = base_frame
        self._base_id = self.frame_id(base_frame)
        self._q = pin.neutral(model)

    def frame_names(self) -> list[str]:
        """Every frame of the model."""
        return [f.name for f in self.model.frames]

    def frame_id(self, name: str) -> int:
        """Pinocchio's id of a frame.

        Raises:
            XR1ConfigError: listing the model's frames.
        """
        if not self.model.existFrame(name):
            raise XR1ConfigError(f"frame {name!r} is not in the description model; frames: "
                                 f"{', '.join(self.frame_names())}")
        return self.model.getFrameId(name)

    def T_base_frames(self, q_arm_rad: np.ndarray, frame_ids: Sequence[int]) -> list[np.ndarray]:
        """4x4 poses of the given frames in the base frame at arm positions ``q_arm_rad``."""
        pin = self._pin
        with self._lock:
            self._q[self._q_index] = q_arm_rad
            pin.framesForwardKinematics(self.model, self._data, self._q)
            T_world_base = self._data.oMf[self._base_id].homogeneous
            T_base_world = np.linalg.inv(T_world_base)
            return [T_base_world @ self._data.oMf[i].homogeneous for i in frame_ids]

    def T_base_frame(self, q_arm_rad: np.ndarray, frame: str) -> np.ndarray:
        """4x4 pose of ``frame`` in the base frame at arm positions ``q_arm_rad``."""
        return self.T_base_frames(q_arm_rad, [self.frame_id(frame)])[0]
