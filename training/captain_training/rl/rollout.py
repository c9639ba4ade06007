"""Rollout collection: one RL episode on the harness's headless episode loop.

``collect_episode(job)`` runs ``captain_harness``'s ``run_episode`` with a host-side
``before_request`` hook. Before every request the hook receives the simulator's hidden
``SimSnapshot`` (the driver's ``snapshot()``; it never reaches the policy's session), and

* computes the 36 critic features of that snapshot (against the snapshot at reset);
* feeds the missed-finish stop (goals held on 15 consecutive request snapshots ->
  ``missed_finish_stop``);
* feeds the critic cut with V(s_t, t) of the critic the job names (V < 0.02 for 5
  consecutive requests after request 5 -> ``critic_cut``), unless the episode is in the
  deterministic 5 % control slice, on a hard task, or a monitor episode.

After every request the loop's event supplies what the request did (``request_record``)
and the exact prompt/completion token ids and log-probabilities the server returned; the
rollout policy client records the policy version that answered.

The result is a plain dict (picklable across processes and Ray) that ``to_rollout_episode``
turns into the ``RolloutEpisode`` that ``round.run_round`` consumes. Episodes that ended
in an infrastructure failure (policy server unreachable, harness error) or made no
request are returned with ``usable: False`` and are not trained on.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from captain_training.rl.returns import RequestRecord, Termination
from captain_training.rl.start_states import StartState

#: Episode end reasons of the harness that are infrastructure failures.
INFRASTRUCTURE_END_REASONS = frozenset({"policy_unavailable", "policy_error", "harness_error"})


@dataclass
class EarlyStopSettings:
    """Early-stop settings carried by a job (see ``stopping.py``)."""

    threshold: float = 0.02
    consecutive: int = 5
    after_request: int = 5
    missed_finish_hold_requests: int = 15


@dataclass
class RolloutJob:
    """One episode to collect.

    Attributes:
        episode_key / group_key: identity (group = start state).
        start: the start state.
        policy_name / policy_options: the policy (``PolicySpec`` parts). For a token-returning
            endpoint use ``captain_training.rl.policy_client:make_rollout_policy``.
        out_dir: records root of the round.
        monitor: a held-out monitor episode (no critic cut, metrics only).
        critic_cut_allowed: the episode may be cut by the critic (not in the control slice,
            not a hard task, not a monitor).
        critic_path: saved critic for the cut (None: no critic cut).
        max_requests / max_physical_actions / max_wall_time_s: episode budgets.
        early_stop: thresholds.
        sft_median_actions: the task's SFT median physical-action count (None: no cost).
        ladder_scale: > 0 when the subgoal ladder applies to this episode (hard task, from
            the ladder round on): its reward is ``ladder_scale * d / (n + 1)``.
    """

    episode_key: str
    group_key: str
    start: StartState
    policy_name: str
    policy_options: dict[str, Any]
    out_dir: str
    monitor: bool = False
    critic_cut_allowed: bool = True
    critic_path: str | None = None
    max_requests: int = 60
    max_physical_actions: int = 120
    max_wall_time_s: float = 3600.0
    cell_timeout_s: float = 120.0
    early_stop: EarlyStopSettings = field(default_factory=EarlyStopSettings)
    sft_median_actions: float | None = None
    ladder_scale: float = 0.0


_CRITICS: dict[tuple[str, float], Any] = {}


def _load_critic(path: str | None) -> Any:
    """The critic at ``path``, cached per process by (path, modification time)."""
    if not path:
        return None
    from captain_training.rl.critic import load_critic

    key = (str(path), os.path.getmtime(path))
    if key not in _CRITICS:
        _CRITICS.clear()
        _CRITICS[key] = load_critic(path).critic.eval()
    return _CRITICS[key]


def termination_of(end_reason: str) -> Termination:
    """The RL termination of a harness end reason."""
    if end_reason == "finished":
        return Termination.FINISH
    if end_reason == "no_tool_call":
        return Termination.NO_TOOL_CALL
    if end_reason.startswith("budget_"):
        return Termination.BUDGET
    if end_reason == Termination.CRITIC_CUT.value:
        return Termination.CRITIC_CUT
    if end_reason == Termination.MISSED_FINISH_STOP.value:
        return Termination.MISSED_FINISH_STOP
    return Termination.ERROR


class _EpisodeMonitor:
    """The before-request hook and the event sink of one episode."""

    def __init__(self, job: RolloutJob, task_id: str) -> None:
        from captain_training.rl.stopping import CriticEarlyStop, MissedFinishStop

        self.job = job
        self.task_id = task_id
        self.snapshots: list[Any] = []
        self.features: list[np.ndarray] = []
        self.values: list[float] = []
        self.events: dict[int, dict[str, Any]] = {}
        self.degenerate: str | None = None
        self.critic = _load_critic(job.critic_path)
        known = getattr(getattr(self.critic, "config", None), "task_ids", ())
        if self.critic is not None and task_id not in known:
            self.critic = None
        es = job.early_stop
        self.cut = CriticEarlyStop(es.threshold, es.consecutive, es.after_request,
                                   enabled=job.critic_cut_allowed and not job.monitor)
        self.missed = MissedFinishStop(es.missed_finish_hold_requests)

    def before_request(self, index: int, snapshot: Any) -> str | None:
        from captain_training.rl.features import extract_features

        if snapshot is None or not hasattr(snapshot, "object_poses"):
            return None
        if not self.snapshots:
            from captain_training.rl.start_states import DEGENERATE_START, degenerate_reason

            self.degenerate = degenerate_reason(snapshot)
            if self.degenerate is not None:
                return DEGENERATE_START
        self.snapshots.append(snapshot)
        x = extract_features(snapshot, self.snapshots[0])
        self.features.append(x)
        if self.missed.observe(bool(snapshot.success)):
            return Termination.MISSED_FINISH_STOP.value
        if self.critic is not None:
            v = float(self.critic.value(x[None, :], index, self.task_id)[0])
            self.values.append(v)
            if self.cut.observe(index, v):
                return Termination.CRITIC_CUT.value
        return None

    def on_event(self, event: dict[str, Any]) -> None:
        keep = ("request_record", "prompt_token_ids", "completion_token_ids", "logprobs")
        self.events[int(event["request_index"])] = {k: event.get(k) for k in keep}


def collect_episode(job: RolloutJob | dict[str, Any], backend_factory: Any = None) -> dict[str, Any]:
    """Run one RL episode; returns the plain-data episode (see the module docstring).

    Args:
        job: the episode.
        backend_factory: the episode backend (None: ``backends.factory_for`` the start
            state: a simulator built for this episode); ``ros_pool`` passes a running
            stack's (``ros_robot_client.ros_backend``).
    """
    from captain_harness.core.budget import BudgetLimits
    from captain_harness.core.episode.loop import LoopConfig
    from captain_harness.core.episode.policy.registry import PolicySpec, make_policy
    from captain_harness.core.episode.runner import EpisodeConfig, run_episode
    from captain_training.rl.backends import factory_for

    if isinstance(job, dict):
        job = job_from_dict(job)
    if backend_factory is not None and job.start.wide_layout:
        raise ValueError(f"{job.start.key}: a wide-layout start needs the RL backend (a running stack resets to "
                         "official initial states only)")
    started = time.monotonic()
    monitor = _EpisodeMonitor(job, job.start.task)
    config = EpisodeConfig(
        limits=_limits(BudgetLimits, job),
        loop=LoopConfig(cell_timeout_s=job.cell_timeout_s, record_snapshots=True),
        subset="rl", origin="rl",
    )
    client = make_policy(PolicySpec(job.policy_name, dict(job.policy_options)))
    try:
        outcome = run_episode(
            job.start.task, policy=client, out_dir=job.out_dir,
            backend_factory=backend_factory or factory_for(job.start.wide_layout),
            init_state=job.start.init_state, seed=job.start.seed, config=config,
            episode_id=job.episode_key, on_event=monitor.on_event, before_request=monitor.before_request)
    finally:
        client.close()
    versions = dict(getattr(client, "versions", {}) or {})
    chosen = dict(getattr(client, "chosen", {}) or {})
    images = dict(getattr(client, "images", {}) or {})
    candidate_probs = dict(getattr(client, "candidate_probs", {}) or {})
    T = int(outcome.requests)
    out: dict[str, Any] = {
        "job": job_to_dict(job),
        "outcome": outcome.summary_line(),
        "end_reason": outcome.end_reason,
        "termination": termination_of(outcome.end_reason).value,
        "host_success": bool(outcome.host_success),
        "requests": T,
        "critic_values": monitor.values[:T],
        "wall_s": time.monotonic() - started,
        "chosen_candidates": [chosen.get(t) for t in range(1, T + 1)] if chosen else [],
        "candidate_probs": [candidate_probs.get(t) for t in range(1, T + 1)] if candidate_probs else [],
    }
    usable = (outcome.end_reason not in INFRASTRUCTURE_END_REASONS and T >= 1
              and len(monitor.features) >= T and all(i in monitor.events for i in range(1, T + 1)))
    out["degenerate_start"] = monitor.degenerate
    out["usable"] = usable and monitor.degenerate is None
    if not out["usable"]:
        return out
    records, tokens = [], []
    has_tokens = True
    for t in range(1, T + 1):
        ev = monitor.events[t]
        rr = ev.get("request_record") or {}
        physical = int(rr.get("physical_actions", 0))
        records.append({
            "physical_actions": physical,
            "failed_actions": min(int(rr.get("failed_actions", 0)), physical),
            "python_error_only": bool(rr.get("python_error_only", False)),
            "solved_before": bool(monitor.snapshots[t - 1].success),
            "accepted_finish": bool(rr.get("accepted_finish", False)),
        })
        comp, lps = ev.get("completion_token_ids"), ev.get("logprobs")
        if t not in versions:
            has_tokens = False
        if comp is not None and lps is not None and len(comp) == len(lps):
            tokens.append({"prompt_token_ids": list(ev.get("prompt_token_ids") or []),
                           "completion_token_ids": list(comp), "completion_logprobs": [float(x) for x in lps],
                           "policy_version": int(versions.get(t, 0)), "images": list(images.get(t, []))})
        else:
            tokens.append({"prompt_token_ids": [], "completion_token_ids": [], "completion_logprobs": [],
                           "policy_version": int(versions.get(t, 0)), "images": []})
    out["ladder_reward"] = _ladder_reward(job, monitor.snapshots, outcome.record_dir) if job.ladder_scale > 0 else 0.0
    out["features"] = np.stack(monitor.features[:T]).tolist()
    out["request_records"] = records
    out["tokens"] = tokens if has_tokens else None
    return out


def _final_snapshot(record_dir: str) -> Any:
    """The last snapshot the runner recorded (the state after the last request), or None."""
    import json

    from captain_backends.core.snapshot import SimSnapshot

    path = Path(record_dir) / "snapshots.jsonl"
    if not path.is_file():
        return None
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    return SimSnapshot.from_dict(json.loads(lines[-1])["snapshot"]) if lines else None


def _ladder_reward(job: RolloutJob, snapshots: list[Any], record_dir: str) -> float:
    """The subgoal-ladder reward of an episode from its hidden snapshots (and the final one)."""
    from captain_training.rl.ladder import default_ladder, ladder_progress, ladder_reward

    if not snapshots:
        return 0.0
    final = _final_snapshot(record_dir)
    sequence = [*snapshots, final] if final is not None else list(snapshots)
    reset = snapshots[0]
    rungs = default_ladder(reset, reset.articulated_joint_goals)
    return ladder_reward(ladder_progress(rungs, sequence), len(rungs), job.ladder_scale)


def _limits(cls: type, job: RolloutJob) -> Any:
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    wanted = {"max_requests": job.max_requests, "max_physical_actions": job.max_physical_actions,
              "max_wall_time_s": job.max_wall_time_s}
    return cls(**{k: v for k, v in wanted.items() if k in names})


def job_to_dict(job: RolloutJob) -> dict[str, Any]:
    d = asdict(job)
    d["start"] = job.start.to_dict()
    return d


def job_from_dict(data: dict[str, Any]) -> RolloutJob:
    d = dict(data)
    d["start"] = StartState.from_dict(d["start"])
    d["early_stop"] = EarlyStopSettings(**(d.get("early_stop") or {}))
    return RolloutJob(**d)


def to_rollout_episode(collected: dict[str, Any]) -> Any:
    """The ``round.RolloutEpisode`` of a usable collected episode."""
    from captain_training.rl.round import RolloutEpisode, TokenSample

    job = collected["job"]
    tokens = None
    if collected.get("tokens") is not None:
        tokens = [TokenSample(tuple(t["prompt_token_ids"]), tuple(t["completion_token_ids"]),
                              tuple(t["completion_logprobs"]), int(t["policy_version"]),
                              tuple(t.get("images") or ()))
                  for t in collected["tokens"]]
    return RolloutEpisode(
        episode_key=job["episode_key"], group_key=job["group_key"], task_id=job["start"]["task"],
        features=np.asarray(collected["features"], dtype=float),
        requests=[RequestRecord(**r) for r in collected["request_records"]],
        tokens=tokens, host_success=bool(collected["host_success"]),
        termination=collected["termination"], sft_median_actions=job.get("sft_median_actions"),
        ladder_reward=float(collected.get("ladder_reward", 0.0)),
        monitor=bool(job.get("monitor", False)),
    )


def records_root(run_dir: str | Path, round_index: int) -> Path:
    """Where a round's episode records go."""
    return Path(run_dir) / "rollouts" / f"round_{round_index:06d}"
