"""Terminal returns, per-request costs, the subgoal ladder and the stopping rules, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot
from captain_training.rl.errors import CreditError
from captain_training.rl.ladder import (
    GoalRung,
    GraspRung,
    JointRung,
    TowardGoalRung,
    default_ladder,
    ladder_applies,
    ladder_progress,
    ladder_reward,
)
from captain_training.rl.returns import (
    CostConfig,
    RequestRecord,
    Termination,
    episode_outcome_value,
    request_costs,
    terminal_return,
)
from captain_training.rl.stopping import (
    CriticEarlyStop,
    MissedFinishStop,
    critic_cut_allowed,
    in_control_slice,
)

# ---------------------------------------------------------------- terminal return (Eq. 7)


@pytest.mark.parametrize(("host", "term", "expected"), [
    (True, Termination.FINISH, 1.0),
    (False, Termination.FINISH, -0.3),
    (True, Termination.BUDGET, 0.25),
    (True, Termination.NO_TOOL_CALL, 0.25),
    (True, Termination.ERROR, 0.25),
    (True, Termination.MISSED_FINISH_STOP, 0.25),
    (False, Termination.MISSED_FINISH_STOP, 0.25),
    (False, Termination.BUDGET, -0.1),
    (False, Termination.CRITIC_CUT, -0.1),
    (True, Termination.CRITIC_CUT, -0.1),
    (False, Termination.NO_TOOL_CALL, 0.0),
    (False, Termination.ERROR, 0.0),
])
def test_terminal_return_every_case(host, term, expected):
    assert terminal_return(host, term) == expected
    assert terminal_return(host, term.value) == expected


@pytest.mark.parametrize(("host", "term", "expected"), [
    (False, Termination.NO_TOOL_CALL, 0.075),
    (False, Termination.BUDGET, 0.075),
    (False, Termination.CRITIC_CUT, 0.075),
    (False, Termination.FINISH, -0.3),   # a false finish keeps its penalty
    (True, Termination.FINISH, 1.0),
    (True, Termination.BUDGET, 0.25),
])
def test_ladder_reward_lifts_failures_only(host, term, expected):
    assert terminal_return(host, term, ladder_reward=0.075) == pytest.approx(expected)


def test_outcome_ordering_and_bad_inputs():
    success = terminal_return(True, "finish")
    missed = terminal_return(True, "budget")
    partial = terminal_return(False, "no_tool_call", ladder_reward(1, 3))
    plain = terminal_return(False, "no_tool_call")
    budget = terminal_return(False, "budget")
    false_finish = terminal_return(False, "finish")
    assert success > missed > partial > plain > budget > false_finish
    with pytest.raises(CreditError, match="valid"):
        terminal_return(True, "gave_up")
    with pytest.raises(CreditError):
        terminal_return(False, "budget", ladder_reward=-0.1)
    assert episode_outcome_value(1.0, [-0.02, 0.0, -0.008]) == pytest.approx(0.972)


# ---------------------------------------------------------------- costs (Appendix E)


def test_over_median_actions_integer_threshold():
    # median 4 -> threshold 6: actions #7 and #8 are charged
    reqs = [RequestRecord(3), RequestRecord(2), RequestRecord(2), RequestRecord(1)]
    assert request_costs(reqs, sft_median_actions=4) == pytest.approx([0, 0, -0.008, -0.008])


def test_over_median_actions_fractional_threshold():
    # median 3 -> threshold 4.5: actions #5 and #6 are charged, both in request 2
    reqs = [RequestRecord(4), RequestRecord(2)]
    assert request_costs(reqs, sft_median_actions=3) == pytest.approx([0, -0.016])
    assert request_costs(reqs, sft_median_actions=None) == pytest.approx([0, 0])


def test_failed_and_rejected_actions():
    reqs = [RequestRecord(3, failed_actions=2), RequestRecord(0), RequestRecord(1, failed_actions=1)]
    assert request_costs(reqs, None) == pytest.approx([-0.04, 0, -0.02])
    with pytest.raises(CreditError, match="cannot exceed"):
        RequestRecord(1, failed_actions=2)


def test_post_success_costs_and_finishing_request():
    reqs = [
        RequestRecord(2),                                  # not solved yet
        RequestRecord(1, solved_before=True),              # -0.005 - 0.008
        RequestRecord(0, solved_before=False),             # solved earlier: still charged -0.005
        RequestRecord(0, solved_before=True, accepted_finish=True),  # the finish itself: free
    ]
    assert request_costs(reqs, None) == pytest.approx([0, -0.013, -0.005, 0])
    charged = request_costs(reqs, None, CostConfig(charge_finishing_request=True))
    assert charged == pytest.approx([0, -0.013, -0.005, -0.005])
    finish_with_motion = [RequestRecord(1, solved_before=True, accepted_finish=True)]
    assert request_costs(finish_with_motion, None) == pytest.approx([-0.013])


def test_post_success_cap_only_caps_post_success_costs():
    reqs = [RequestRecord(1, solved_before=True) for _ in range(40)] + [
        RequestRecord(1, failed_actions=1, solved_before=True)]
    costs = request_costs(reqs, None)
    # 34 requests of -0.013 = -0.442, the 35th is cut to -0.008, then nothing
    assert costs[:34] == pytest.approx([-0.013] * 34)
    assert costs[34] == pytest.approx(-0.008)
    assert costs[35:40] == pytest.approx([0.0] * 5)
    assert costs[:40].sum() == pytest.approx(-0.45)
    assert costs[40] == pytest.approx(-0.02)  # the failed-action cost is not capped
    assert np.all(costs <= 0.0)


def test_cost_config_refuses_rewards():
    with pytest.raises(CreditError, match="<= 0"):
        CostConfig(failed_action_cost=0.02)


# ---------------------------------------------------------------- subgoal ladder

UP = (1.0, 0.0, 0.0, 0.0)


def _snap(bowl_xyz, ee_xyz, goal_ok=False, drawer=0.0) -> SimSnapshot:
    return SimSnapshot(
        time_s=0.0, ee_position_m=ee_xyz, gripper_open_fraction=0.3,
        object_poses={"bowl": ObjectPose(bowl_xyz, UP), "plate": ObjectPose((0.3, 0.0, 0.90), UP)},
        initial_object_poses={"bowl": ObjectPose((0.0, 0.0, 0.90), UP),
                              "plate": ObjectPose((0.3, 0.0, 0.90), UP)},
        goals=(GoalPredicate("on", ("bowl", "plate"), goal_ok, involves_contact=True),
               GoalPredicate("open", ("cabinet_top_region",), False, involves_joint=True)),
        target_object="bowl", destination="plate", goal_position_m=(0.3, 0.0, 0.92),
        articulated_joints={"cabinet_top_joint": drawer},
        initial_articulated_joints={"cabinet_top_joint": 0.0},
    )


def test_rung_thresholds():
    grasp = GraspRung("bowl")
    assert grasp.reached(_snap((0.0, 0.0, 0.96), (0.0, 0.0, 1.01)))      # lifted 6 cm, ee 5 cm away
    assert not grasp.reached(_snap((0.0, 0.0, 0.94), (0.0, 0.0, 0.99)))  # lifted 4 cm
    assert not grasp.reached(_snap((0.0, 0.0, 0.96), (0.0, 0.2, 0.96)))  # ee 20 cm away
    joint = JointRung("cabinet_top_joint", goal_position=0.2)
    assert joint.reached(_snap((0, 0, 0.9), (0, 0, 1), drawer=0.05))      # 25 % of the way
    assert not joint.reached(_snap((0, 0, 0.9), (0, 0, 1), drawer=0.03))  # 15 %
    closing = JointRung("cabinet_top_joint", goal_position=-1.0)
    assert closing.reached(_snap((0, 0, 0.9), (0, 0, 1), drawer=-0.3))
    toward = TowardGoalRung("bowl", (0.3, 0.0, 0.90))
    assert toward.reached(_snap((0.2, 0.0, 0.90), (0, 0, 1)))   # 0.3 m -> 0.1 m
    assert not toward.reached(_snap((0.1, 0.0, 0.90), (0, 0, 1)))  # 0.3 m -> 0.2 m
    with pytest.raises(CreditError, match="out of range"):
        GoalRung(5).reached(_snap((0, 0, 0.9), (0, 0, 1)))


def test_ladder_is_monotone_one_shot_and_place_must_hold():
    rungs = [GraspRung("bowl"), GoalRung(0)]
    start = _snap((0.0, 0.0, 0.90), (0.0, 0.0, 1.2))
    lifted = _snap((0.0, 0.0, 0.98), (0.0, 0.0, 1.02))
    placed = _snap((0.3, 0.0, 0.92), (0.3, 0.0, 1.1), goal_ok=True)
    fell_off = _snap((0.4, 0.0, 0.90), (0.3, 0.0, 1.1), goal_ok=False)
    assert ladder_progress(rungs, [start, lifted, placed, placed]) == 2
    assert ladder_progress(rungs, [start, lifted, placed, fell_off]) == 1  # the place did not hold
    assert ladder_progress(rungs, [start, lifted, start]) == 1  # a grasp need not hold
    # the place rung seen before any grasp does not count (monotone ladder)
    assert ladder_progress(rungs, [placed, start, lifted]) == 1
    assert ladder_progress(rungs, []) == 0


def test_ladder_reward_values_and_hard_tasks():
    assert ladder_reward(2, 3) == pytest.approx(0.075)
    assert ladder_reward(3, 3) == pytest.approx(0.1125)
    assert ladder_reward(0, 4) == 0.0
    with pytest.raises(CreditError):
        ladder_reward(4, 3)
    assert ladder_applies("libero_10/3", 9)
    assert not ladder_applies("libero_10/3", 8)
    assert not ladder_applies("libero_10/0", 20)
    assert ladder_applies("libero_goal/7", 100)


def test_default_ladder_from_goals():
    snap = _snap((0.0, 0.0, 0.90), (0.0, 0.0, 1.2))
    # grasp, toward the goal (must hold at the end), place; then the joint goal
    assert default_ladder(snap) == [GraspRung("bowl"), TowardGoalRung("bowl", (0.3, 0.0, 0.92)), GoalRung(0),
                                    GoalRung(1)]
    with_joint = default_ladder(snap, joint_goals={"cabinet_top_joint": 0.15})
    assert with_joint[3] == JointRung("cabinet_top_joint", 0.15)
    # carried half-way and put down there: grasp and toward-goal count; dropped back: only the grasp
    start = _snap((0.0, 0.0, 0.90), (0.0, 0.0, 1.2))
    lifted = _snap((0.0, 0.0, 0.98), (0.0, 0.0, 1.02))
    halfway = _snap((0.2, 0.0, 0.90), (0.2, 0.0, 1.1))
    ladder = default_ladder(start)
    assert ladder_progress(ladder, [start, lifted, halfway, halfway]) == 2
    assert ladder_progress(ladder, [start, lifted, halfway, start]) == 1


# ---------------------------------------------------------------- stopping rules


def test_control_slice_is_deterministic_and_about_five_percent():
    keys = [f"round3/group{g}/rollout{r}" for g in range(2500) for r in range(4)]
    picks = [in_control_slice(k) for k in keys]
    assert picks == [in_control_slice(k) for k in keys]
    assert 0.04 < np.mean(picks) < 0.06
    assert not any(in_control_slice(k, 0.0) for k in keys[:100])
    assert all(in_control_slice(k, 1.0) for k in keys[:100])
    assert not critic_cut_allowed("ep-1", "libero_10/3")  # hard task
    key = next(k for k in keys if in_control_slice(k))
    assert not critic_cut_allowed(key, "libero_spatial/0")


def test_critic_cut_after_request_five():
    rule = CriticEarlyStop()
    cut_at = [t for t in range(1, 20) if rule.observe(t, 0.01)]
    assert cut_at[0] == 10  # requests 6..10 are the five counted ones
    rule = CriticEarlyStop()
    values = {8: 0.5}  # a confident request resets the run
    cut_at = [t for t in range(1, 20) if rule.observe(t, values.get(t, 0.01))]
    assert cut_at[0] == 13
    rule = CriticEarlyStop()
    assert not any(rule.observe(t, 0.02) for t in range(1, 30))  # not strictly below
    off = CriticEarlyStop(enabled=False)
    assert not any(off.observe(t, 0.0) for t in range(1, 30))
    with pytest.raises(CreditError, match="increase"):
        rule.observe(3, 0.0)


def test_missed_finish_stop_after_fifteen_requests():
    rule = MissedFinishStop()
    held = [False, False] + [True] * 20  # goals first hold on s_3
    fired = [t for t, ok in enumerate(held, start=1) if rule.observe(ok)]
    assert fired[0] == 18  # requests 3..17 ran with the goals held; stop before request 18
    rule = MissedFinishStop()
    held = [True] * 10 + [False] + [True] * 16
    fired = [t for t, ok in enumerate(held, start=1) if rule.observe(ok)]
    assert fired[0] == 27

