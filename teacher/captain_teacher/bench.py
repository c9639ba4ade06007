"""Benchmark of the teacher (``run(**options) -> dict[str, float]``): success and speed of
teacher rollouts on LIBERO through the whole harness, as ``captain rollout --policy
teacher`` measures them.

Figures: host and strict success rates (fractions of the episodes), false finishes, mean
requests and physical actions per episode, mean episode wall time (s), episodes per hour
per core, and the median harness time per request (s: everything but the policy, the
robot and the cell's own code). With ``per_task=True`` also the host and strict success
rate of every task (``<suite>_<index>_host_success_rate``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

TEACHER = "captain_teacher.policy:make_teacher"


def run(suite: str = "libero_spatial", tasks: str = "0-1", states: str = "11", workers: int = 1,
        seed: int = 0, out_dir: str | None = None, per_task: bool = False) -> dict[str, float]:
    """Roll the teacher out on ``suite``/``tasks`` x ``states`` and return the figures.

    Args:
        suite: a LIBERO suite (``libero_spatial``, ``libero_object``, ``libero_goal``, ``libero_10``).
        tasks: task indices, e.g. ``"0-9"`` or ``"3,5,9"``.
        states: official initial states, e.g. ``"11-16"`` (the held-out ones).
        workers: parallel worker processes (one core each).
        seed: the teacher's seed (its style choices per episode).
        out_dir: where the records go (a temporary folder, removed afterwards, when None).
        per_task: also report each task's success rates.
    """
    from captain_harness.core.episode.policy.registry import PolicySpec, available_policies
    from captain_harness.core.episode.runner import parse_range, rollout, suite_tasks

    name = "teacher" if "teacher" in available_policies() else TEACHER
    with tempfile.TemporaryDirectory(prefix="captain-teacher-bench-") as tmp:
        root = out_dir or tmp
        summary = rollout(suite_tasks(suite, str(tasks)), parse_range(str(states)),
                          policy=PolicySpec(name, {"seed": int(seed)}), out_dir=root, workers=int(workers))
        tasks_figures = _per_task(Path(root)) if _truthy(per_task) else {}
    median = summary.get("harness_s_per_request_median")
    return {
        "episodes": float(summary["episodes"]),
        "teacher_host_success_rate": float(summary["host_success"]),
        "teacher_strict_success_rate": float(summary["strict_success"]),
        "teacher_false_finish_rate": float(summary["false_finish"]),
        "teacher_mean_requests": float(summary["mean_requests"]),
        "teacher_mean_physical_actions": float(summary["mean_physical_actions"]),
        "teacher_mean_episode_wall_s": float(summary["mean_wall_time_s"]),
        "teacher_episodes_per_hour_per_core": float(summary["episodes_per_hour_per_core"]),
        "harness_s_per_request_median": float(median) if median is not None else float("nan"),
        **tasks_figures,
    }


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


def _per_task(root: Path) -> dict[str, float]:
    """Host and strict success rate per task from the outcomes under ``root``."""
    counts: dict[str, list[int]] = {}
    for path in sorted(root.glob("episodes/*/outcome.json")):
        outcome = json.loads(path.read_text(encoding="utf-8"))
        key = str(outcome.get("task", path.parent.name)).replace("/", "_")
        c = counts.setdefault(key, [0, 0, 0])
        c[0] += 1
        c[1] += bool(outcome.get("host_success"))
        c[2] += bool(outcome.get("strict_success"))
    out: dict[str, float] = {}
    for key, (n, host, strict) in counts.items():
        out[f"{key}_host_success_rate"] = host / n
        out[f"{key}_strict_success_rate"] = strict / n
    return out
