"""The policy boundary never raises, binds arguments precisely and counts budgets."""

from __future__ import annotations

import numpy as np
import pytest

from captain_backends.core.errors import DriverStateError
from captain_harness.core.api import RobotAPI, primitive
from captain_harness.core.budget import Budget, BudgetLimits
from captain_harness.core.errors import ArgumentError
from captain_harness.core.results import CallOutcome, format_receipt, ok


class Arm:
    """A tiny primitives object: one physical call, one read-only call."""

    def __init__(self) -> None:
        self.position_m = np.zeros(3)

    @primitive(physical=True, group="motion")
    def nudge(self, dx_m: float, *, speed: float = 0.05) -> CallOutcome:
        """Move by dx_m along x (m) at speed (m/s)."""
        if not isinstance(dx_m, (int, float)) or not np.isfinite(dx_m):
            raise ArgumentError(f"dx_m must be a finite number of metres, got {dx_m!r}")
        self.position_m[0] += dx_m
        result = ok({"position_m": self.position_m}, executed=True)
        return CallOutcome(result, format_receipt("nudge", result, [("x_m", self.position_m[0])]))

    @primitive(group="state")
    def where(self) -> CallOutcome:
        """Current position (m)."""
        return CallOutcome(ok({"position_m": self.position_m}), "where: ok")

    @primitive(group="state")
    def broken(self) -> CallOutcome:
        """Always fails inside."""
        return {}["missing"]


@pytest.fixture
def api() -> RobotAPI:
    a = RobotAPI(budget=Budget(BudgetLimits(max_physical_actions=2)))
    assert sorted(a.register_object(Arm())) == ["broken", "nudge", "where"]
    return a


def test_call_runs_and_reports_budget(api: RobotAPI) -> None:
    out = api.call("nudge", (0.1,), {"speed": 0.02})
    assert out.result["success"] and out.result["executed"]
    assert out.receipt == "nudge: ok; x_m=0.1"
    assert out.result["budget"]["physical_actions_used"] == 1
    assert out.result["budget"]["physical_actions_left"] == 1
    assert api.call("where").result["value"]["position_m"] == [0.1, 0.0, 0.0]
    assert [r.name for r in api.log] == ["nudge", "where"]
    assert api.log[0].counted_as_action and not api.log[1].counted_as_action


@pytest.mark.parametrize("args,kwargs,needle", [
    ((), {}, "missing a required argument: 'dx_m'"),
    ((0.1,), {"sped": 1}, "unexpected keyword argument 'sped'"),
    ((0.1, 0.2), {}, "too many positional arguments"),
    ((float("nan"),), {}, "finite number of metres"),
    (("ten",), {}, "finite number of metres"),
])
def test_bad_arguments_fail_precisely(api: RobotAPI, args, kwargs, needle) -> None:
    out = api.call("nudge", args, kwargs)
    assert out.result["success"] is False
    assert out.result["failure_category"] == "invalid_argument"
    assert needle in out.result["message"]
    assert out.receipt.startswith("nudge: FAILED invalid_argument")
    assert api.budget.physical_actions_used == 0, "rejected arguments must not cost an action"


def test_unknown_call_lists_choices(api: RobotAPI) -> None:
    out = api.call("fly", (), {})
    assert out.result["failure_category"] == "invalid_argument"
    assert "available: broken, nudge, where" in out.result["message"]


def test_internal_errors_become_results(api: RobotAPI) -> None:
    out = api.call("broken")
    assert out.result["failure_category"] == "internal_error"
    assert "KeyError" in out.result["message"]
    assert "traceback" in out.result["diagnostics"]


def test_action_budget_is_enforced(api: RobotAPI) -> None:
    assert api.call("nudge", (0.1,)).result["success"]
    assert api.call("nudge", (0.1,)).result["success"]
    out = api.call("nudge", (0.1,))
    assert out.result["failure_category"] == "budget_exhausted"
    assert out.result["executed"] is False
    assert api.call("where").result["success"], "read-only calls stay free"
    assert api.budget.exhausted() == "physical_actions"


class Faulty:
    """Primitives that fail in each way the boundary answers; ``holds`` counts the holds
    the boundary asked for, ``hold_raises`` makes the hold itself fail."""

    def __init__(self, hold_raises: bool = False) -> None:
        self.holds = 0
        self.hold_raises = hold_raises
        self.ran = 0

    def hold_after_fault(self) -> str:
        self.holds += 1
        if self.hold_raises:
            raise RuntimeError("joint state is stale")
        return "the arm was commanded to hold where it is"

    @primitive(physical=True, group="motion")
    def push(self, dx_m: float) -> CallOutcome:
        """Raises inside (a bug in a physical call)."""
        self.ran += 1
        raise ZeroDivisionError("division by zero")

    @primitive(physical=True, group="motion")
    def refused(self) -> CallOutcome:
        """The driver refuses the command."""
        raise DriverStateError("send_command() needs ACTIVE, the driver is INACTIVE")

    @primitive(group="state")
    def peek(self) -> CallOutcome:
        """Raises inside (a bug in a read-only call)."""
        raise ValueError("bad frame")

    @primitive(name="not_an_outcome", group="state")
    def plain(self) -> CallOutcome:
        """Returns the wrong type."""
        return {"success": True}  # type: ignore[return-value]


class NoHold:
    """A physical primitive on an object that cannot hold the arm."""

    @primitive(physical=True, group="motion")
    def shove(self) -> CallOutcome:
        """Raises inside."""
        raise KeyError("q")


def test_a_fault_in_a_physical_primitive_commands_a_hold_and_says_so() -> None:
    obj = Faulty()
    out = obj.push(0.1)  # direct call: the boundary is on the method itself
    assert out.result["failure_category"] == "internal_error"
    assert obj.holds == 1
    assert "ZeroDivisionError" in out.result["message"]
    assert "the arm was commanded to hold where it is" in out.result["message"]
    assert out.receipt == "push: FAILED internal_error"
    failing = Faulty(hold_raises=True)
    msg = failing.push(0.1).result["message"]
    assert failing.holds == 1
    assert "the hold command failed too (RuntimeError: joint state is stale)" in msg
    assert "commanded to hold" not in msg


def test_fault_messages_claim_no_hold_where_none_was_commanded() -> None:
    obj = Faulty()
    peek = obj.peek().result
    assert peek["failure_category"] == "internal_error" and "read-only call commands nothing" in peek["message"]
    refused = obj.refused().result
    assert refused["failure_category"] == "driver_fault"
    assert "the driver refused (send_command() needs ACTIVE" in refused["message"]
    assert obj.holds == 0  # neither path commands a hold
    shove = NoHold().shove().result
    assert "no hold was commanded after it" in shove["message"]
    for message in (peek["message"], refused["message"], shove["message"]):
        assert "holding" not in message


def test_the_boundary_binds_arguments_and_checks_the_return_type() -> None:
    obj = Faulty()
    out = obj.push(0.1, sped=2)
    assert out.result["failure_category"] == "invalid_argument"
    assert out.result["message"] == (
        "push(): got an unexpected keyword argument 'sped'; signature is push(dx_m)")
    assert obj.ran == 0 and obj.holds == 0  # the body never ran
    wrong = obj.plain().result
    assert wrong["failure_category"] == "internal_error"
    assert "returned dict, not CallOutcome" in wrong["message"]


def test_the_api_declares_and_answers_boundary_primitives() -> None:
    a = RobotAPI(budget=Budget(BudgetLimits(max_physical_actions=5)))
    obj = Faulty()
    assert sorted(a.register_object(obj)) == ["not_an_outcome", "peek", "push", "refused"]
    assert a.specs["push"].physical and not a.specs["peek"].physical
    assert str(a.specs["push"].signature) == "(dx_m: 'float') -> 'CallOutcome'"
    out = a.call("push", (0.2,))
    assert out.result["failure_category"] == "internal_error" and obj.holds == 1
    assert out.result["budget"]["physical_actions_used"] == 1  # it reached the robot
    assert a.call("push", (), {"dx": 1}).result["failure_category"] == "invalid_argument"
    assert a.budget.physical_actions_used == 1  # refused arguments are not charged


def test_a_plain_registered_callable_is_answered_without_a_claimed_hold() -> None:
    a = RobotAPI()

    def jog(dx_m: float) -> CallOutcome:
        raise RuntimeError("link down")

    a.register("jog", jog, physical=True, group="motion")
    msg = a.call("jog", (0.1,)).result["message"]
    assert msg.startswith("jog hit an internal error (RuntimeError: link down); no hold was commanded after it")
