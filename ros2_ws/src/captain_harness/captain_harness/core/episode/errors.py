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
