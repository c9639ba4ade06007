"""Joint-space tracking for the torque-driven Panda: a computed-torque cascade.

robosuite's Panda has torque motors. Each physics substep, after ``mj_step1`` (which
computes the mass matrix and the bias forces for the current state), the controller
computes per arm joint

    e      = q_des - q
    v_ref  = clip(qd_des + sign(e) min(k_pos |e|, sqrt(2 a_brake |e|)), -v_max, v_max)
    a_ref  = clip(k_vel (v_ref - qd), -a_max, a_max)                  (velocity loop)
    tau    = M_arm a_ref + bias_arm                                   (inverse dynamics)

``bias`` is MuJoCo's ``qfrc_bias`` (gravity + Coriolis, fingers included) and
``M_arm a_ref`` the arm rows of ``M @ a`` (``mj_mulM`` on a vector zero outside the
arm). In the linear region this is a critically damped PD of natural frequency
``omega_rad_s`` (k_vel = 2 omega, k_pos = omega / 2) with no steady-state error in free
space. For large errors (a target that jumps, a hold while moving) the square-root law
brings each joint in at bounded deceleration, so there is no overshoot; accelerations
are bounded by the Panda's datasheet limits so the torques stay inside the motors'
ranges. Torques are finally clipped to the actuators' control ranges.
"""

from __future__ import annotations

import numpy as np

#: Franka Emika Panda joint acceleration limits (datasheet), rad/s^2.
PANDA_ACCELERATION_LIMIT_RAD_S2 = np.array([15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])


def _as_slice(ids: np.ndarray) -> slice | np.ndarray:
    ids = np.asarray(ids, dtype=int)
    if ids.size and np.array_equal(ids, np.arange(ids[0], ids[0] + ids.size)):
        return slice(int(ids[0]), int(ids[0]) + ids.size)
    return ids


class JointTorqueController:
    """Computed-torque joint tracking on the arm dofs of a MuJoCo model.

    Args:
        model: the MuJoCo model.
        arm_dof_ids: dof indices of the arm joints, command order.
        arm_actuator_ids: torque actuators of those joints, same order.
        omega_rad_s: closed-loop natural frequency in the linear region, rad/s.
        velocity_limit_rad_s: per-joint bound on the reference velocity (None: none).
        acceleration_limit_rad_s2: per-joint bound on the commanded acceleration.
        brake_fraction: share of the acceleration bound the square-root law plans
            with (the rest is headroom for the velocity loop).
    """

    def __init__(self, model, arm_dof_ids: np.ndarray, arm_actuator_ids: np.ndarray,
                 omega_rad_s: float = 60.0,
                 velocity_limit_rad_s: np.ndarray | None = None,
                 acceleration_limit_rad_s2: np.ndarray = PANDA_ACCELERATION_LIMIT_RAD_S2,
                 brake_fraction: float = 0.6) -> None:
        self.dofs = np.asarray(arm_dof_ids, dtype=int)
        self.qpos_ids = np.asarray([model.jnt_qposadr[model.dof_jntid[d]] for d in self.dofs], dtype=int)
        self.actuators = np.asarray(arm_actuator_ids, dtype=int)
        self.k_vel = 2.0 * omega_rad_s
        self.k_pos = omega_rad_s / 2.0
        self.a_max = np.asarray(acceleration_limit_rad_s2, dtype=float).copy()
        self.v_max = (np.full(len(self.dofs), np.inf) if velocity_limit_rad_s is None
                      else np.asarray(velocity_limit_rad_s, dtype=float).copy())
        self._two_a_brake = 2.0 * brake_fraction * self.a_max
        self.torque_low = model.actuator_ctrlrange[self.actuators, 0].copy()
        self.torque_high = model.actuator_ctrlrange[self.actuators, 1].copy()
        self._neg_v_max = -self.v_max
        self._neg_a_max = -self.a_max
        # Contiguous index sets become slices (views, no copies) for speed.
        self._qpos_index = _as_slice(self.qpos_ids)
        self._dof_index = _as_slice(self.dofs)
        self._actuator_index = _as_slice(self.actuators)
        import mujoco

        self._mul_m = mujoco.mj_mulM
        self._acc_full = np.zeros(model.nv)
        self._tau_full = np.zeros(model.nv)
        self._e = np.zeros(len(self.dofs))
        self._abs_e = np.zeros(len(self.dofs))
        self._v = np.zeros(len(self.dofs))
        self._w = np.zeros(len(self.dofs))

    def apply(self, model, data, q_des: np.ndarray, qd_des: np.ndarray) -> None:
        """Write the arm torques into ``data.ctrl`` (call between mj_step1 and mj_step2).

        Args:
            q_des: desired arm joint positions, rad.
            qd_des: desired arm joint velocities, rad/s.
        """
        e, abs_e, v, w = self._e, self._abs_e, self._v, self._w
        np.subtract(q_des, data.qpos[self._qpos_index], out=e)
        np.abs(e, out=abs_e)
        np.multiply(abs_e, self.k_pos, out=v)
        np.multiply(abs_e, self._two_a_brake, out=w)
        np.sqrt(w, out=w)
        np.minimum(v, w, out=v)
        np.copysign(v, e, out=v)
        v += qd_des
        np.minimum(v, self.v_max, out=v)
        np.maximum(v, self._neg_v_max, out=v)
        v -= data.qvel[self._dof_index]
        v *= self.k_vel
        np.minimum(v, self.a_max, out=v)
        np.maximum(v, self._neg_a_max, out=v)
        self._acc_full[self._dof_index] = v
        self._mul_m(model, data, self._tau_full, self._acc_full)
        tau = self._tau_full[self._dof_index]
        tau += data.qfrc_bias[self._dof_index]
        np.minimum(tau, self.torque_high, out=tau)
        np.maximum(tau, self.torque_low, out=tau)
        data.ctrl[self._actuator_index] = tau
