"""``hold``: keep the current pose for a while under position control."""

from __future__ import annotations

from typing import Any

import numpy as np

from captain_backends.core.driver import ForceGuard
from captain_harness.core import arguments
from captain_harness.core.boundary import primitive
from captain_harness.core.executor import TARGET_REACHED
from captain_harness.core.motion.base import STOP_CATEGORY, receipt
from captain_harness.core.motion.execution import SweepExecution
from captain_harness.core.motion_config import MotionConfig
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok


def parse_hold_duration(cfg: MotionConfig, duration_s: Any) -> float:
    """``hold``'s ``duration_s`` (s; None: the default), within ``[0, hold_max_duration_s]``."""
    return arguments.as_optional_float(
        "duration_s", duration_s, default=cfg.hold_default_duration_s, minimum=0.0, maximum=cfg.hold_max_duration_s,
        unit="s",
    )


class HoldCall(SweepExecution):
    """The ``hold`` primitive."""

    @primitive(physical=True, group="motion")
    def hold(self, duration_s: float | None = None) -> CallOutcome:
        """Keep the current pose for ``duration_s`` seconds (default 1.0, at most 30):
        position control holds, nothing moves unless pushed; stops on the emergency force
        limit. Value: ``duration_s``, ``drift_m`` (TCP movement), ``max_observed_force_n``,
        ``end_effector_position_m``."""
        cfg = self.config
        d = parse_hold_duration(cfg, duration_s)
        with self._action("hold"):
            start = self._read_state()
            guard = ForceGuard(cfg.emergency_force_n, ignore_finger_contacts=self.held(start))
            q_hold = self._hold_target(start)
            report = self.executor.run_hold(d, q_hold, guard=guard, cancel=self._cancelled,
                                            feedback=self._feedback, state_every=self._state_every())
            self._record("hold", "", start, report, sweep=False, goal_T=None, guard=guard)
            end = report.final_state
            p0 = self.kin.fk(start.joint_positions_rad)[:3, 3]
            p1 = self.kin.fk(end.joint_positions_rad)[:3, 3]
            value = {
                "stopped_reason": report.stopped_reason,
                "duration_s": report.duration_s,
                "drift_m": float(np.linalg.norm(p1 - p0)),
                "max_observed_force_n": report.peak_force_n,
                "end_effector_position_m": p1,
                "held": self.held(end),
            }
            if report.stopped_reason != TARGET_REACHED:
                self._arm_target = np.array(end.joint_positions_rad, dtype=float)
                result = fail(
                    STOP_CATEGORY.get(report.stopped_reason, FailureCategory.INTERNAL_ERROR),
                    f"hold stopped: {report.message or report.stopped_reason}",
                    executed=True,
                    value=value,
                )
                fields = [("max_observed_force_n", report.peak_force_n)]
                return CallOutcome(result, receipt("hold", result, fields, report.stopped_reason))
            result = ok(value, executed=True, message=f"held for {report.duration_s:.3g} s")
            return CallOutcome(result, format_receipt("hold", result))

