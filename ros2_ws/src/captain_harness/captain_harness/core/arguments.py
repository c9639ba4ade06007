"""Validation of policy-supplied arguments.

Every parser either returns a clean value or raises ``ArgumentError`` whose message names
the argument, says what was wrong and what to pass instead. Booleans are not numbers
here (``True`` as a coordinate is a bug in the caller), numpy scalars and arrays are
accepted wherever plain numbers and lists are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from captain_harness.core.errors import ArgumentError

#: Relative deviation from unit norm that a quaternion may have before it is refused
#: (smaller deviations are normalised silently).
QUATERNION_NORM_TOLERANCE = 0.1

TOP_DOWN_QUATERNION_HINT = "[0, 2**-0.5, 2**-0.5, 0] (top-down grasp)"


#: Bounds of one robot call's arguments as they arrive from the session (see
#: ``check_call_payload``): nesting depth, integer magnitude, characters of text in all.
MAX_PAYLOAD_DEPTH = 32
MAX_PAYLOAD_INT = 2**1024
MAX_PAYLOAD_TEXT_CHARS = 1024 * 1024
MAX_PAYLOAD_ITEMS = 200_000


def check_call_payload(args: Any, kwargs: Any) -> None:
    """Check a robot call's JSON arguments against the bounds above before any primitive
    converts them.

    Raises:
        ArgumentError: with a one-line reason (nesting too deep, an integer of 2**1024 or
            more in magnitude, too much text, too many items).
    """
    budget = [MAX_PAYLOAD_TEXT_CHARS, MAX_PAYLOAD_ITEMS]
    stack: list[tuple[Any, int]] = [(args, 0), (kwargs, 0)]
    while stack:
        value, depth = stack.pop()
        budget[1] -= 1
        if budget[1] < 0:
            raise ArgumentError(f"arguments hold more than {MAX_PAYLOAD_ITEMS} items")
        if isinstance(value, bool) or value is None or isinstance(value, float):
            continue
        if isinstance(value, int):
            if not -MAX_PAYLOAD_INT < value < MAX_PAYLOAD_INT:
                raise ArgumentError("an integer argument is 2**1024 or more in magnitude; pass a number a float "
                                    "can hold")
            continue
        if isinstance(value, str):
            budget[0] -= len(value)
            if budget[0] < 0:
                raise ArgumentError(f"arguments hold more than {MAX_PAYLOAD_TEXT_CHARS} characters of text")
            continue
        if depth >= MAX_PAYLOAD_DEPTH and isinstance(value, (list, dict)):
            raise ArgumentError(f"arguments nest deeper than {MAX_PAYLOAD_DEPTH} levels")
        if isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, dict):
            for k, v in value.items():
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))


#: number types taken as they are by ``as_vector``'s quick path (bool is not among them)
_PLAIN_NUMBERS = frozenset({float, int, np.float64, np.float32, np.int64, np.int32})


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def as_float(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    unit: str = "",
    exclusive_minimum: bool = False,
) -> float:
    """A finite float within [minimum, maximum] (``minimum`` excluded if ``exclusive_minimum``)."""
    if not _is_number(value):
        raise ArgumentError(
            f"{name} must be a number{f' in {unit}' if unit else ''}, got {type(value).__name__} {_short(value)}"
        )
    try:
        f = float(value)
    except OverflowError:
        raise ArgumentError(f"{name} is too large (an integer past the float range); "
                            f"valid: {_range_text(minimum, maximum, unit, exclusive_minimum)}") from None
    if not math.isfinite(f):
        raise ArgumentError(f"{name} must be finite, got {f}")
    rng = _range_text(minimum, maximum, unit, exclusive_minimum)
    if minimum is not None and (f < minimum or (exclusive_minimum and f <= minimum)):
        raise ArgumentError(f"{name}={f:g} is out of range; valid: {rng}")
    if maximum is not None and f > maximum:
        raise ArgumentError(f"{name}={f:g} is out of range; valid: {rng}")
    return f


def as_optional_float(name: str, value: Any, *, default: float | None = None, **kwargs: Any) -> float | None:
    """``default`` (None unless given) for ``None``, else a float checked as in ``as_float``."""
    return default if value is None else as_float(name, value, **kwargs)


def as_vector(name: str, value: Any, length: int, *, unit: str = "", example: str = "") -> np.ndarray:
    """A finite float vector of exactly ``length`` entries from a list, tuple or array."""
    kind = type(value)
    if (kind is list or kind is tuple) and len(value) == length:
        # the common case: plain numbers, all finite (anything else takes the checks below)
        isfinite = math.isfinite
        try:
            if all((type(x) in _PLAIN_NUMBERS) and isfinite(x) for x in value):
                return np.array(value, dtype=float)
        except OverflowError:  # an integer past the float range: the checks below name it
            pass
    hint = f" e.g. {example}" if example else ""
    if isinstance(value, (str, bytes, dict, set)) or value is None or _is_number(value):
        raise ArgumentError(
            f"{name} must be a list of {length} numbers{f' in {unit}' if unit else ''}"
            f"{hint}, got {type(value).__name__} {_short(value)}"
        )
    try:
        items = list(value) if isinstance(value, (Sequence, np.ndarray, Iterable)) else None
    except TypeError:
        items = None
    if items is None:
        raise ArgumentError(f"{name} must be a list of {length} numbers{hint}, got {type(value).__name__}")
    if isinstance(value, np.ndarray) and value.ndim != 1:
        raise ArgumentError(
            f"{name} must be a flat list of {length} numbers{hint}, got an array of shape {value.shape}"
        )
    if len(items) != length:
        raise ArgumentError(f"{name} must have {length} entries{hint}, got {len(items)}")
    for i, x in enumerate(items):
        if not _is_number(x):
            raise ArgumentError(f"{name}[{i}] must be a number{hint}, got {type(x).__name__} {_short(x)}")
    for i, x in enumerate(items):
        if isinstance(x, int) and not -MAX_PAYLOAD_INT < x < MAX_PAYLOAD_INT:
            raise ArgumentError(f"{name}[{i}] is an integer past the float range{hint}; pass a finite number")
    arr = np.array([float(x) for x in items], dtype=float)
    bad = [i for i in range(length) if not math.isfinite(arr[i])]
    if bad:
        raise ArgumentError(
            f"{name} has non-finite entries at {bad} ([{', '.join(f'{x:g}' for x in arr)}]); "
            "pass finite numbers (check for NaN from a failed measurement)"
        )
    return arr


def as_position(name: str, value: Any) -> np.ndarray:
    """A 3-vector position in metres (robot base frame)."""
    return as_vector(name, value, 3, unit="m", example="[0.5, 0.0, 0.2]")


def as_quaternion(name: str, value: Any) -> np.ndarray:
    """A unit quaternion ``[w, x, y, z]``; nearly-unit ones are normalised, others refused."""
    q = as_vector(name, value, 4, example=TOP_DOWN_QUATERNION_HINT)
    norm = math.sqrt(q.dot(q))  # np.linalg.norm(q), bit for bit
    if norm < 1e-9:
        raise ArgumentError(
            f"{name} has zero norm; give a unit quaternion [w, x, y, z], e.g. {TOP_DOWN_QUATERNION_HINT}"
        )
    if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
        raise ArgumentError(
            f"{name} has norm {norm:.4g}, not 1; give a unit quaternion [w, x, y, z] "
            f"(divide by its norm), e.g. {TOP_DOWN_QUATERNION_HINT}"
        )
    q = q / norm
    return -q if q[0] < 0.0 else q


def as_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """One of ``choices`` (case-sensitive)."""
    valid = ", ".join(repr(c) for c in choices)
    if not isinstance(value, str):
        raise ArgumentError(f"{name} must be one of {valid}, got {type(value).__name__} {_short(value)}")
    if value not in choices:
        raise ArgumentError(f"{name}={value!r} is not valid; choose one of {valid}")
    return value


def as_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer within [minimum, maximum]."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{name} must be an integer, got {type(value).__name__} {_short(value)}")
    i = int(value)
    if (minimum is not None and i < minimum) or (maximum is not None and i > maximum):
        shown = str(i) if -10**30 < i < 10**30 else f"{'-' if i < 0 else ''}<{i.bit_length()}-bit integer>"
        raise ArgumentError(f"{name}={shown} is out of range; valid: {_range_text(minimum, maximum, '', False)}")
    return i


def as_mapping(name: str, value: Any) -> dict[str, Any]:
    """A dict of keyword arguments (``None`` is an empty dict)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ArgumentError(
            f"{name} must be a dict of keyword arguments, e.g. "
            f"{{'max_distance_m': 0.02}}, got {type(value).__name__} {_short(value)}"
        )
    return dict(value)


def _range_text(minimum: float | None, maximum: float | None, unit: str, exclusive_minimum: bool) -> str:
    lo = "(" if exclusive_minimum else "["
    lo_v = "-inf" if minimum is None else f"{minimum:g}"
    hi_v = "inf" if maximum is None else f"{maximum:g}"
    return f"{lo}{lo_v}, {hi_v}]" + (f" {unit}" if unit else "")


def _short(value: Any, limit: int = 60) -> str:
    if isinstance(value, int) and not -10**30 < value < 10**30:
        return f"<{value.bit_length()}-bit integer>"
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
