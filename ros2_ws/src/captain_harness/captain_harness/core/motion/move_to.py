"""``move_to``: a straight Cartesian sweep of the TCP to a pose, or one jaw command
(``move_to(gripper="open"|"close")``, also the first step of ``release``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from captain_backends.core.driver import ForceGuard
from captain_harness.core.boundary import primitive
from captain_harness.core.executor import TARGET_REACHED
from captain_harness.core.motion.base import STOP_CATEGORY, receipt
from captain_harness.core.motion.execution import SweepExecution
from captain_harness.core.motion.request import parse_move
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt, ok


class MoveToCall(SweepExecution):
    """The ``move_to`` primitive and the jaw command it shares with ``release``."""

    @primitive(physical=True, group="motion")
    def move_to(
        self,
        position: Sequence[float] | None = None,
        quaternion: Sequence[float] | None = None,
        speed: float | None = None,
        duration: float | None = None,
        angular: float | None = None,
        mode: str = "guarded",
        gripper: str | None = None,
    ) -> CallOutcome:
        """Move the TCP on a straight line to a pose, or open/close the jaws.

        ``move_to(position, quaternion, speed=..., duration=..., angular=..., mode=...)``:
        a straight Cartesian sweep of the tool centre point (midway between the
        fingertips) to ``position`` [x, y, z] (m, robot base frame, z up) with the TCP
        orientation ``quaternion`` [w, x, y, z] (TCP z axis along the fingers, x the
        jaw-closing axis; ``[0, 2**-0.5, 2**-0.5, 0]`` points the gripper straight down
        with the jaws closing along the base y axis). The position moves on the line and
        the orientation turns on the shortest arc, both at a constant pace:
        ``speed`` m/s (default 0.05) and ``angular`` rad/s (default 0.5), whichever is
        slower governs. ``duration`` (s) alone sets the sweep's length; together with
        speed/angular it is the most the sweep may take. Omitting ``quaternion`` keeps
        the current orientation; omitting ``position`` turns in place.

        The whole path is solved by IK and checked for joint limits, self-collision and
        the workspace box before anything moves. ``mode="guarded"`` (default) stops at
        first contact (contact force above its starting value + 12 N);
        ``mode="manipulation"`` tolerates load (pushing, carrying, pressing) up to the
        emergency limit (80 N). The force peak at first contact grows with the approach
        speed (about 1 N per mm/s onto the simulated table), so descend onto surfaces at
        0.04 m/s or slower: faster guarded descents can stop on the emergency limit
        instead (``FAILED controller_rejected; emergency_limit``).

        ``move_to(gripper="open"|"close")``: one jaw command; reports the opening before
        and after and whether something is held.

        Value: ``stopped_reason`` (target_reached, contact, emergency_limit, ik_failed,
        self_collision, joint_limit, workspace_limit, timeout, cancelled),
        ``executed_distance_m``, ``max_observed_force_n``, ``end_effector_position_m``,
        ``end_effector_quaternion_wxyz``, ``position_error_m``, ``held``, ...
        """
        req = parse_move(self.config, position, quaternion, speed, duration, angular, mode, gripper)
        if req.gripper is not None:
            return self._gripper("move_to", req.gripper)
        with self._action("move_to"):
            state = self._read_state()
            plan = self._plan(self.kin, self.collision, req, state.joint_positions_rad)
            if not plan.ok:
                return self._plan_failure("move_to", plan)
            report, value = self._sweep("move_to", plan, req.mode, state)
            return self._motion_outcome("move_to", report, value, plan.message)

    def _gripper(self, name: str, command: str) -> CallOutcome:
        cfg = self.config
        with self._action(name):
            before = self._read_state()
            fraction = 1.0 if command == "open" else 0.0
            held_before = self.held(before)
            guard = ForceGuard(cfg.emergency_force_n, ignore_finger_contacts=True)
            q_hold = self._hold_target(before)
            report = self.executor.run_gripper(
                fraction,
                q_hold,
                guard=guard,
                timeout_s=cfg.gripper_timeout_s,
                settle_m=cfg.gripper_settle_m,
                cancel=self._cancel_check(),
            )
            self._gripper_command = command
            after = report.final_state
            self._record("gripper", "", before, report, sweep=False, goal_T=None, guard=guard)
            if report.stopped_reason != TARGET_REACHED:
                self._arm_target = np.array(after.joint_positions_rad, dtype=float)
            held = self.held(after)
            value = {
                "command": command,
                "stopped_reason": report.stopped_reason,
                "gripper_open_fraction_before": before.gripper_open_fraction,
                "gripper_open_fraction_after": after.gripper_open_fraction,
                "gripper_open_fraction": after.gripper_open_fraction,
                "gripper_opening_m_before": before.gripper_opening_m,
                "gripper_opening_m_after": after.gripper_opening_m,
                "held": held,
                "held_before": held_before,
                "finger_forces_n": after.finger_forces_n,
                "max_observed_force_n": report.peak_force_n,
                "duration_s": report.duration_s,
            }
            fields: list[tuple[str, Any]] = [
                ("gripper_open_fraction", (before.gripper_open_fraction, after.gripper_open_fraction))
            ]
            if command == "close":
                fields.append(("held", held))
            if report.stopped_reason != TARGET_REACHED:
                result = fail(
                    STOP_CATEGORY.get(report.stopped_reason, FailureCategory.INTERNAL_ERROR),
                    f"jaw command {command!r} stopped: {report.message or report.stopped_reason}",
                    executed=True,
                    value=value,
                )
                return CallOutcome(result, receipt(name, result, fields, report.stopped_reason))
            what = ("closed on something (held)" if held else "closed on nothing") if command == "close" else "opened"
            message = (
                f"jaws {what}: opening {before.gripper_opening_m * 1000:.1f} -> {after.gripper_opening_m * 1000:.1f} mm"
            )
            if report.message:
                message += f" ({report.message})"
            result = ok(value, executed=True, message=message)
            return CallOutcome(result, format_receipt(name, result, fields))

