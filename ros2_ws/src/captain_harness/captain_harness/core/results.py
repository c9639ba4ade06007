"""The result dict and receipt every robot call returns, and the failure categories.

Every policy-facing call returns (fixed keys, see ROBOT_API.md)::

    {"success", "executed", "failure_category", "message", "value", "diagnostics", "budget"}

and appends one receipt line (at most 300 characters) to the cell output, e.g.::

    move_to: ok; stopped_reason=target_reached executed_distance_m=0.1681 max_observed_force_n=5.198
    move_to: FAILED controller_rejected; emergency_limit; max_observed_force_n=112.1
    hold: ok
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

RESULT_KEYS = ("success", "executed", "failure_category", "message", "value", "diagnostics", "budget")
MAX_RECEIPT_CHARS = 300


class FailureCategory(enum.StrEnum):
    """Why a call failed. The value is what the policy sees in ``failure_category``."""

    INVALID_ARGUMENT = "invalid_argument"      # wrong type, NaN/inf, bad shape, unknown keyword value
    UNKNOWN_ID = "unknown_id"                  # detection id / observation handle never issued
    STALE_HANDLE = "stale_handle"              # handle from an observation that is no longer kept
    NOT_FOUND = "not_found"                    # perception found nothing matching the request
    NOT_AVAILABLE = "not_available"            # a backend / model / endpoint is not configured
    IK_FAILED = "ik_failed"                    # no joint solution for (part of) the sweep
    SELF_COLLISION = "self_collision"
    JOINT_LIMIT = "joint_limit"
    WORKSPACE_LIMIT = "workspace_limit"        # target outside the configured workspace box
    CONTACT = "contact"                        # guarded motion stopped at first contact
    CONTROLLER_REJECTED = "controller_rejected"  # stopped by a safety limit (e.g. emergency force)
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    NOTHING_TO_RECOVER = "nothing_to_recover"
    BUDGET_EXHAUSTED = "budget_exhausted"
    DRIVER_FAULT = "driver_fault"              # the driver reported a fault (stale state, ...)
    FINISH_REJECTED = "finish_rejected"        # the completion gate rejected finish(); the message says why
    INTERNAL_ERROR = "internal_error"          # a bug in the harness; the message says where


def _jsonable(value: Any) -> Any:
    """Convert numpy values and tuples into plain JSON types; non-finite floats become None."""
    t = type(value)
    if t is float:
        return value if math.isfinite(value) else None
    if t is str or t is bool or t is int or value is None:
        return value
    if t is dict:
        return {str(k): _jsonable(v) for k, v in value.items()}
    if t is np.ndarray and value.ndim == 1 and value.dtype.kind == "f":
        isfinite = math.isfinite
        return [v if isfinite(v) else None for v in value.tolist()]
    return _jsonable_other(value)


def _jsonable_other(value: Any) -> Any:
    """``_jsonable`` of the values its fast paths leave (containers, numpy scalars, subclasses)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    return value


def make_result(
    *,
    success: bool,
    executed: bool = False,
    failure_category: FailureCategory | str | None = None,
    message: str = "",
    value: Any = None,
    diagnostics: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a result dict with exactly the fixed keys, JSON-serialisable."""
    category = failure_category.value if isinstance(failure_category, FailureCategory) else failure_category
    return {
        "success": bool(success),
        "executed": bool(executed),
        "failure_category": None if success else (category or FailureCategory.INTERNAL_ERROR.value),
        "message": message,
        "value": _jsonable(value),
        "diagnostics": _jsonable(diagnostics or {}),
        "budget": _jsonable(budget or {}),
    }


def ok(value: Any = None, *, executed: bool = False, message: str = "",
       diagnostics: dict[str, Any] | None = None) -> dict[str, Any]:
    """A successful result."""
    return make_result(success=True, executed=executed, message=message, value=value,
                       diagnostics=diagnostics)


def fail(category: FailureCategory, message: str, *, executed: bool = False, value: Any = None,
         diagnostics: dict[str, Any] | None = None) -> dict[str, Any]:
    """A failed result with a precise category and a message saying how to fix the call."""
    return make_result(success=False, executed=executed, failure_category=category, message=message,
                       value=value, diagnostics=diagnostics)


def fmt_number(x: float) -> str:
    """Receipt number style: 4 significant digits (``0.1681``, ``5.198``, ``112.1``)."""
    if x is None or not math.isfinite(float(x)):
        return "nan"
    return f"{float(x):.4g}"


def fmt_value(x: Any) -> str:
    """Format a receipt field value: numbers with 4 significant digits, vectors as [a,b,c]."""
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        return fmt_number(float(x))
    if isinstance(x, (list, tuple, np.ndarray)):
        return "[" + ",".join(fmt_value(v) for v in list(np.asarray(x).ravel())) + "]"
    return str(x)


def format_receipt(name: str, result: dict[str, Any], fields: list[tuple[str, Any]] | None = None,
                   notes: list[str] | None = None) -> str:
    """One receipt line, at most 300 characters.

    ``name: ok; k=v k=v`` on success, ``name: FAILED <category>; <notes>; k=v`` on failure.
    ``fields`` are (key, value) pairs; a value given as a (before, after) pair of numbers is
    printed as ``before->after``. ``notes`` are bare words (e.g. a stop reason) shown before
    the fields of a failed call.
    """
    parts: list[str] = []
    for key, val in fields or []:
        if isinstance(val, tuple) and len(val) == 2 and all(
                isinstance(v, (int, float, np.floating, np.integer)) for v in val):
            parts.append(f"{key}={fmt_value(val[0])}->{fmt_value(val[1])}")
        else:
            parts.append(f"{key}={fmt_value(val)}")
    body = " ".join(parts)
    if result.get("success"):
        line = f"{name}: ok" + (f"; {body}" if body else "")
    else:
        segs = [f"{name}: FAILED {result.get('failure_category') or 'internal_error'}"]
        segs.extend(n for n in (notes or []) if n)
        if body:
            segs.append(body)
        line = "; ".join(segs)
    if len(line) > MAX_RECEIPT_CHARS:
        line = line[: MAX_RECEIPT_CHARS - 3] + "..."
    return line


@dataclass(frozen=True)
class CallOutcome:
    """What one robot call produced: the result dict and its receipt line."""

    result: dict[str, Any]
    receipt: str
