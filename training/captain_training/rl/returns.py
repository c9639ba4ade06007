"""Terminal returns R_i and per-request costs c_t (paper Eq. 7, Appendices A.2 and E).

Terminal return (``terminal_return``):

=====================================  ======
outcome                                R
=====================================  ======
host success, ended by finish()        1
host success without finish()          0.25   (missed finish; also the missed-finish stop)
other failure                          0      (or the subgoal ladder, see below)
budget exhausted, or cut by the critic -0.1   (or the subgoal ladder, see below)
false finish (finish() on a failure)   -0.3
=====================================  ======

A critic cut always settles as budget-exhausted and a missed-finish stop always as a missed
finish, whatever the final host predicate says (Appendices A.2, E). On the hard tasks a
failed episode that did not falsely finish and reached rung d >= 1 of its subgoal ladder
(``ladder.py``) receives the ladder reward ``0.15 d / (n + 1)`` instead of its 0 or -0.1
(``R = max(R, ladder)``), which gives exactly the paper's ordering:
success > missed finish > partial progress > 0 > budget exhaustion > false finish.

Per-request costs (``request_costs``), all <= 0 and summed per request:

* every physical action beyond ``1.5 x`` the median action count of the task's SFT
  episodes: -0.008 each (counted over the whole episode, so the action whose running
  count first exceeds the threshold is the first one charged);
* every failed or rejected physical action: -0.02;
* after the host first judges the scene solved (the snapshot *before* the request already
  satisfies the success predicate): -0.005 per request and -0.008 per physical action,
  the total of these post-success costs capped at -0.45. The request whose only effect is
  an accepted finish() is not charged the request cost (it is the behaviour the cost asks
  for); its physical actions, if any, are.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from captain_training.rl.errors import CreditError


class Termination(enum.StrEnum):
    """How an episode ended."""

    FINISH = "finish"                          # finish() accepted by the completion gate
    NO_TOOL_CALL = "no_tool_call"              # a reply without a tool call and without finish()
    BUDGET = "budget"                          # request, physical-action or wall-time budget exhausted
    CRITIC_CUT = "critic_cut"                  # early stop by the critic (settles as budget exhausted)
    MISSED_FINISH_STOP = "missed_finish_stop"  # goals held for 15 requests without finish()
    ERROR = "error"                            # the episode broke (harness or server error)

    @classmethod
    def parse(cls, value: str | Termination) -> Termination:
        """From a string; the error lists the valid names."""
        if isinstance(value, Termination):
            return value
        try:
            return cls(value)
        except ValueError:
            raise CreditError(f"unknown termination {value!r}; valid: {[t.value for t in cls]}") from None


@dataclass(frozen=True)
class ReturnConfig:
    """Values of Eq. 7."""

    success_finished: float = 1.0
    success_not_finished: float = 0.25
    other_failure: float = 0.0
    budget_exhausted: float = -0.1
    false_finish: float = -0.3


@dataclass(frozen=True)
class CostConfig:
    """Immediate costs of Appendices A.2 and E (all <= 0)."""

    over_median_factor: float = 1.5
    over_median_action_cost: float = -0.008
    failed_action_cost: float = -0.02
    post_success_request_cost: float = -0.005
    post_success_action_cost: float = -0.008
    post_success_cap: float = -0.45
    charge_finishing_request: bool = False

    def __post_init__(self) -> None:
        for name in ("over_median_action_cost", "failed_action_cost", "post_success_request_cost",
                     "post_success_action_cost", "post_success_cap"):
            if getattr(self, name) > 0:
                raise CreditError(f"CostConfig.{name} must be <= 0 (costs never reward), "
                                  f"got {getattr(self, name)}")
        if self.over_median_factor <= 0:
            raise CreditError("CostConfig.over_median_factor must be > 0")


@dataclass(frozen=True)
class RequestRecord:
    """What the harness reports about one request, for costs and credit.

    Attributes:
        physical_actions: physical actions the request attempted (executed, failed or
            rejected), i.e. calls that count against the action budget.
        failed_actions: of those, the ones that failed or were rejected.
        python_error_only: every cell of the request ended in a Python error and nothing
            else happened (no robot call produced a result).
        solved_before: the host success predicate held on the snapshot taken before this
            request.
        accepted_finish: this request called finish() and the gate accepted it.
    """

    physical_actions: int = 0
    failed_actions: int = 0
    python_error_only: bool = False
    solved_before: bool = False
    accepted_finish: bool = False

    def __post_init__(self) -> None:
        if self.physical_actions < 0 or self.failed_actions < 0:
            raise CreditError("action counts must be >= 0")
        if self.failed_actions > self.physical_actions:
            raise CreditError(f"failed_actions ({self.failed_actions}) cannot exceed physical_actions "
                              f"({self.physical_actions}); rejected actions count as attempted")


def terminal_return(host_success: bool, termination: Termination | str, ladder_reward: float = 0.0,
                    config: ReturnConfig | None = None) -> float:
    """R_i of Eq. 7 (see the module table).

    ``ladder_reward`` (>= 0, from ``ladder.ladder_reward``) lifts a failed episode that did not
    falsely finish to ``max(R, ladder_reward)``; it is ignored for successes and false finishes.
    """
    cfg = config or ReturnConfig()
    term = Termination.parse(termination)
    if ladder_reward < 0:
        raise CreditError(f"ladder_reward must be >= 0, got {ladder_reward}")

    def lifted(base: float) -> float:
        return max(base, ladder_reward) if ladder_reward > 0 else base

    if term is Termination.CRITIC_CUT:
        return lifted(cfg.budget_exhausted)
    if term is Termination.MISSED_FINISH_STOP:
        return cfg.success_not_finished
    if term is Termination.FINISH:
        return cfg.success_finished if host_success else cfg.false_finish
    if host_success:
        return cfg.success_not_finished
    if term is Termination.BUDGET:
        return lifted(cfg.budget_exhausted)
    return lifted(cfg.other_failure)


def request_costs(requests: Sequence[RequestRecord], sft_median_actions: float | None,
                  config: CostConfig | None = None) -> np.ndarray:
    """c_t for every request of an episode (see the module docstring), float64 (T,).

    Args:
        requests: the episode's requests in order.
        sft_median_actions: median physical-action count of the task's SFT episodes; None
            disables the over-median cost (task without SFT statistics).
        config: cost values.
    """
    cfg = config or CostConfig()
    costs = np.zeros(len(requests), dtype=float)
    threshold = math.inf if sft_median_actions is None else cfg.over_median_factor * float(sft_median_actions)
    actions_so_far = 0
    solved_seen = False
    post_success_total = 0.0
    for t, req in enumerate(requests):
        c = 0.0
        before = actions_so_far
        actions_so_far += req.physical_actions
        # actions numbered before+1 .. actions_so_far; charged are those with number > threshold
        first_charged = max(before + 1, math.floor(threshold) + 1) if math.isfinite(threshold) else math.inf
        if math.isfinite(first_charged):
            c += cfg.over_median_action_cost * max(0, actions_so_far - int(first_charged) + 1)
        c += cfg.failed_action_cost * req.failed_actions
        solved_seen = solved_seen or req.solved_before
        if solved_seen:
            ps = cfg.post_success_action_cost * req.physical_actions
            finishing_only = req.accepted_finish and req.physical_actions == 0
            if not finishing_only or cfg.charge_finishing_request:
                ps += cfg.post_success_request_cost
            ps = min(0.0, max(ps, cfg.post_success_cap - post_success_total))
            post_success_total += ps
            c += ps
        costs[t] = c
    return costs


def episode_outcome_value(terminal: float, costs: Sequence[float]) -> float:
    """G_i = R_i + sum_t c_t (Eq. 6 / 10)."""
    return float(terminal) + float(np.sum(costs))
