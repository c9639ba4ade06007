"""Episode outcomes.

* ``strict_success``: host success and the agent ended the episode with an accepted
  ``finish()`` (the deployable metric);
* ``false_finish``: ``finish()`` accepted on a failed state;
* ``missed_finish``: host success, but the agent never finished;
* ``budget_exhausted``: failed, and a budget (requests, physical actions, wall time) ran out;
* ``stopped``: failed, and the agent replied without a tool call and without finishing;
* ``finished`` / ``not_finished``: no host predicate is available (e.g. a real robot);
* ``infrastructure_failure``: the policy server could not be reached or answered malformed
  replies, the harness failed, or a robot call ran past its host-side limit
  (``robot_call_timeout``); such episodes are excluded from success rates.

Host success is the benchmark's goal predicate on the final state, evaluated on the host.
"""

from __future__ import annotations

import enum
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

INFRASTRUCTURE_END_REASONS = frozenset({"policy_unavailable", "policy_error", "harness_error",
                                        "robot_call_timeout"})


class Outcome(enum.StrEnum):
    """The label of an episode's outcome (see the module docstring)."""

    STRICT_SUCCESS = "strict_success"
    FALSE_FINISH = "false_finish"
    MISSED_FINISH = "missed_finish"
    BUDGET_EXHAUSTED = "budget_exhausted"
    STOPPED = "stopped"
    FINISHED = "finished"
    NOT_FINISHED = "not_finished"
    INFRASTRUCTURE_FAILURE = "infrastructure_failure"


def classify(host_success: bool | None, finished: bool, end_reason: str) -> Outcome:
    """The outcome label of an episode."""
    if end_reason in INFRASTRUCTURE_END_REASONS:
        return Outcome.INFRASTRUCTURE_FAILURE
    budget = end_reason.startswith("budget_")
    if host_success is None:
        return Outcome.FINISHED if finished else Outcome.NOT_FINISHED
    if finished:
        return Outcome.STRICT_SUCCESS if host_success else Outcome.FALSE_FINISH
    if host_success:
        return Outcome.MISSED_FINISH
    return Outcome.BUDGET_EXHAUSTED if budget else Outcome.STOPPED


@dataclass
class EpisodeOutcome:
    """Everything an episode's summary reports (``outcome.json`` and the CLI's JSON line).

    Times are seconds. ``harness_s_per_request`` is the harness's own time per request:
    the request's wall time minus the policy call, the robot calls on the host and the
    cell code's own compute in the session. ``perturbation`` is the driver's record of
    what the start changed (seed, layout, objects moved, appearance draws, LIBERO-PRO
    variant; empty for a driver that keeps none).
    """

    episode_id: str
    task: str
    suite: str
    task_id: Any
    init_state: int
    seed: int | None
    policy: str
    outcome: str
    end_reason: str
    host_success: bool | None
    strict_success: bool
    finished: bool
    false_finish: bool
    missed_finish: bool
    budget_exhausted: bool
    requests: int
    physical_actions: int
    wall_time_s: float
    policy_s_total: float
    robot_s_total: float
    harness_s_per_request: list[float] = field(default_factory=list)
    gate_rejections: int = 0
    gate_accepted_on_evidence: bool = False
    session_restarts: int = 0
    protections: dict[str, Any] = field(default_factory=dict)
    record_dir: str = ""
    error: str | None = None
    perturbation: dict[str, Any] = field(default_factory=dict)

    @property
    def harness_s_per_request_median(self) -> float | None:
        """Median harness time per request, s."""
        return statistics.median(self.harness_s_per_request) if self.harness_s_per_request else None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (with the median added)."""
        d = asdict(self)
        d["harness_s_per_request_median"] = self.harness_s_per_request_median
        return d

    def summary_line(self) -> dict[str, Any]:
        """The compact dict the CLI prints as its last line."""
        d = self.to_dict()
        d.pop("harness_s_per_request")
        d.pop("protections")
        return d
