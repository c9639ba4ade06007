"""``release``: open the jaws, then back the TCP away along its own -z axis (out of the
grasp)."""

from __future__ import annotations

from typing import Any

import numpy as np

from captain_harness.core import arguments
from captain_harness.core.boundary import primitive
from captain_harness.core.geometry import matrix_to_quat
from captain_harness.core.kinematics import Kinematics
from captain_harness.core.motion.move_to import MoveToCall
from captain_harness.core.motion.request import MoveRequest
from captain_harness.core.motion_config import MotionConfig
from captain_harness.core.results import CallOutcome, format_receipt


def parse_release(cfg: MotionConfig, retreat_m: Any, speed: Any) -> tuple[float, float]:
    """(retreat m, speed m/s) of a ``release`` (None: the defaults), within the limits."""
    r = arguments.as_optional_float(
        "retreat_m", retreat_m, default=cfg.release_retreat_m, minimum=0.0, maximum=0.3, unit="m"
    )
    v = arguments.as_optional_float(
        "speed",
        speed,
        default=cfg.release_speed_m_s,
        minimum=0.0,
        maximum=cfg.max_linear_speed_m_s,
        unit="m/s",
        exclusive_minimum=True,
    )
    return r, v


def retreat_request(kin: Kinematics, q_now: np.ndarray, retreat_m: float, speed: float) -> MoveRequest:
    """The guarded sweep ``retreat_m`` back along the TCP's -z axis from ``q_now``, at the
    same orientation, at ``speed`` m/s."""
    T = kin.fk(q_now)
    goal = T[:3, 3] - retreat_m * T[:3, 2]
    return MoveRequest(goal, matrix_to_quat(T[:3, :3]), speed, None, None, "guarded", None)


class ReleaseCall(MoveToCall):
    """The ``release`` primitive (its first step is ``move_to``'s jaw command)."""


    @primitive(physical=True, group="motion")
    def release(self, retreat_m: float | None = None, speed: float | None = None) -> CallOutcome:
        """Open the jaws, then back the TCP away along its own -z axis (out of the grasp,
        straight up for a top-down grasp) by ``retreat_m`` (default 0.05 m, 0 to only
        open) at ``speed`` (default 0.03 m/s), guarded. Value: jaw opening before/after,
        ``stopped_reason`` and ``executed_distance_m`` of the retreat."""
        retreat, speed_m_s = parse_release(self.config, retreat_m, speed)
        opened = self._gripper("release", "open")
        if not opened.result["success"]:
            return opened
        gv = opened.result["value"]
        fields: list[tuple[str, Any]] = [
            ("gripper_open_fraction", (gv["gripper_open_fraction_before"], gv["gripper_open_fraction_after"]))
        ]
        if retreat <= 0.0:
            return opened
        with self._action("release"):
            state = self._read_state()
            req = retreat_request(self.kin, np.asarray(state.joint_positions_rad, float), retreat, speed_m_s)
            plan = self._plan(self.kin, self.collision, req, state.joint_positions_rad)
            if not plan.ok:
                out = self._plan_failure("release", plan, extra=dict(gv))
                out.result["executed"] = True
                out.result["message"] = "the jaws opened, but the retreat " + out.result["message"].split(": ", 1)[-1]
                return out
            report, value = self._sweep("release", plan, "guarded", state)
            value.update(
                {
                    k: gv[k]
                    for k in (
                        "gripper_open_fraction_before",
                        "gripper_open_fraction_after",
                        "gripper_opening_m_before",
                        "gripper_opening_m_after",
                    )
                }
            )
            outcome = self._motion_outcome("release", report, value, f"jaws opened and backed away {retreat:g} m")
            if outcome.result["success"]:
                fields += [
                    ("executed_distance_m", value["executed_distance_m"]),
                    ("max_observed_force_n", value["max_observed_force_n"]),
                ]
                outcome = CallOutcome(outcome.result, format_receipt("release", outcome.result, fields))
            return outcome

