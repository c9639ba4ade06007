"""Conversions between the captain_interfaces messages and the harness's plain values.

* ``result_msg`` / ``outcome_from_msg``: a call's result dict and receipt <->
  ``RobotCallResult`` (typed copies of the fixed keys; ``result_json`` carries the whole
  dict and is authoritative, so the policy API's result travels intact).
* ``*_goal_kwargs``: the keyword arguments of ``move_to``, ``hold``, ``recover`` and
  ``release`` from an action goal (``args_json``, when set, wins: it carries the policy's
  own call), and ``goal_problem`` for the cheap checks of the goal callback.
* ``call_args``: ``{"args": [...], "kwargs": {...}}`` of ``RobotCall.args_json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from geometry_msgs.msg import Pose

from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt
from captain_interfaces.msg import RobotCallResult

#: Action name per physical primitive.
MOTION_ACTIONS = ("move_to", "hold", "recover", "release")
#: ``args_json`` of the connection probe a client sends each action (``wait_for_harness``):
#: the harness rejects it in the goal callback and never runs it, so the probe leaves no goal.
PROBE_ARGS_JSON = "[]"


def result_msg(outcome: CallOutcome) -> RobotCallResult:
    """The ``RobotCallResult`` of a call."""
    r = outcome.result
    return RobotCallResult(
        success=bool(r.get("success")),
        executed=bool(r.get("executed")),
        failure_category=str(r.get("failure_category") or ""),
        message=str(r.get("message") or ""),
        receipt=outcome.receipt,
        result_json=json.dumps(r, allow_nan=False, default=str),
    )


def outcome_from_msg(name: str, msg: RobotCallResult) -> CallOutcome:
    """The result dict and receipt carried by a ``RobotCallResult`` (never raises)."""
    try:
        result = json.loads(msg.result_json)
        if not isinstance(result, dict):
            raise ValueError("result_json is not an object")
    except ValueError as exc:
        result = fail(FailureCategory.INTERNAL_ERROR, f"{name}: the harness sent an unreadable result ({exc})")
        return CallOutcome(result, format_receipt(name, result))
    return CallOutcome(result, msg.receipt or format_receipt(name, result))


def pose_msg(position_m: Sequence[float], quaternion_wxyz: Sequence[float]) -> Pose:
    """A geometry_msgs/Pose from a position (m) and a ``[w, x, y, z]`` quaternion."""
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in position_m)
    w, x, y, z = (float(v) for v in quaternion_wxyz)
    pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z = w, x, y, z
    return pose


def _finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(float(v)) for v in values)


def parse_args_json(text: str) -> dict[str, Any]:
    """The keyword arguments in an ``args_json`` field (``{}`` when empty).

    Raises:
        ValueError: not a JSON object.
    """
    if not text.strip():
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("args_json must be a JSON object of keyword arguments")
    return data


def call_args(text: str) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` of a ``RobotCall.args_json`` (``{"args": [...], "kwargs": {...}}``;
    a plain object is taken as the keyword arguments).

    Raises:
        ValueError: not of that shape.
    """
    data = parse_args_json(text)
    if set(data) <= {"args", "kwargs"} and data:
        args, kwargs = data.get("args", []), data.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError('args_json must look like {"args": [...], "kwargs": {...}}')
        return args, kwargs
    return [], data


def goal_problem(name: str, goal: Any) -> str:
    """Why a goal is malformed (checked in the goal callback), or ``""``. Argument values
    themselves (reachability, ranges) are judged by the primitive, which answers with a
    result dict."""
    try:
        if hasattr(goal, "args_json") and goal.args_json.strip():
            parse_args_json(goal.args_json)
            return ""
    except ValueError as exc:
        return f"{name}: {exc}"
    if name == "move_to":
        if len(goal.position_m) not in (0, 3):
            return "move_to: position_m must hold 3 values [x, y, z] (m) or none"
        if len(goal.quaternion_wxyz) not in (0, 4):
            return "move_to: quaternion_wxyz must hold 4 values [w, x, y, z] or none"
        numbers = [*goal.position_m, *goal.quaternion_wxyz, goal.speed_m_s, goal.duration_s, goal.angular_rad_s]
        if not _finite(numbers):
            return "move_to: every number must be finite"
        if goal.gripper not in ("", "open", "close"):
            return f"move_to: gripper must be '', 'open' or 'close', not {goal.gripper!r}"
        if goal.gripper and (len(goal.position_m) or len(goal.quaternion_wxyz)):
            return "move_to: a goal is either a pose or a gripper command"
        if goal.mode not in ("", "guarded", "manipulation"):
            return f"move_to: mode must be '', 'guarded' or 'manipulation', not {goal.mode!r}"
        if not (len(goal.position_m) or len(goal.quaternion_wxyz) or goal.gripper):
            return "move_to: give position_m and/or quaternion_wxyz, or gripper"
    elif name == "hold" and not _finite([goal.duration_s]):
        return "hold: duration_s must be finite"
    elif name == "recover" and not _finite([goal.max_distance_m, goal.max_duration_s]):
        return "recover: max_distance_m and max_duration_s must be finite"
    return ""


def goal_kwargs(name: str, goal: Any) -> dict[str, Any]:
    """The primitive's keyword arguments from a goal (``args_json`` wins when set; zeros
    and empty fields mean "the harness default"). Any other value, negative ones included,
    goes to the primitive, whose range check answers with an ``invalid_argument`` result
    naming the valid range (never silently replaced by the default)."""
    if hasattr(goal, "args_json") and goal.args_json.strip():
        return parse_args_json(goal.args_json)
    if name == "move_to":
        if goal.gripper:
            return {"gripper": goal.gripper}
        kwargs: dict[str, Any] = {}
        if len(goal.position_m):
            kwargs["position"] = [float(v) for v in goal.position_m]
        if len(goal.quaternion_wxyz):
            kwargs["quaternion"] = [float(v) for v in goal.quaternion_wxyz]
        for field, key in (("speed_m_s", "speed"), ("duration_s", "duration"), ("angular_rad_s", "angular")):
            if getattr(goal, field) != 0.0:
                kwargs[key] = float(getattr(goal, field))
        if goal.mode:
            kwargs["mode"] = goal.mode
        return kwargs
    if name == "hold":
        return {"duration_s": float(goal.duration_s)} if goal.duration_s != 0.0 else {}
    if name == "recover":
        kwargs = {}
        if goal.max_distance_m != 0.0:
            kwargs["max_distance_m"] = float(goal.max_distance_m)
        if goal.max_duration_s != 0.0:
            kwargs["max_duration_s"] = float(goal.max_duration_s)
        return kwargs
    return {}
