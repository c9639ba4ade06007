"""``captain eval run``: a policy over (suite, task, initial state) triples on the episode runner.

Every triple is one episode of ``captain_harness``'s ``rollout`` (the same loop, sandbox,
completion gate and host success predicate as training and data collection; no critic
cut, no early stop). Each episode becomes one line of the result JSONL that
``captain eval compare`` pairs on identical triples::

    {"suite": "libero_goal", "task_id": "libero_goal/3", "init_state": 11,
     "host_success": true, "strict_success": false, "false_finish": false,
     "requests": 23, "physical_actions": 14, "end_reason": "no_tool_call", ...}

With ``stacks`` (``captain eval run --stacks /robot1,/robot2``) the episodes go to running
bringups' ``run_episode`` actions instead (see ``_stack_rollout``).

Episodes that ended in an infrastructure failure (policy server unreachable, harness
error) have no outcome to compare; they are counted in the summary and left out of the
file, so ``compare`` reports their triples as unpaired instead of as failures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Outcome keys kept in each result line besides the required ones.
EXTRA_KEYS = ("false_finish", "missed_finish", "budget_exhausted", "requests", "physical_actions", "end_reason",
              "outcome", "wall_time_s", "episode_id", "policy", "gate_rejections", "record_dir", "seed",
              "perturbation")


@dataclass
class EvalSpec:
    """What to evaluate (see ``captain eval run --help``)."""

    suite: str
    tasks: str | None = None
    states: str = "11-16"
    policy: str = "openai"
    policy_options: dict[str, Any] = field(default_factory=dict)
    records: str = "runs/eval"
    workers: int = 1
    backend: str | None = None
    max_requests: int = 60
    max_physical_actions: int = 150
    max_wall_time_s: float = 1080.0
    #: running stacks' namespaces (``--stacks``): the episodes go to their ``run_episode`` actions.
    stacks: tuple[str, ...] = ()
    #: harness prompt before TASK.md (None: the harness's own), history compaction threshold in
    #: estimated prompt tokens (None: the harness default), and TASK.md sections the policy sees
    #: (None: all; else ``datagen.compact.compact_system_policy`` compacts each request).
    system_prompt: str | None = None
    compact_at_tokens: int | None = None
    task_md_sections: tuple[str, ...] | None = None
    #: starts: ``official|wide|pro_swap|pro_shift``, seeds of randomized starts (None: the official
    #: ``states``) and driver config options (see ``captain_harness.core.episode.starts``).
    layout: str = "official"
    seeds: str | None = None
    driver_options: dict[str, Any] = field(default_factory=dict)


def result_line(outcome: dict[str, Any]) -> dict[str, Any] | None:
    """The result line of one episode outcome (None for an infrastructure failure)."""
    if outcome.get("outcome") == "infrastructure_failure" or outcome.get("host_success") is None:
        return None
    start = int(outcome["init_state"])
    if start < 0 and outcome.get("seed") is not None:  # a randomized start, named by its seed
        start = f"seed-{int(outcome['seed'])}"
    row = {"suite": outcome["suite"], "task_id": outcome["task"], "init_state": start,
           "host_success": bool(outcome["host_success"]), "strict_success": bool(outcome["strict_success"])}
    row.update({k: outcome.get(k) for k in EXTRA_KEYS if k in outcome})
    return row


def _stack_rollout(spec: EvalSpec) -> Any:
    """``rollout`` on the running stacks of ``spec.stacks`` (``captain rollout --stacks``:
    one episode per stack at a time, a progress bar per stack, a failed stack's episode
    retried on another). Settings the episode action does not carry are refused, none is
    ignored: a stack's robot is its harness's driver (no ``backend``), it runs one episode
    at a time (no ``workers``), and it takes no system prompt, compaction threshold,
    TASK.md sections, randomized layouts or driver options (official initial states only)."""
    for name, default in (("workers", 1), ("backend", None), ("system_prompt", None), ("compact_at_tokens", None),
                          ("task_md_sections", None), ("layout", "official"), ("seeds", None),
                          ("driver_options", {})):
        if getattr(spec, name, default) != default:
            raise ValueError(f"{name.replace('_', '-')} cannot be combined with --stacks (the stacks' episode "
                             "action does not take it)")

    def on_stacks(tasks: Any, states: Any, *, policy: Any, out_dir: Any, config: Any, **_refused_above: Any) -> Any:
        from captain_harness.core.episode.cli import rollout_stacks

        return rollout_stacks(list(tasks), list(states), stacks=list(spec.stacks), policy=policy,
                              out_dir=Path(out_dir), episodes=len(tasks) * len(states), config=config)

    return on_stacks


def run_evaluation(spec: EvalSpec, out: str | Path) -> dict[str, Any]:
    """Run every (task, state) episode once, write the result JSONL, return the summary."""
    from captain_harness.core.budget import BudgetLimits
    from captain_harness.core.episode.errors import EpisodeError
    from captain_harness.core.episode.history import HistoryConfig
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.runner import EpisodeConfig, rollout
    from captain_harness.core.episode.starts import plan_starts

    try:
        plan = plan_starts(spec.suite, spec.tasks, spec.states, layout=spec.layout, seeds=spec.seeds,
                           driver_options=spec.driver_options)
    except EpisodeError as exc:
        raise ValueError(str(exc)) from exc
    task_list, state_list = plan.tasks, plan.states
    history = HistoryConfig() if spec.compact_at_tokens is None else HistoryConfig(
        compact_at_tokens=spec.compact_at_tokens)
    config = EpisodeConfig(limits=BudgetLimits(spec.max_requests, spec.max_physical_actions, spec.max_wall_time_s),
                           subset="eval", history=history, system_prompt=spec.system_prompt)
    if spec.stacks:
        rollout = _stack_rollout(spec)  # the same call, on the stacks
    backend = spec.backend or "captain_training.rl.backends:official_backend"
    policy = PolicySpec(spec.policy, dict(spec.policy_options))
    if spec.task_md_sections is not None:
        policy = PolicySpec("captain_training.datagen.compact:compact_system_policy",
                            {**policy.options, "inner": policy.name, "keep_sections": list(spec.task_md_sections)})
    summary = rollout(task_list, state_list, policy=policy,
                      out_dir=spec.records, backend_factory=backend, workers=spec.workers, config=config,
                      seeds=plan.seeds, driver_options=plan.driver_options)
    lines = [r for r in (result_line(o) for o in summary["outcomes"]) if r is not None]
    lines.sort(key=lambda r: (r["task_id"], r["init_state"]))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in lines))
    tmp.replace(path)
    result = {k: v for k, v in summary.items() if k != "outcomes"}
    result.update({"results": str(path), "result_lines": len(lines)})
    return result
