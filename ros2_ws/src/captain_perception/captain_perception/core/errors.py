"""Exceptions of the perception core. Every one derives from ``PerceptionError``.

``PerceptionError`` is a ``HarnessError`` so that the policy boundary
(``captain_harness.core.api.RobotAPI``) turns it into a result dict whose
``failure_category`` comes from the exception; nothing raises into the policy's session.
"""

from __future__ import annotations

from captain_harness.core.errors import HarnessError
from captain_harness.core.results import FailureCategory


class PerceptionError(HarnessError):
    """Base of every perception error. ``category`` is the policy-facing failure category."""

    category = FailureCategory.INTERNAL_ERROR


class StaleHandleError(PerceptionError):
    """An observation handle or detection id that was issued but is no longer kept."""

    category = FailureCategory.STALE_HANDLE


class UnknownHandleError(PerceptionError):
    """An observation handle or detection id that was never issued."""

    category = FailureCategory.UNKNOWN_ID


class NothingFoundError(PerceptionError):
    """Perception found nothing matching the request (no depth, no object, no match)."""

    category = FailureCategory.NOT_FOUND


class BackendUnavailableError(PerceptionError):
    """A model, its weights or an endpoint is not configured or cannot be loaded."""

    category = FailureCategory.NOT_AVAILABLE


class InvalidPerceptionArgument(PerceptionError):
    """A call's arguments are wrong; the message says what to change."""

    category = FailureCategory.INVALID_ARGUMENT
