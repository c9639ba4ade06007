"""Safety logic of the XR1 driver, free of ROS: command limiting and fault conditions.

* ``CommandLimiter``: a joint position command is clipped to the joint limits, then
  its change relative to the command of the previous control period is limited per
  joint to ``min(max_step_rad, velocity_scale * velocity_limit * period)``. Several
  commands within one period are all limited relative to the same reference, so the
  commanded velocity never exceeds the limit however often ``send_command`` is called.
* ``stale_state_fault``: the arm's joint state is stale when any arm joint has not
  been updated for longer than the timeout (wall clock, time of receipt).
* ``emergency_wrench_fault``: the measured force or torque norm exceeds its limit.

Fault messages say what happened, the measured value and the limit, and that
commanding has stopped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class CommandLimiter:
    """Joint-limit clipping plus per-period step (rate) limiting.

    Args:
        lower_rad / upper_rad: joint position limits, rad.
        velocity_limit_rad_s: joint velocity limits, rad/s.
        period_s: control period, s.
        max_step_rad: absolute cap on the per-period change of any joint, rad.
        velocity_scale: fraction of the velocity limits a command may use.
    """

    def __init__(self, lower_rad: Sequence[float], upper_rad: Sequence[float],
                 velocity_limit_rad_s: Sequence[float], period_s: float, max_step_rad: float,
                 velocity_scale: float = 1.0) -> None:
        self.lower_rad = np.asarray(lower_rad, dtype=float)
        self.upper_rad = np.asarray(upper_rad, dtype=float)
        self.max_step_rad = np.minimum(
            float(max_step_rad), float(velocity_scale) * np.asarray(velocity_limit_rad_s, dtype=float) * period_s)
        self._reference: np.ndarray | None = None
        self._last: np.ndarray | None = None

    @property
    def reference_rad(self) -> np.ndarray | None:
        """The command of the previous period that steps are measured from."""
        return None if self._reference is None else self._reference.copy()

    @property
    def last_rad(self) -> np.ndarray | None:
        """The latest limited command."""
        return None if self._last is None else self._last.copy()

    def reset(self, q_rad: np.ndarray) -> None:
        """Start limiting from ``q_rad`` (the measured positions at activation or a hold)."""
        self._reference = np.asarray(q_rad, dtype=float).copy()
        self._last = self._reference.copy()

    def limit(self, target_rad: np.ndarray) -> np.ndarray:
        """The command actually allowed for ``target_rad`` in the current period.

        A reference outside the joint limits (measured state just past a limit) is
        walked back inside at the step rate rather than jumped.
        """
        if self._reference is None:
            raise RuntimeError("CommandLimiter.limit() before reset()")
        target = np.clip(np.asarray(target_rad, dtype=float), self.lower_rad, self.upper_rad)
        step = np.clip(target - self._reference, -self.max_step_rad, self.max_step_rad)
        self._last = self._reference + step
        return self._last.copy()

    def hold(self, q_rad: np.ndarray) -> np.ndarray:
        """Make ``q_rad`` (the measured positions) the command and the new reference."""
        self.reset(q_rad)
        return self._reference.copy()

    def next_period(self) -> None:
        """The period ended: the latest command becomes the reference of the next one."""
        if self._last is not None:
            self._reference = self._last.copy()


def stale_state_fault(joint_names: Sequence[str], update_times_s: Sequence[float | None], now_s: float,
                      timeout_s: float) -> str:
    """A fault message when any joint's latest update is older than ``timeout_s``, else ``""``.

    Args:
        joint_names: the arm joints.
        update_times_s: receipt time of each joint's latest value (None: never received).
        now_s: the current time on the same clock.
        timeout_s: the staleness limit.
    """
    worst_name, worst_age = "", -1.0
    for name, t in zip(joint_names, update_times_s, strict=True):
        age = np.inf if t is None else now_s - t
        if age > worst_age:
            worst_name, worst_age = name, age
    if worst_age <= timeout_s:
        return ""
    if not np.isfinite(worst_age):
        return f"stale joint state: no value of {worst_name} received; commanding stopped"
    return (f"stale joint state: {worst_name} not updated for {worst_age * 1000:.0f} ms "
            f"(limit {timeout_s * 1000:.0f} ms); commanding stopped")


def stale_wrench_fault(update_time_s: float | None, now_s: float, timeout_s: float) -> str:
    """A fault message when the F/T reading is older than ``timeout_s``, else ``""``."""
    if update_time_s is None:
        return "stale wrench: no force/torque reading received; commanding stopped"
    age = now_s - update_time_s
    if age <= timeout_s:
        return ""
    return (f"stale wrench: no force/torque reading for {age * 1000:.0f} ms "
            f"(limit {timeout_s * 1000:.0f} ms); commanding stopped")


def emergency_wrench_fault(force_n: np.ndarray, torque_nm: np.ndarray, max_force_n: float,
                           max_torque_nm: float) -> str:
    """A fault message when the force or torque norm exceeds its emergency limit, else ``""``."""
    f = float(np.linalg.norm(force_n))
    if f > max_force_n:
        return f"emergency force: {f:.1f} N exceeds {max_force_n:.1f} N; commanding stopped"
    t = float(np.linalg.norm(torque_nm))
    if t > max_torque_nm:
        return f"emergency torque: {t:.1f} N·m exceeds {max_torque_nm:.1f} N·m; commanding stopped"
    return ""
