"""``captain eval run``: a policy over (suite, task, initial state) triples on the episode runner.

Every triple is one episode of ``captain_harness``'s ``rollout`` (the same loop, sandbox,
completion gate and host success predicate as training and data collection; no critic
cut, no early stop). Each episode becomes one line of the result JSONL that
``captain eval compare`` pairs on identical triples::

    {"suite": "libero_goal", "task_id": "libero_goal/3", "init_state": 11,
     "host_success": true, "strict_success": false, "false_finish": false,
     "requests": 23, "physical_actions": 14, "end_reason": "no_tool_call", ...}

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
              "outcome", "wall_time_s", "episode_id", "policy", "gate_rejections", "record_dir")


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


def result_line(outcome: dict[str, Any]) -> dict[str, Any] | None:
    """The result line of one episode outcome (None for an infrastructure failure)."""
    if outcome.get("outcome") == "infrastructure_failure" or outcome.get("host_success") is None:
        return None
    row = {"suite": outcome["suite"], "task_id": outcome["task"], "init_state": int(outcome["init_state"]),
           "host_success": bool(outcome["host_success"]), "strict_success": bool(outcome["strict_success"])}
    row.update({k: outcome.get(k) for k in EXTRA_KEYS if k in outcome})
    return row


def run_evaluation(spec: EvalSpec, out: str | Path) -> dict[str, Any]:
    """Run every (task, state) episode once, write the result JSONL, return the summary."""
    from captain_harness.core.budget import BudgetLimits
    from captain_harness.core.episode.policy.registry import PolicySpec
    from captain_harness.core.episode.runner import EpisodeConfig, parse_range, rollout, suite_tasks

    task_list = suite_tasks(spec.suite, spec.tasks)
    state_list = parse_range(spec.states)
    if not state_list:
        raise ValueError(f"no initial states in {spec.states!r}; give e.g. 11-16")
    config = EpisodeConfig(limits=BudgetLimits(spec.max_requests, spec.max_physical_actions, spec.max_wall_time_s),
                           subset="eval")
    backend = spec.backend or "captain_training.rl.backends:official_backend"
    summary = rollout(task_list, state_list, policy=PolicySpec(spec.policy, dict(spec.policy_options)),
                      out_dir=spec.records, backend_factory=backend, workers=spec.workers, config=config)
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
