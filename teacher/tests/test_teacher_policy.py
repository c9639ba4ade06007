"""The teacher as a policy client: built by name, options checked, styles drawn
reproducibly, and a clean stop (no exception, a reason in the reply) on a backend that has
no simulator snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from captain_harness.core.episode.policy.base import PolicyClient
from captain_harness.core.episode.policy.registry import make_policy
from captain_harness.core.episode.prompt import instruction_of, task_request_text
from captain_harness.core.episode.runner import run_episode
from captain_teacher import TeacherPolicy
from captain_teacher.style import FAILURES, MISTAKES, draw_style

FACTORY = "captain_teacher.policy:make_teacher"


def test_the_teacher_is_built_by_name_and_wants_the_host_context() -> None:
    policy = make_policy(FACTORY, seed=4, mistake_rate=0.5, mistakes="grasp_too_high,fast_descent")
    assert isinstance(policy, PolicyClient) and isinstance(policy, TeacherPolicy)
    assert policy.wants_host_context and policy.name == "teacher"
    assert policy.mistakes == ("grasp_too_high", "fast_descent")


def test_the_instruction_is_read_back_from_the_task_request_the_harness_writes() -> None:
    text = task_request_text("  put the black bowl on the plate ")
    as_parts = [{"role": "system", "content": "complete the robot task: not this one"},
                {"role": "user", "content": [{"type": "image_url"}, {"type": "text", "text": text}]}]
    assert instruction_of(as_parts) == "put the black bowl on the plate"
    assert instruction_of([{"role": "user", "content": text}]) == "put the black bowl on the plate"
    assert instruction_of([{"role": "user", "content": "Read TASK.md."}]) == ""


@pytest.mark.parametrize("options", [{"mistake_rate": 1.5}, {"mistakes": "drop_it"}, {"failure_rate": -0.1},
                                     {"failures": "perturbed_grasp,forget_it"}])
def test_bad_options_are_refused_with_the_valid_choices(options: dict) -> None:
    with pytest.raises(ValueError) as err:
        TeacherPolicy(**options)
    text = str(err.value)
    assert "0..1" in text or all(m in text for m in MISTAKES) or all(f in text for f in FAILURES)


def test_failures_follow_their_rate_replace_mistakes_and_leave_seeded_styles_as_they_were() -> None:
    policy = make_policy(FACTORY, failure_rate="0.5", failures="perturbed_place")
    assert policy.failure_rate == 0.5 and policy.failures == ("perturbed_place",)
    for seed in range(10):  # a zero failure rate draws nothing more: the same styles as before
        assert draw_style(np.random.default_rng(seed), 0.3) == draw_style(np.random.default_rng(seed), 0.3,
                                                                            MISTAKES, 0.0, FAILURES)
    styles = [draw_style(np.random.default_rng(s), 1.0, MISTAKES, 1.0, FAILURES) for s in range(20)]
    assert all(s.failure in FAILURES and s.mistake is None for s in styles)
    assert {s.failure for s in styles} == set(FAILURES)
    some = [draw_style(np.random.default_rng(s), 0.0, MISTAKES, 0.3, FAILURES).failure for s in range(200)]
    assert 30 < sum(f is not None for f in some) < 90


def test_styles_are_reproducible_and_mistakes_follow_the_rate() -> None:
    a = draw_style(np.random.default_rng(7), 0.0)
    b = draw_style(np.random.default_rng(7), 0.0)
    assert a == b and a.mistake is None
    styles = [draw_style(np.random.default_rng(s), 1.0, ("release_off_target",)) for s in range(5)]
    assert all(s.mistake == "release_off_target" for s in styles)
    assert len({(s.approach_speed_m_s, s.hover_m, s.carry_speed_m_s, s.finish_inline) for s in
                (draw_style(np.random.default_rng(s)) for s in range(30))}) > 5


@pytest.mark.sim
def test_on_a_task_without_goals_the_teacher_looks_then_stops_and_says_why(tmp_path: Path) -> None:
    outcome = run_episode("mock/empty", policy=TeacherPolicy(seed=0), out_dir=tmp_path)
    assert outcome.error is None and outcome.end_reason == "no_tool_call" and outcome.requests == 2
    assert not outcome.finished and outcome.physical_actions == 0
    events = [json.loads(line) for line in (Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()]
    first = events[0]["cells"][0]
    assert first["code"].startswith("def val(") and "observe: ok" in first["output"]
    assert "no goal predicates" in events[1]["content"] and not events[1]["cells"]
