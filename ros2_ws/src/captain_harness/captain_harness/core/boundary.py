"""The primitive boundary: the one way a policy-facing call is declared and guarded.

Every primitive is a method decorated with ``@primitive`` (from any package)::

    class Gripper:
        @primitive(physical=True, group="motion")
        def squeeze(self, force_n: float = 10.0) -> CallOutcome:
            f = arguments.as_float("force_n", force_n, minimum=0.0, maximum=40.0, unit="N")
            ...
            result = ok({"force_n": f}, executed=True, message="squeezed")
            return CallOutcome(result, format_receipt("squeeze", result))

        def hold_after_fault(self) -> str:       # only physical primitives' objects
            ...                                  # command a hold, say what happened

What the boundary does, for every primitive alike:

* **declaration**: the name the policy calls (the method's name unless given), whether it
  moves the robot (``physical``: counted against the physical-action budget) and its
  TASK.md group; ``RobotAPI.register_object`` reads it;
* **arguments**: a call whose arguments do not bind to the signature fails with
  ``invalid_argument`` and the signature, before the body runs; the body parses values
  with ``core/arguments.py`` and raises ``ArgumentError`` saying what to change;
* **budgets**: ``RobotAPI.call`` binds the arguments and charges one physical action
  before a physical primitive runs; calls refused for their arguments or the budget are
  not charged;
* **never raises**: whatever the body raises becomes a failed result and its receipt
  (``exception_result``): a ``HarnessError`` keeps its category and message, a driver's
  ``BackendError`` is ``driver_fault``, anything else ``internal_error`` with the
  traceback in the diagnostics; a body that returns something other than a
  ``CallOutcome`` is an ``internal_error`` too;
* **messages true for each path**: after an unexpected error in a *physical* primitive the
  boundary calls the object's ``hold_after_fault()`` (when it has one), which commands a
  hold if it can and returns what happened; the message says exactly that. A read-only
  primitive commands nothing on a fault, and a ``BackendError`` (the driver refused a
  command) is answered without a further command; neither message claims a hold.

``RobotAPI.call`` answers calls of plain callables registered with ``RobotAPI.register``
with the same ``exception_result``.
"""

from __future__ import annotations

import functools
import inspect
import traceback
from collections.abc import Callable
from typing import Any

from captain_backends.core.errors import BackendError
from captain_harness.core.errors import ArgumentError, HarnessError
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt

#: attribute of a decorated method holding its declaration (name, physical, group)
PRIMITIVE_ATTR = "__captain_primitive__"

#: what a read-only primitive's fault message says about the arm
READ_ONLY_FAULT = "a read-only call commands nothing"
#: what a physical primitive's fault message says when its object cannot hold the arm
NO_HOLD_FAULT = "no hold was commanded after it"


def exception_result(name: str, exc: BaseException, after_fault: str | None = None) -> dict[str, Any]:
    """The failed result of primitive ``name`` that raised ``exc``.

    Args:
        name: the primitive's policy-facing name (starts the message).
        exc: what it raised.
        after_fault: what happened to the arm after an unexpected error, as a clause
            ("the arm was commanded to hold where it is"); None: nothing is said.
    """
    if isinstance(exc, HarnessError):
        return fail(exc.category, str(exc))
    if isinstance(exc, BackendError):
        return fail(
            FailureCategory.DRIVER_FAULT,
            f"{name}: the driver refused ({exc}); nothing further was commanded; "
            "get_robot_state() shows the arm and any fault",
        )
    what = f"; {after_fault}" if after_fault else ""
    return fail(
        FailureCategory.INTERNAL_ERROR,
        f"{name} hit an internal error ({type(exc).__name__}: {exc}){what}; try again or use another call",
        diagnostics={"traceback": "".join(traceback.format_exception(exc, limit=8))},
    )


def _after_fault(obj: Any, physical: bool) -> str:
    """Command a hold through ``obj.hold_after_fault()`` for a physical primitive and say
    what happened; never raises."""
    if not physical:
        return READ_ONLY_FAULT
    hold = getattr(obj, "hold_after_fault", None)
    if hold is None:
        return NO_HOLD_FAULT
    try:
        return str(hold())
    except Exception as exc:  # the fault answer must still come back
        return f"the hold command failed too ({type(exc).__name__}: {exc})"


def primitive(name: str | None = None, *, physical: bool = False, group: str = "") -> Callable:
    """Declare a method as a policy-facing primitive behind the boundary (see the module
    docstring).

    Args:
        name: the name the policy calls (defaults to the method name).
        physical: True for calls that move the robot (counted against the action budget;
            a fault is followed by ``hold_after_fault()``).
        group: "perception", "measurement", "motion", "planning" or "state" (for TASK.md).
    """

    def wrap(fn: Callable[..., CallOutcome]) -> Callable[..., CallOutcome]:
        call_name = name or fn.__name__
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(self: Any, *args: Any, **kwargs: Any) -> CallOutcome:
            try:
                try:
                    outcome = fn(self, *args, **kwargs)
                except TypeError:
                    _check_binding(call_name, signature, self, args, kwargs)
                    raise
                if not isinstance(outcome, CallOutcome):
                    raise TypeError(f"primitive {call_name} returned {type(outcome).__name__}, not CallOutcome")
                return outcome
            except Exception as exc:
                after = None if isinstance(exc, (HarnessError, BackendError)) else _after_fault(self, physical)
                result = exception_result(call_name, exc, after)
                return CallOutcome(result, format_receipt(call_name, result))

        setattr(call, PRIMITIVE_ATTR, {"name": call_name, "physical": physical, "group": group})
        return call

    return wrap


def _check_binding(name: str, signature: inspect.Signature, obj: Any, args: tuple, kwargs: dict) -> None:
    """Raise ``ArgumentError`` when ``args``/``kwargs`` do not bind to the primitive's
    signature (the ``TypeError`` then came from the call itself, before the body ran)."""
    try:
        signature.bind(obj, *args, **kwargs)
    except TypeError as unbound:
        params = ", ".join(str(p.replace(annotation=inspect.Parameter.empty))
                           for p in list(signature.parameters.values())[1:])
        raise ArgumentError(f"{name}(): {unbound}; signature is {name}({params})") from None
