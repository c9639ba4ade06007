"""Exceptions of the episode layer. All derive from ``HarnessError`` (the harness core's
one exception base); none of them ever reaches the policy's session."""

from __future__ import annotations

from captain_harness.core.errors import HarnessError


class EpisodeError(HarnessError):
    """Base of the episode layer's errors (bad configuration, unusable records)."""


class SessionError(EpisodeError):
    """The sandboxed session could not be started or configured."""


class PolicyError(EpisodeError):
    """The policy could not produce a reply (a bad request or a bad reply)."""


class PolicyUnavailableError(PolicyError):
    """The policy server could not be reached after all retries: an infrastructure
    failure, not a failure of the policy."""


class RobotCallTimeoutError(EpisodeError):
    """A robot call ran past its host-side wall-clock limit; the episode ends.

    Attributes:
        name: the robot call.
        limit_s: the limit it ran past, s.
        cause: ``"call_timeout"`` (the per-call limit: the robot or harness hung) or
            ``"wall_time"`` (the episode's wall-time budget ran out during the call).
    """

    def __init__(self, name: str, limit_s: float, cause: str) -> None:
        self.name, self.limit_s, self.cause = name, limit_s, cause
        what = "the episode's wall-time budget ran out during" if cause == "wall_time" else "no answer from"
        super().__init__(f"{what} robot call {name}() within its {limit_s:.3g} s limit; the episode ends")
