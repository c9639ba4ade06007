"""``recover``: back off along the last executed sweep (its measured joint path, in
reverse)."""

from __future__ import annotations

from typing import Any

import numpy as np

from captain_backends.core.driver import ForceGuard
from captain_harness.core import arguments
from captain_harness.core.boundary import primitive
from captain_harness.core.kinematics import Kinematics
from captain_harness.core.motion.execution import SweepExecution
from captain_harness.core.motion_config import MotionConfig
from captain_harness.core.results import CallOutcome
from captain_harness.core.sweep import PathPlan, plan_reverse


def parse_recover(cfg: MotionConfig, max_distance_m: Any, max_duration_s: Any) -> tuple[float, float]:
    """(distance m, duration s) of a ``recover`` (None: the defaults), within the limits."""
    dist = arguments.as_optional_float(
        "max_distance_m",
        max_distance_m,
        default=cfg.recover_default_distance_m,
        minimum=0.0,
        maximum=cfg.recover_max_distance_m,
        unit="m",
        exclusive_minimum=True,
    )
    dur = arguments.as_optional_float(
        "max_duration_s",
        max_duration_s,
        default=cfg.recover_default_duration_s,
        minimum=0.0,
        maximum=cfg.max_sweep_duration_s,
        unit="s",
        exclusive_minimum=True,
    )
    return dist, dur


def _nothing_to_recover(message: str, q_now: np.ndarray, T_now: np.ndarray) -> PathPlan:
    """A refused plan that stays at ``q_now`` (TCP pose ``T_now``)."""
    return PathPlan(False, "nothing_to_recover", message, np.array([0.0]), q_now[None], 0.0, 0.0, T_now, T_now)


def plan_recover(
    kin: Kinematics, cfg: MotionConfig, path: np.ndarray | None, dist: float, dur: float, q_now: np.ndarray
) -> PathPlan:
    """The plan of a ``recover`` from ``q_now`` back along ``path`` (the joint path still
    to retrace, rad; None when there is none) by at most ``dist`` m and ``dur`` s."""
    if path is None:
        return _nothing_to_recover(
            "no sweep has been executed yet, so there is no path to retrace; use move_to to back away",
            q_now,
            kin.fk(q_now),
        )
    here = kin.fk(q_now)[:3, 3]
    end = kin.fk(path[-1])[:3, 3]
    gap = float(np.linalg.norm(here - end))
    if gap > 0.02:
        return _nothing_to_recover(
            f"the arm is {gap:.3g} m from where the last sweep ended (it moved since); recover "
            "only retraces the last sweep; use move_to instead",
            q_now,
            kin.fk(q_now),
        )
    plan = plan_reverse(
        kin,
        cfg,
        path,
        q_now,
        max_distance_m=dist,
        max_duration_s=dur,
        speed_m_s=cfg.recover_speed_m_s,
    )
    if not plan.ok:
        plan.message = f"{plan.message}; use move_to to move elsewhere"
    return plan


class RecoverCall(SweepExecution):
    """The ``recover`` primitive."""


    @primitive(physical=True, group="motion")
    def recover(self, max_distance_m: float | None = None, max_duration_s: float | None = None) -> CallOutcome:
        """Back off along the last executed sweep (its measured joint path, in reverse) by
        at most ``max_distance_m`` of TCP travel (default 0.05 m) and at most
        ``max_duration_s`` (default 10 s), at 0.03 m/s, tolerating load up to the
        emergency limit. Repeated calls continue further back. Value:
        ``stopped_reason``, ``executed_distance_m``, ``remaining_path_m`` (what a further
        recover could still retrace), ``end_effector_position_m``."""
        dist, dur = parse_recover(self.config, max_distance_m, max_duration_s)
        with self._action("recover"):
            state = self._read_state()
            q_now = np.asarray(state.joint_positions_rad, dtype=float)
            plan = plan_recover(self.kin, self.config, self.history.recover_path(), dist, dur, q_now)
            if not plan.ok:
                return self._plan_failure("recover", plan)
            path = self.history.recover_path()
            guard = (ForceGuard(self.config.emergency_force_n, ignore_finger_contacts=self.held(state)), None)
            report, value = self._sweep(
                "recover", plan, "manipulation", state, guarded_mode=False, guard_override=guard
            )
            remaining = self._consume_recover_path(path, report.final_state.joint_positions_rad)
            value["remaining_path_m"] = remaining
            return self._motion_outcome("recover", report, value, plan.message)

    def _consume_recover_path(self, path: np.ndarray | None, q_end: np.ndarray) -> float:
        """Shorten the recover path to the part before ``q_end``; returns its TCP length."""
        if path is None or len(path) < 2:
            self.history.set_recover_path(None)
            return 0.0
        tcp = self.kin.tcp_positions(path)
        here = self.kin.fk(q_end)[:3, 3]
        k = int(np.argmin(np.linalg.norm(tcp - here, axis=1)))
        remaining = np.vstack((path[:k], np.asarray(q_end, float)[None])) if k > 0 else None
        self.history.set_recover_path(remaining)
        if remaining is None:
            return 0.0
        seg = np.linalg.norm(np.diff(np.vstack((tcp[:k], here[None])), axis=0), axis=1)
        return float(seg.sum())

