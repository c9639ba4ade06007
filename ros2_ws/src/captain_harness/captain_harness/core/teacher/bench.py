"""Benchmark of the teacher (``run(**options) -> dict[str, float]``): success and speed of
teacher rollouts on LIBERO through the whole harness, as ``captain rollout --policy
teacher`` measures them.

Figures: host and strict success (fractions), false finishes, mean requests and
physical actions per episode, mean episode wall time (s), episodes per hour per core,
and the median harness time per request (s, everything but the policy, the robot and
the cell's own code).
"""

from __future__ import annotations

import tempfile
from typing import Any

TEACHER = "captain_harness.core.teacher.policy:make_teacher"


def run(suite: str = "libero_spatial", tasks: str = "0-1", states: str = "11", workers: int = 1,
        seed: int = 0, out_dir: str | None = None, **_: Any) -> dict[str, float]:
    """Roll the teacher out on ``suite``/``tasks`` x ``states`` (e.g. ``tasks="0-9",
    states="11-16"`` for the held-out official states) and return the figures."""
    from captain_harness.core.episode.policy.registry import PolicySpec, available_policies
    from captain_harness.core.episode.runner import parse_range, rollout, suite_tasks

    name = "teacher" if "teacher" in available_policies() else TEACHER
    with tempfile.TemporaryDirectory(prefix="captain-teacher-bench-") as tmp:
        summary = rollout(suite_tasks(suite, tasks), parse_range(states), policy=PolicySpec(name, {"seed": seed}),
                          out_dir=out_dir or tmp, workers=workers)
    median = summary.get("harness_s_per_request_median")
    return {
        "episodes": float(summary["episodes"]),
        "host_success_fraction": float(summary["host_success"]),
        "strict_success_fraction": float(summary["strict_success"]),
        "false_finish_fraction": float(summary["false_finish"]),
        "mean_requests": float(summary["mean_requests"]),
        "mean_physical_actions": float(summary["mean_physical_actions"]),
        "mean_episode_wall_s": float(summary["mean_wall_time_s"]),
        "episodes_per_hour_per_core": float(summary["episodes_per_hour_per_core"]),
        "harness_s_per_request_median": float(median) if median is not None else float("nan"),
    }
