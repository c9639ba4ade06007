"""When an RL episode stops before its budget (paper Appendices A.2 and E).

* Critic cut (for rollout speed): the episode is ended once V(s_t, t) < 0.02 for 5
  consecutive requests, counting only requests after request 5 (t >= 6, 1-based), except
  in a deterministic 5 % control slice and on the hard tasks. A cut episode settles as
  budget-exhausted. Evaluation runs never cut.
* Missed-finish stop: once all goals have held for 15 consecutive requests without
  finish(), the episode is stopped and settled as a missed finish. "Held for N requests"
  means N requests ran with the goals holding on the snapshot before each of them and
  on the snapshot after the last: with goals first holding on s_k, requests k..k+14 run and
  the stop fires on s_{k+15} (when it still holds), before request k+15.

Both monitors are fed once per request, with the snapshot taken before that request,
and answer whether the episode must stop *before* running it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from captain_training.rl.errors import CreditError
from captain_training.rl.ladder import HARD_TASK_IDS

#: Fraction of episodes in the control slice that is never cut.
CONTROL_SLICE_FRACTION = 0.05


def in_control_slice(episode_key: str, fraction: float = CONTROL_SLICE_FRACTION) -> bool:
    """Whether an episode belongs to the control slice: a deterministic function of its key.

    The first 8 bytes of SHA-256 of the key, read as an unsigned integer over 2^64, are
    compared with ``fraction``; the same key always gives the same answer on every machine.
    """
    if not 0.0 <= fraction <= 1.0:
        raise CreditError(f"control-slice fraction must be in [0, 1], got {fraction}")
    digest = hashlib.sha256(episode_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < fraction


def critic_cut_allowed(episode_key: str, task_id: str, hard_tasks: frozenset[str] = HARD_TASK_IDS,
                       control_fraction: float = CONTROL_SLICE_FRACTION) -> bool:
    """Whether the critic may cut this episode (not in the control slice, not a hard task)."""
    return task_id not in hard_tasks and not in_control_slice(episode_key, control_fraction)


@dataclass
class CriticEarlyStop:
    """Streaming critic-cut rule. Call ``observe(t, V(s_t, t))`` before each request t (1-based).

    Attributes:
        threshold: cut when V is below this value (0.02) ...
        consecutive: ... for this many consecutive counted requests (5) ...
        after_request: ... counting only requests t > after_request (5).
        enabled: False for control-slice episodes, hard tasks and evaluation.
    """

    threshold: float = 0.02
    consecutive: int = 5
    after_request: int = 5
    enabled: bool = True
    _run: int = 0
    _last_t: int = 0

    def observe(self, request_index: int, value: float) -> bool:
        """True when the episode must be cut before request ``request_index``."""
        if request_index <= self._last_t:
            raise CreditError(f"request indices must increase: got {request_index} after {self._last_t}")
        self._last_t = request_index
        if request_index <= self.after_request:
            return False
        self._run = self._run + 1 if value < self.threshold else 0
        return self.enabled and self._run >= self.consecutive


@dataclass
class MissedFinishStop:
    """Streaming missed-finish rule. Call ``observe(success_on_snapshot)`` before each request."""

    hold_requests: int = 15
    _held_snapshots: int = 0

    def observe(self, all_goals_satisfied: bool) -> bool:
        """True when the goals have held for ``hold_requests`` requests: stop before the next one."""
        self._held_snapshots = self._held_snapshots + 1 if all_goals_satisfied else 0
        return self._held_snapshots > self.hold_requests
