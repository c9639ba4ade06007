"""Joint-space tracking of streamed position targets on LIBERO's torque-driven Panda.

LIBERO's robosuite env drives the arm with an operational-space controller at 20 Hz.
The harness streams joint position targets instead, so the driver bypasses robosuite's
controller and writes torques to the arm's motors (``robot0_torq_j1..7``) itself at
every physics substep (computed-torque PD, the same law as the tabletop backend):

    tau = M_arm (kp (q_ref - q) + kd (qd_ref - qd)) + bias_arm

``M_arm (.)`` is the arm rows of ``M @ v`` for ``v`` zero outside the arm
(``mj_mulM``), ``bias`` is MuJoCo's ``qfrc_bias`` (gravity, Coriolis); both are fresh
because the driver calls ``mj_step1`` before computing the torque and ``mj_step2``
after. Each arm joint then behaves as a critically damped second-order system of
natural frequency ``omega``; the torques are clipped to the motors' ranges (80 N·m on
joints 1-5, 12 N·m on 6-7).

Within one control period the reference moves linearly from the previous target to the
new one, with the matching velocity as feed-forward, so a stream of targets is
tracked without steps. At substep ``k`` of ``n`` the state is that of time ``k dt`` into
the period, so it is compared with the reference ``k/n`` of the way along: the arm
reaches each target exactly at the end of its period, without lead or lag on ramps.

The gripper keeps robosuite's two position servos (finger joints, 0..0.04 m each, force
limited to 20 N): a target fraction ``f`` in 0..1 sets each finger's servo to ``f``
times its open position; 0 closes (and squeezes a grasped object).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class JointTracker:
    """Computed-torque PD on the arm and position targets on the fingers.

    Args:
        model: the MuJoCo model.
        arm_qpos_ids / arm_dof_ids / arm_actuator_ids: addresses of the arm joints,
            command order.
        finger_actuator_ids: the two finger position actuators.
        finger_open_ctrl: each finger actuator's control value when fully open, m.
        omega_rad_s: closed-loop natural frequency, rad/s.
        damping_ratio: closed-loop damping ratio.
    """

    def __init__(self, model: Any, arm_qpos_ids: np.ndarray, arm_dof_ids: np.ndarray,
                 arm_actuator_ids: np.ndarray, finger_actuator_ids: np.ndarray,
                 finger_open_ctrl: np.ndarray, omega_rad_s: float = 60.0,
                 damping_ratio: float = 1.0) -> None:
        self.qpos_ids = np.asarray(arm_qpos_ids, dtype=int)
        self.dof_ids = np.asarray(arm_dof_ids, dtype=int)
        self.actuator_ids = np.asarray(arm_actuator_ids, dtype=int)
        self.finger_actuator_ids = np.asarray(finger_actuator_ids, dtype=int)
        self.finger_open_ctrl = np.asarray(finger_open_ctrl, dtype=float)
        self.kp = float(omega_rad_s) ** 2
        self.kd = 2.0 * float(damping_ratio) * float(omega_rad_s)
        self.torque_low = model.actuator_ctrlrange[self.actuator_ids, 0].copy()
        self.torque_high = model.actuator_ctrlrange[self.actuator_ids, 1].copy()
        self._v = np.zeros(model.nv)
        self._mv = np.zeros(model.nv)

    def apply(self, model: Any, data: Any, q_ref: np.ndarray, qd_ref: np.ndarray,
              gripper_fraction: float) -> np.ndarray:
        """Write arm torques and finger targets into ``data.ctrl`` (between ``mj_step1``
        and ``mj_step2``); returns the arm torques sent, N·m.

        Args:
            q_ref: arm reference positions, rad.
            qd_ref: arm reference velocities, rad/s.
            gripper_fraction: jaw target, 0 closed .. 1 open.
        """
        import mujoco

        acc = self.kp * (q_ref - data.qpos[self.qpos_ids]) + self.kd * (qd_ref - data.qvel[self.dof_ids])
        self._v[self.dof_ids] = acc
        mujoco.mj_mulM(model, data, self._mv, self._v)
        tau = np.clip(self._mv[self.dof_ids] + data.qfrc_bias[self.dof_ids],
                      self.torque_low, self.torque_high)
        data.ctrl[self.actuator_ids] = tau
        data.ctrl[self.finger_actuator_ids] = self.finger_open_ctrl * float(gripper_fraction)
        return tau


def clip_joint_command(target_rad: np.ndarray, previous_rad: np.ndarray, lower_rad: np.ndarray,
                       upper_rad: np.ndarray, max_step_rad: np.ndarray) -> np.ndarray:
    """A joint target clipped to the position limits and to at most ``max_step_rad``
    away from the previous target (the per-period rate limit), rad."""
    step = np.clip(np.asarray(target_rad, dtype=float) - previous_rad, -max_step_rad, max_step_rad)
    return np.clip(previous_rad + step, lower_rad, upper_rad)
