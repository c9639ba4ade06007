"""Arm kinematics with Pinocchio, built from the driver's own robot description.

The model is loaded from ``RobotDescription.model_path`` (MJCF or URDF, the same file the
driver simulates or the vendor ships). Every joint that is not an arm joint (the
fingers) is locked at the middle of its range, leaving a 7-dof arm model whose
configuration vector is in the description's command order.

Frames (defined once, here):

* **base**: ``RobotDescription.base_frame``. Every Cartesian value of the harness is
  expressed in it (z up).
* **flange**: ``RobotDescription.flange_frame`` (the last arm link / hand mount).
* **TCP** (tool centre point): ``T_flange_tcp`` applied to the flange; the point midway
  between the fingertips. Axes: **z** points out of the palm along the fingers (the
  approach direction), **x** is the jaw-closing axis (finger to finger), **y** = z × x.
  With this frame the quaternion ``[0, 2**-0.5, 2**-0.5, 0]`` is the natural top-down
  grasp: TCP z points down (-z of the base), the jaws close along the base y axis.
  ``[0, cos(pi/8), sin(pi/8), 0]`` is the same grasp turned 45° about the vertical.

Inverse kinematics is damped least squares on the TCP pose error (position in m,
orientation as a rotation vector in rad), with the step clamped to the joint limits, a
small null-space pull towards the middle of the joint ranges and optional random
restarts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin
from scipy.linalg.lapack import dposv as _dposv

from captain_backends.core.driver import RobotDescription
from captain_harness.core.errors import HarnessError
from captain_harness.core.results import FailureCategory

TCP_FRAME_NAME = "captain_tcp"

#: Distance (rad) from a joint limit at which a joint counts as "at its limit".
LIMIT_CONTACT_RAD = 2e-3
#: Largest joint change of one DLS iteration, rad.
MAX_STEP_RAD = 0.4
#: Rotation error above which the DLS step uses the log map's Jacobian (``Jlog6``), rad.
JLOG6_ABOVE_RAD = 0.05


class KinematicsError(HarnessError):
    """The robot description cannot be turned into a kinematic model (names, files)."""

    category = FailureCategory.NOT_AVAILABLE


@dataclass(frozen=True)
class IKResult:
    """Outcome of one inverse-kinematics solve.

    Attributes:
        success: the pose error is within tolerance (and the validity check passed).
        q: the best joint configuration found, rad, command order (clamped to limits).
        position_error_m / rotation_error_rad: remaining TCP pose error of ``q``.
        iterations: DLS iterations used over all attempts.
        restarts: random restarts used.
        reason: ``"converged"``, ``"joint_limit"`` (the best attempt ended pinned to a
            limit), ``"no_convergence"`` or ``"invalid"`` (converged but rejected by the
            validity check, e.g. self-collision).
        limited_joint: name of the joint pinned at a limit, or ``""``.
    """

    success: bool
    q: np.ndarray
    position_error_m: float
    rotation_error_rad: float
    iterations: int
    restarts: int
    reason: str
    limited_joint: str = ""


def _load_model(description: RobotDescription) -> pin.Model:
    path = Path(description.model_path)
    if not path.is_file():
        raise KinematicsError(f"robot model file {path} does not exist (RobotDescription.model_path)")
    fmt = description.model_format.lower()
    if fmt == "mjcf":
        return pin.buildModelFromMJCF(str(path))
    if fmt == "urdf":
        return pin.buildModelFromUrdf(str(path))
    raise KinematicsError(f"model_format={description.model_format!r} is not supported; use 'mjcf' or 'urdf'")


class Kinematics:
    """Forward and inverse kinematics of the arm's TCP in the base frame.

    Not thread-safe: each thread should use its own instance (models are cheap to load).
    """

    def __init__(self, description: RobotDescription) -> None:
        self.description = description
        full = _load_model(description)
        self.full_model = full
        names = list(description.arm_joint_names)
        missing = [n for n in names if not full.existJointName(n)]
        if missing:
            known = [full.names[i] for i in range(1, full.njoints)]
            raise KinematicsError(
                f"arm joints {missing} are not in {description.model_path}; the model has joints {known}"
            )
        q_ref = pin.neutral(full)
        locked: list[int] = []
        for jid in range(1, full.njoints):
            if full.names[jid] in names:
                continue
            locked.append(jid)
            joint = full.joints[jid]
            for k in range(joint.idx_q, joint.idx_q + joint.nq):
                lo, hi = full.lowerPositionLimit[k], full.upperPositionLimit[k]
                if math.isfinite(lo) and math.isfinite(hi) and hi - lo < 1e6:
                    q_ref[k] = 0.5 * (lo + hi)
        self.locked_joint_ids = locked
        self.locked_reference_q = q_ref
        model = pin.buildReducedModel(full, locked, q_ref) if locked else full
        if model.nq != len(names) or model.nv != len(names):
            raise KinematicsError(f"arm joints {names} must be single-dof joints; the reduced model has nq={model.nq}")
        # permutation from command order to model order
        self._model_index = np.array([model.joints[model.getJointId(n)].idx_q for n in names], dtype=int)
        self.nq = len(names)
        self.joint_names = tuple(names)
        self._identity_order = bool(np.all(self._model_index == np.arange(self.nq)))
        #: column of each model-order joint in command order
        self._command_of_model = np.argsort(self._model_index)

        if not model.existFrame(description.base_frame):
            raise KinematicsError(
                f"base_frame {description.base_frame!r} is not a frame of the model; "
                f"frames: {[f.name for f in model.frames][:40]}"
            )
        if not model.existFrame(description.flange_frame):
            raise KinematicsError(
                f"flange_frame {description.flange_frame!r} is not a frame of the model; "
                f"frames: {[f.name for f in model.frames][:40]}"
            )
        base_id = model.getFrameId(description.base_frame)
        if model.frames[base_id].parentJoint != 0:
            raise KinematicsError(
                f"base_frame {description.base_frame!r} moves with the arm joints; it must be fixed to the world"
            )
        flange_id = model.getFrameId(description.flange_frame)
        flange = model.frames[flange_id]
        T_flange_tcp = np.asarray(description.T_flange_tcp, dtype=float)
        placement = flange.placement * pin.SE3(T_flange_tcp[:3, :3], T_flange_tcp[:3, 3])
        self.tcp_frame_id = model.addFrame(
            pin.Frame(TCP_FRAME_NAME, flange.parentJoint, flange_id, placement, pin.FrameType.OP_FRAME)
        )
        self.flange_frame_id = flange_id
        self.model = model
        self.data = model.createData()
        pin.framesForwardKinematics(model, self.data, pin.neutral(model))
        self._oMbase = self.data.oMf[base_id].copy()
        self._baseMo = self._oMbase.inverse()
        self.T_base_model = self._baseMo.homogeneous
        self._base_is_origin = bool(self._oMbase.isIdentity(1e-12))
        #: the base frame is the model's world frame exactly: poses need no change of frame
        self._base_is_world = bool(np.array_equal(self._oMbase.homogeneous, np.eye(4)))

        lower = np.asarray(description.joint_lower_rad, float).copy()
        upper = np.asarray(description.joint_upper_rad, float).copy()
        model_lower = model.lowerPositionLimit[self._model_index]
        model_upper = model.upperPositionLimit[self._model_index]
        if np.any(np.abs(model_lower - lower) > 0.05) or np.any(np.abs(model_upper - upper) > 0.05):
            raise KinematicsError(
                f"joint limits of {Path(description.model_path).name} "
                f"({np.round(model_lower, 4).tolist()} .. "
                f"{np.round(model_upper, 4).tolist()}) disagree with the RobotDescription "
                f"({np.round(lower, 4).tolist()} .. {np.round(upper, 4).tolist()}); an MJCF without "
                '<compiler angle="radian"/> is read in degrees'
            )
        self.lower_rad = lower
        self.upper_rad = upper
        self.mid_rad = 0.5 * (lower + upper)
        self.range_rad = upper - lower
        self.velocity_limit_rad_s = np.asarray(description.joint_velocity_limit_rad_s, float)
        self._lower_model = self.to_model(lower).copy()
        self._upper_model = self.to_model(upper).copy()
        self.home_rad = np.clip(np.asarray(description.home_joint_positions_rad, float), lower, upper)
        self._eye6 = np.eye(6)
        self._eye_n = np.eye(self.nq)
        self._lower_model_list = self._lower_model.tolist()
        self._upper_model_list = self._upper_model.tolist()
        #: ``damping * I6`` of the last damping used (the DLS step adds it to ``J J^T``)
        self._damp_eye: tuple[float, np.ndarray] = (1e-4, 1e-4 * self._eye6)

    # ----------------------------------------------------------------- ordering
    def to_model(self, q_cmd: np.ndarray) -> np.ndarray:
        """Configuration in model order from command order."""
        if self._identity_order:
            return np.asarray(q_cmd, dtype=float)
        q = np.empty(self.nq)
        q[self._model_index] = q_cmd
        return q

    def from_model(self, q_model: np.ndarray) -> np.ndarray:
        """Configuration in command order from model order."""
        if self._identity_order:
            return np.array(q_model, dtype=float)
        return np.asarray(q_model, dtype=float)[self._model_index]

    # ----------------------------------------------------------------------- FK
    # Forward kinematics runs ``computeJointJacobians``: it places the joints exactly as
    # ``forwardKinematics`` does (the same arithmetic; the Jacobian columns cost next to
    # nothing), and it is the pass the IK runs anyway. One Pinocchio routine for both keeps
    # the code that a motion call touches small (each one first touched after a long
    # physics run costs tens of microseconds).

    def fk(self, q: np.ndarray) -> np.ndarray:
        """``T_base_tcp`` (4x4, metres) at joint configuration ``q`` (rad, command order)."""
        pin.computeJointJacobians(self.model, self.data, self.to_model(q))
        oMf = pin.updateFramePlacement(self.model, self.data, self.tcp_frame_id)
        return oMf.homogeneous if self._base_is_world else (self._baseMo * oMf).homogeneous

    def fk_flange(self, q: np.ndarray) -> np.ndarray:
        """``T_base_flange`` (4x4, metres) at ``q``."""
        pin.computeJointJacobians(self.model, self.data, self.to_model(q))
        oMf = pin.updateFramePlacement(self.model, self.data, self.flange_frame_id)
        return oMf.homogeneous if self._base_is_world else (self._baseMo * oMf).homogeneous

    def _model_rows(self, qs: np.ndarray) -> np.ndarray:
        """Configurations (N, nq) in model order from command order."""
        qs = np.asarray(qs, dtype=float).reshape(-1, self.nq)
        return qs if self._identity_order else qs[:, self._command_of_model]

    def tcp_positions(self, qs: np.ndarray) -> np.ndarray:
        """TCP positions (N, 3) in the base frame for configurations ``qs`` (N, nq)."""
        rows = self._model_rows(qs)
        model, data, fid = self.model, self.data, self.tcp_frame_id
        joint_pass, place = pin.computeJointJacobians, pin.updateFramePlacement
        points = []
        for row in rows:
            joint_pass(model, data, row)
            points.append(place(model, data, fid).translation)
        out = np.array(points) if points else np.empty((0, 3))
        if self._base_is_origin:
            return out
        return out @ self._baseMo.rotation.T + self._baseMo.translation

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """6 x nq TCP Jacobian (linear; angular) in base-frame axes, command order."""
        J = pin.computeFrameJacobian(
            self.model, self.data, self.to_model(q), self.tcp_frame_id, pin.LOCAL_WORLD_ALIGNED
        )
        R = self._baseMo.rotation
        J = np.vstack((R @ J[:3], R @ J[3:]))
        return J if self._identity_order else J[:, self._model_index]

    # ----------------------------------------------------------------------- IK
    def within_limits(self, q: np.ndarray, margin_rad: float = 0.0) -> bool:
        """True when every joint is within its limits (shrunk by ``margin_rad``)."""
        return bool(min(np.subtract(q, self.lower_rad).min(), np.subtract(self.upper_rad, q).min()) >= margin_rad)

    def clamp(self, q: np.ndarray) -> np.ndarray:
        """``q`` clipped to the joint limits (a new array)."""
        return np.minimum(np.maximum(q, self.lower_rad), self.upper_rad)

    def random_configuration(self, rng: np.random.Generator) -> np.ndarray:
        """A uniformly random configuration within the joint limits (command order)."""
        return rng.uniform(self.lower_rad, self.upper_rad)

    def solve_ik(
        self,
        T_base_target: np.ndarray,
        q_seed: np.ndarray,
        *,
        max_iterations: int = 80,
        restarts: int = 0,
        rng: np.random.Generator | None = None,
        position_tolerance_m: float = 1e-4,
        rotation_tolerance_rad: float = 1e-3,
        is_valid: Callable[[np.ndarray], bool] | None = None,
        damping: float = 1e-4,
    ) -> IKResult:
        """Joint configuration putting the TCP at ``T_base_target``.

        Args:
            T_base_target: desired TCP pose in the base frame (4x4, metres).
            q_seed: starting configuration, rad, command order.
            max_iterations: DLS iterations per attempt.
            restarts: extra attempts from random configurations when the seeded one fails.
            rng: random generator of the restarts (seeded 0 when omitted: deterministic).
            position_tolerance_m / rotation_tolerance_rad: convergence tolerances.
            is_valid: optional extra acceptance test of a converged solution (e.g. no
                self-collision); a rejected solution triggers the next restart.
            damping: Levenberg-Marquardt damping λ of the DLS step (larger: slower but
                steadier near singularities).
        """
        oMdes = pin.SE3(np.asarray(T_base_target, dtype=float))
        if not self._base_is_origin:
            oMdes = self._oMbase * oMdes
        seed = np.minimum(np.maximum(q_seed, self.lower_rad), self.upper_rad)
        total_iters = 0
        best: tuple[float, np.ndarray, float, float] | None = None
        rejected = False
        for attempt in range(restarts + 1):
            if attempt == 0:
                q0 = seed
            else:
                if rng is None:
                    rng = np.random.default_rng(0)
                q0 = self.random_configuration(rng)
            q, perr, rerr, iters, converged = self._dls(
                oMdes,
                self.to_model(q0),
                max_iterations,
                position_tolerance_m,
                rotation_tolerance_rad,
                damping,
            )
            total_iters += iters
            q_cmd = self.from_model(q)
            if converged:
                if is_valid is None or is_valid(q_cmd):
                    return IKResult(True, q_cmd, perr, rerr, total_iters, attempt, "converged")
                rejected = True
            score = perr + 0.1 * rerr
            if best is None or score < best[0]:
                best = (score, q_cmd, perr, rerr)
        assert best is not None
        _, q_best, perr, rerr = best
        limited = self.joint_at_limit(q_best)
        if rejected and perr <= position_tolerance_m and rerr <= rotation_tolerance_rad:
            reason = "invalid"
        elif limited:
            reason = "joint_limit"
        else:
            reason = "no_convergence"
        return IKResult(False, q_best, perr, rerr, total_iters, restarts, reason, limited)

    def target_pose(self, xyzquat: list[float]) -> pin.SE3:
        """The IK target of ``solve_near`` for a TCP pose in the base frame given as
        ``[x, y, z, qx, qy, qz, qw]`` (metres; unit quaternion, scalar last), expressed in
        the model's world frame."""
        oMdes = pin.XYZQUATToSE3(np.array(xyzquat, dtype=float))
        return oMdes if self._base_is_origin else self._oMbase * oMdes

    def solve_near(
        self,
        target: pin.SE3,
        q_seed: np.ndarray,
        *,
        max_iterations: int = 80,
        position_tolerance_m: float = 1e-4,
        rotation_tolerance_rad: float = 1e-3,
        damping: float = 1e-4,
        seed_within_limits: bool = False,
    ) -> np.ndarray | None:
        """One IK attempt from ``q_seed`` (rad, command order; clamped to the limits) without
        restarts or validity check: the converged configuration, or None.

        ``target`` comes from ``target_pose``. The configuration is exactly the ``q`` of
        ``solve_ik(T, q_seed, ...)`` with the same options when that succeeds; this is its
        lean form for many nearby solves (the waypoints of a path). ``seed_within_limits``:
        the caller already clamped ``q_seed`` (a float array it hands over)."""
        if seed_within_limits:
            seed = q_seed
        else:
            seed = np.minimum(np.maximum(q_seed, self.lower_rad), self.upper_rad)
        q, _, _, _, converged = self._dls(
            target,
            seed if self._identity_order else self.to_model(seed),
            max_iterations,
            position_tolerance_m,
            rotation_tolerance_rad,
            damping,
        )
        if not converged:
            return None
        return q if self._identity_order else q[self._model_index]

    def joint_at_limit(self, q: np.ndarray, tolerance_rad: float = LIMIT_CONTACT_RAD) -> str:
        """Name of the first joint within ``tolerance_rad`` of a limit, or ``""``."""
        near = (q - self.lower_rad < tolerance_rad) | (self.upper_rad - q < tolerance_rad)
        idx = np.flatnonzero(near)
        return self.joint_names[int(idx[0])] if idx.size else ""

    def _dls(
        self, oMdes: pin.SE3, q: np.ndarray, max_iterations: int, tol_p: float, tol_r: float, damping: float
    ) -> tuple[np.ndarray, float, float, int, bool]:
        """Damped least squares from ``q`` (model order). Returns (q, perr, rerr, iters, converged).

        The error is ``log6(T_tcp^-1 T_des)`` in the TCP frame, its Jacobian
        ``Jlog6 · J_local``; the step ``J^T (J J^T + λI)^-1 e`` is limited to
        ``MAX_STEP_RAD`` per joint and clamped to the joint limits.
        """
        model, data, fid = self.model, self.data, self.tcp_frame_id
        lower, upper = self._lower_model, self._upper_model
        lower_l, upper_l = self._lower_model_list, self._upper_model_list
        joint_jacobians, frame_placement, frame_jacobian = (
            pin.computeJointJacobians,
            pin.updateFramePlacement,
            pin.getFrameJacobian,
        )
        log6, local, dot, sqrt = pin.log6, pin.LOCAL, np.dot, math.sqrt
        if self._damp_eye[0] != damping:
            self._damp_eye = (damping, damping * self._eye6)
        damp_eye = self._damp_eye[1]

        def damped_step(J: np.ndarray, e: np.ndarray) -> np.ndarray | None:
            """The damped step ``J^T (J J^T + λI)^-1 e``; None when the solve fails."""
            A = dot(J, J.T)
            A += damp_eye
            _, x, info = _dposv(A, e, overwrite_a=1)
            return None if info != 0 else dot(J.T, x)

        perr = rerr = math.inf
        q = q.copy()
        nq = len(lower_l)
        at_limit = False
        for it in range(max_iterations + 1):
            joint_jacobians(model, data, q)
            iMd = frame_placement(model, data, fid).actInv(oMdes)
            e = log6(iMd).vector
            tx, ty, tz = iMd.translation.tolist()
            _, _, _, wx, wy, wz = e.tolist()
            perr = sqrt(tx * tx + ty * ty + tz * tz)
            rerr = sqrt(wx * wx + wy * wy + wz * wz)
            if perr <= tol_p and rerr <= tol_r:
                return q, perr, rerr, it, True
            if it == max_iterations:
                break
            J = frame_jacobian(model, data, fid, local)
            if rerr > JLOG6_ABOVE_RAD:  # the log map's own Jacobian matters for large turns
                J = dot(pin.Jlog6(iMd.inverse()), J)
            dq = damped_step(J, e)
            if dq is None:
                break
            if at_limit:
                # active set: joints resting on a limit and pushed outwards are frozen
                # and the step is recomputed with the others
                blocked = ((q <= lower) & (dq < 0.0)) | ((q >= upper) & (dq > 0.0))
                if blocked.any():
                    J = J.copy()
                    J[:, blocked] = 0.0
                    dq = damped_step(J, e)
                    if dq is None:
                        break
            dl = dq.tolist()
            step = max(max(dl), -min(dl))
            if step > MAX_STEP_RAD:
                dq *= MAX_STEP_RAD / step
            q += dq
            ql = q.tolist()
            at_limit = False
            for i in range(nq):
                if ql[i] <= lower_l[i]:
                    q[i] = lower_l[i]
                    at_limit = True
                elif ql[i] >= upper_l[i]:
                    q[i] = upper_l[i]
                    at_limit = True
        return q, perr, rerr, max_iterations, False
