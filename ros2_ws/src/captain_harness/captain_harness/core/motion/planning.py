"""The read-only planning calls: ``check_motion`` (would a ``move_to`` pass every check?)
and ``preview_motion`` (what would a ``move_to``, ``recover``, ``release`` or ``hold``
do?). They plan on the planning models under ``planning_lock``; nothing moves."""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from captain_harness.core import arguments
from captain_harness.core.boundary import primitive
from captain_harness.core.errors import ArgumentError
from captain_harness.core.executor import TARGET_REACHED
from captain_harness.core.geometry import matrix_to_quat
from captain_harness.core.motion.base import STOP_CATEGORY, receipt
from captain_harness.core.motion.execution import SweepExecution
from captain_harness.core.motion.hold import parse_hold_duration
from captain_harness.core.motion.recover import parse_recover, plan_recover
from captain_harness.core.motion.release import parse_release, retreat_request
from captain_harness.core.motion.request import parse_move
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok
from captain_harness.core.sweep import PathPlan

PREVIEW_KINDS = ("move_to", "recover", "release", "hold")


class PlanningCalls(SweepExecution):
    """``check_motion`` and ``preview_motion`` (``preview_motion`` binds its ``args`` to the
    motion calls of the combined ``MotionPrimitives``)."""

    @primitive(physical=False, group="planning")
    def check_motion(
        self,
        position: Sequence[float] | None = None,
        quaternion: Sequence[float] | None = None,
        speed: float | None = None,
        duration: float | None = None,
        angular: float | None = None,
        mode: str = "guarded",
    ) -> CallOutcome:
        """Check, without moving, a ``move_to(position, quaternion, ...)`` from the current
        pose: whether the target is reachable at all (IK with restarts), whether the
        straight path passes every check (IK, joint limits, self-collision, workspace)
        and how long it takes. Value: ``reachable``, ``path_ok``, ``stopped_reason``
        (predicted), ``path_fraction`` of a failure, ``duration_s``, ``path_length_m``,
        ``rotation_deg``, ``goal_joint_positions_rad``, ``min_joint_limit_margin_rad``."""
        req = parse_move(self.config, position, quaternion, speed, duration, angular, mode, None, call="check_motion")
        state = self._planning_state()
        with self.planning_lock:
            kin, col = self.planning_kin, self.planning_collision
            plan = self._plan(kin, col, req, state.joint_positions_rad)
            reach = kin.solve_ik(
                plan.goal_T,
                np.asarray(state.joint_positions_rad, float),
                max_iterations=self.config.ik_max_iterations,
                restarts=self.config.ik_restarts,
                rng=np.random.default_rng(self.config.ik_seed),
                is_valid=lambda q: not col.in_collision(q),
            )
            margins = None
            if len(plan.q_waypoints):
                qw = plan.q_waypoints
                margins = float(np.min(np.minimum(qw - kin.lower_rad, kin.upper_rad - qw)))
        value = {
            "reachable": reach.success,
            "path_ok": plan.ok,
            "stopped_reason": plan.stop_reason,
            "path_fraction": plan.fail_fraction,
            "duration_s": plan.duration_s,
            "path_length_m": plan.path_length_m,
            "rotation_deg": math.degrees(plan.rotation_rad),
            "target_position_m": plan.goal_T[:3, 3],
            "target_quaternion_wxyz": matrix_to_quat(plan.goal_T[:3, :3]),
            "goal_joint_positions_rad": plan.goal_q if plan.ok else (reach.q if reach.success else None),
            "min_joint_limit_margin_rad": margins,
            "slowed_for_joint_velocity": plan.slowed_for_joint_velocity,
            "colliding_links": [list(p) for p in plan.colliding_links],
            "limited_joint": plan.limited_joint,
            "mode": req.mode,
        }
        fields = [
            ("reachable", reach.success),
            ("path_ok", plan.ok),
            ("duration_s", plan.duration_s),
            ("path_length_m", plan.path_length_m),
        ]
        if plan.ok:
            result = ok(value, message=plan.message)
            return CallOutcome(result, format_receipt("check_motion", result, fields))
        result = fail(STOP_CATEGORY.get(plan.stop_reason, FailureCategory.INTERNAL_ERROR), plan.message, value=value)
        return CallOutcome(result, receipt("check_motion", result, fields, plan.stop_reason))

    @primitive(physical=False, group="planning")
    def preview_motion(self, kind: str, args: dict[str, Any] | None = None) -> CallOutcome:
        """Predict, without moving, what a motion call would do: ``kind`` is "move_to",
        "recover", "release" or "hold" and ``args`` the keyword arguments that call would
        get, e.g. ``preview_motion("recover", {"max_distance_m": 0.02})`` or
        ``preview_motion("move_to", {"position": p, "quaternion": q, "speed": 0.03})``.
        ``success`` says whether the call would run to its end in free space;
        otherwise ``failure_category`` and the message say why not. Contacts with
        objects are not predicted. Value: ``stopped_reason``, ``predicted_position_m``,
        ``predicted_quaternion_wxyz``, ``duration_s``, ``distance_m``, ``rotation_deg``."""
        kind = arguments.as_choice("kind", kind, PREVIEW_KINDS)
        kwargs = arguments.as_mapping("args", args)
        target = {
            "move_to": self.move_to,
            "recover": self.recover,
            "release": self.release,
            "hold": self.hold,
        }[kind]
        try:
            inspect.signature(target).bind(**kwargs)
        except TypeError as exc:
            params = ", ".join(inspect.signature(target).parameters)
            raise ArgumentError(f"args do not fit {kind}({params}): {exc}") from None
        state = self._planning_state()
        q_now = np.asarray(state.joint_positions_rad, dtype=float)
        with self.planning_lock:
            kin = self.planning_kin
            T_now = kin.fk(q_now)
            value: dict[str, Any] = {"kind": kind}
            plan: PathPlan | None = None
            if kind == "move_to":
                req = parse_move(
                    self.config,
                    kwargs.get("position"),
                    kwargs.get("quaternion"),
                    kwargs.get("speed"),
                    kwargs.get("duration"),
                    kwargs.get("angular"),
                    kwargs.get("mode", "guarded"),
                    kwargs.get("gripper"),
                )
                if req.gripper is not None:
                    value.update(
                        {
                            "stopped_reason": TARGET_REACHED,
                            "gripper": req.gripper,
                            "gripper_open_fraction_before": state.gripper_open_fraction,
                            "predicted_gripper_open_fraction": 1.0 if req.gripper == "open" else None,
                            "predicted_position_m": T_now[:3, 3],
                            "duration_s": None,
                            "note": "closing stops on whatever is between the jaws",
                        }
                    )
                else:
                    plan = self._plan(kin, self.planning_collision, req, q_now)
                    value["mode"] = req.mode
            elif kind == "recover":
                dist, dur = parse_recover(self.config, kwargs.get("max_distance_m"), kwargs.get("max_duration_s"))
                plan = plan_recover(kin, self.config, self.history.recover_path(), dist, dur, q_now)
            elif kind == "release":
                retreat, speed_m_s = parse_release(self.config, kwargs.get("retreat_m"), kwargs.get("speed"))
                value["predicted_gripper_open_fraction"] = 1.0
                if retreat > 0.0:
                    req = retreat_request(kin, q_now, retreat, speed_m_s)
                    plan = self._plan(kin, self.planning_collision, req, q_now)
                else:
                    value.update({"stopped_reason": TARGET_REACHED, "predicted_position_m": T_now[:3, 3]})
            else:
                d = parse_hold_duration(self.config, kwargs.get("duration_s"))
                value.update(
                    {
                        "stopped_reason": TARGET_REACHED,
                        "duration_s": d,
                        "predicted_position_m": T_now[:3, 3],
                        "predicted_quaternion_wxyz": matrix_to_quat(T_now[:3, :3]),
                    }
                )
        if plan is None:
            result = ok(value, message=f"{kind} would run")
            return CallOutcome(result, format_receipt("preview_motion", result, [("kind", kind)]))
        value.update(
            {
                "stopped_reason": plan.stop_reason,
                "predicted_position_m": plan.goal_T[:3, 3] if plan.ok else None,
                "predicted_quaternion_wxyz": matrix_to_quat(plan.goal_T[:3, :3]) if plan.ok else None,
                "duration_s": plan.duration_s,
                "distance_m": plan.path_length_m,
                "rotation_deg": math.degrees(plan.rotation_rad),
                "path_fraction": plan.fail_fraction,
                "start_position_m": plan.start_T[:3, 3],
            }
        )
        fields = [
            ("kind", kind),
            ("stopped_reason", plan.stop_reason),
            ("distance_m", plan.path_length_m),
            ("duration_s", plan.duration_s),
        ]
        if plan.ok:
            result = ok(value, message=f"{kind} would run: {plan.message}")
            return CallOutcome(result, format_receipt("preview_motion", result, fields))
        result = fail(
            STOP_CATEGORY.get(plan.stop_reason, FailureCategory.INTERNAL_ERROR),
            f"{kind} would not run: {plan.message}",
            value=value,
        )
        return CallOutcome(result, receipt("preview_motion", result, fields[2:], plan.stop_reason))
