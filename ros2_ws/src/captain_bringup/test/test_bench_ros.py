"""`captain bench ros`'s bookkeeping: how episodes split into interleaved rounds, and how
the rounds' batches add up to the figures (the episodes themselves run in
tests/ros/test_rollout_stacks_e2e.py)."""

from __future__ import annotations

import pytest

from captain_bringup.bench_ros import _episode_figures, _round_states


def test_rounds_split_the_states_contiguously_and_never_leave_one_empty() -> None:
    assert _round_states(8, 4) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert _round_states(5, 2) == [[0, 1, 2], [3, 4]]
    assert _round_states(3, 4) == [[0], [1], [2]]  # more rounds than episodes
    assert [s for share in _round_states(7, 3) for s in share] == list(range(7))


def _batch(walls: list[float], success: list[bool]) -> dict:
    outcomes = [{"outcome": "success" if s else "failure", "strict_success": s, "host_success": s,
                 "requests": 6, "wall_time_s": w} for w, s in zip(walls, success, strict=True)]
    return {"outcomes": outcomes, "wall_s": sum(walls)}


def test_rates_are_over_the_summed_wall_time_of_each_way() -> None:
    batches = {"ros": [_batch([4.0, 4.0], [True, True]), _batch([2.0, 2.0], [True, False])],
               "in_process": [_batch([3.0, 3.0], [True, True]), _batch([2.0, 2.0], [True, False])]}
    figures = _episode_figures(batches, 4)
    assert figures["episodes_per_hour_ros"] == pytest.approx(3600 * 4 / 12.0)
    assert figures["episodes_per_hour_in_process"] == pytest.approx(3600 * 4 / 10.0)
    assert figures["episodes_per_hour_ratio_ros"] == pytest.approx(10.0 / 12.0, abs=1e-3)
    # per round: 6/8 and 4/4, not the mean of per-episode rates
    assert figures["episodes_per_hour_ratio_ros_min"] == pytest.approx(0.75)
    assert figures["episodes_per_hour_ratio_ros_max"] == pytest.approx(1.0)
    assert figures["strict_success_ros"] == 0.75 and figures["rounds"] == 2.0
