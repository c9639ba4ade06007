"""Exceptions of the harness core. Every one derives from ``HarnessError``.

Inside the core, problems are raised as these exceptions; at the policy boundary
(``captain_harness.core.api``) they become result dicts with ``failure_category``
taken from the exception, so nothing ever raises into the policy's session.
"""

from __future__ import annotations

from captain_harness.core.results import FailureCategory


class HarnessError(Exception):
    """Base of every harness error. ``category`` is the policy-facing failure category."""

    category: FailureCategory = FailureCategory.INTERNAL_ERROR

    def __init__(self, message: str, category: FailureCategory | None = None) -> None:
        super().__init__(message)
        if category is not None:
            self.category = category


class ArgumentError(HarnessError):
    """A call's arguments are wrong (type, shape, NaN, unknown choice); the message says
    what to change."""

    category = FailureCategory.INVALID_ARGUMENT


class UnknownIdError(HarnessError):
    """An observation handle or detection id that was never issued."""

    category = FailureCategory.UNKNOWN_ID


class BudgetExhausted(HarnessError):
    """A physical action was requested with no action budget left."""

    category = FailureCategory.BUDGET_EXHAUSTED
