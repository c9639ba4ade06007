"""RL that measurably learns, on the real tabletop: the tiny Qwen3.5 chooses among three candidate
cells in proportion to its likelihood (one solves cube_on_plate, one moves the wrong cube, one never
closes the jaw), the harness runs the chosen cell on MuJoCo and the host predicate gives the reward.
The Eq. 8 update must raise the success rate from about one in three to >= 0.8 within two steps;
with the advantages zeroed (negative control) nothing may move."""

from __future__ import annotations

import pytest

from captain_training.rl.learning import LearningConfig, run_learning_check


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.e2e
@pytest.mark.timeout(1800)  # ~4 min on an idle 2-core machine, far more when it is shared
def test_rl_raises_tabletop_success_and_the_zero_advantage_control_does_not():
    learn = run_learning_check(LearningConfig(layouts=(101, 102), group_size=3, rounds=3))
    assert learn.success[0] <= 0.5, learn.to_dict()  # near chance: one candidate in three solves
    assert learn.success[-1] >= 0.8, learn.to_dict()
    assert learn.p_solve[-1] > learn.p_solve[0] + 0.3
    assert learn.policy_version == [1, 2, 2] and not any(learn.step_skipped)
    # credit: every success had A > 0 and every failure A < 0 where its group was mixed
    assert learn.advantage_signs_agree(), learn.advantages
    trained = [a for rows in learn.advantages[:2] for _, a in rows]
    assert any(a > 1e-6 for a in trained) and any(a < -1e-6 for a in trained)

    control = run_learning_check(LearningConfig(layouts=(101,), group_size=3, rounds=2, advantage_scale=0.0))
    assert control.step_skipped[0] and control.policy_version == [0, 0]  # zero gradient: no new policy
    # unchanged weights: p(solve) moves only with the rendered frames (1e-5 here; learning moved it by > 0.3)
    assert control.p_solve[1] == pytest.approx(control.p_solve[0], abs=1e-3)
    assert control.chosen[1] == control.chosen[0]  # same weights, same random numbers, same choices
    assert abs(control.success[1] - control.success[0]) <= 0.25 and control.success[1] < 0.8
