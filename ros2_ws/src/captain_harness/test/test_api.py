"""The policy boundary never raises, binds arguments precisely and counts budgets."""

from __future__ import annotations

import numpy as np
import pytest

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
