"""delta_t, GAE, the group term, the running-std normaliser and error masking, by hand (Eq. 5-6, 9-10)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from captain_training.rl.advantages import (
    AdvantageConfig,
    EpisodeCreditInput,
    compute_advantages,
    critic_values,
    gae,
    td_residuals,
)
from captain_training.rl.critic import CriticConfig, SimulatorCritic
from captain_training.rl.errors import CreditError
from captain_training.rl.normalizer import RunningStd

# Episode 1 (T = 3): c = [0, -0.02, 0], V(s_t,t) = [0.5, 0.4, 0.7], V(s_2,1) = 0.45, V(s_3,2) = 0.8, R = 1
#   delta = [0.45-0.5, -0.02+0.8-0.4, 1-0.7] = [-0.05, 0.38, 0.30]
#   GAE   = [-0.05+0.9*0.65, 0.38+0.9*0.3, 0.3] = [0.535, 0.65, 0.30]; mean 0.495
#   G = 0.98
# Episode 2 (T = 2): c = [0, 0], V = [0.5, 0.2], V(s_2,1) = 0.3, R = 0
#   delta = [-0.2, -0.2], GAE = [-0.38, -0.2]; mean -0.29; G = 0
# Group mean G = 0.49 -> raw A1 = 0.49 + [0.04, 0.155, -0.195], A2 = -0.49 + [-0.09, 0.09]
EP1 = EpisodeCreditInput("start-7", np.array([0.0, -0.02, 0.0]), 1.0, np.array([0.5, 0.4, 0.7]),
                         np.array([0.45, 0.8]))
EP2 = EpisodeCreditInput("start-7", np.array([0.0, 0.0]), 0.0, np.array([0.5, 0.2]), np.array([0.3]))
RAW1 = [0.53, 0.645, 0.295]
RAW2 = [-0.58, -0.40]


def test_td_residuals_and_gae_by_hand():
    d = td_residuals(EP1.costs, EP1.values_now, EP1.values_next, EP1.terminal_return)
    assert d == pytest.approx([-0.05, 0.38, 0.30])
    assert gae(d, 0.9) == pytest.approx([0.535, 0.65, 0.30])
    assert gae(d, 0.0) == pytest.approx(d)
    assert gae(d, 1.0) == pytest.approx([0.63, 0.68, 0.30])  # undiscounted return-to-go
    with pytest.raises(CreditError, match="V\\(s_\\(t\\+1\\),t\\)"):
        td_residuals([0, 0], [0.5, 0.5], [], 1.0)


def test_group_relative_advantages_by_hand():
    out = compute_advantages([EP1, EP2])
    assert out[0].outcome == pytest.approx(0.98)
    assert out[1].outcome == pytest.approx(0.0)
    assert out[0].raw == pytest.approx(RAW1)
    assert out[1].raw == pytest.approx(RAW2)
    assert out[0].advantages == pytest.approx(RAW1)  # no normaliser: raw


def test_running_std_division_without_recentring():
    norm = RunningStd()
    out = compute_advantages([EP1, EP2], normalizer=norm)
    allraw = np.array(RAW1 + RAW2)
    # mean 0.098; squared deviations sum to 1.23233 over 5 values
    std = math.sqrt(1.23233 / 5)
    assert norm.std == pytest.approx(std)
    assert out[0].advantages == pytest.approx(np.array(RAW1) / std)
    assert out[1].advantages == pytest.approx(np.array(RAW2) / std)
    mean_after = np.mean(np.concatenate([o.advantages for o in out]))
    assert mean_after == pytest.approx(0.098 / std)  # not re-centred
    assert np.concatenate([o.advantages for o in out]) == pytest.approx(allraw / std)


def test_python_error_only_requests_get_no_positive_credit():
    ep1 = EpisodeCreditInput(EP1.group_key, EP1.costs, 1.0, EP1.values_now, EP1.values_next,
                             np.array([False, True, False]))
    ep2 = EpisodeCreditInput(EP2.group_key, EP2.costs, 0.0, EP2.values_now, EP2.values_next,
                             np.array([True, False]))
    out = compute_advantages([ep1, ep2], config=AdvantageConfig(python_error_penalty=0.1))
    assert out[0].advantages == pytest.approx([0.53, -0.1, 0.295])   # +0.645 -> 0 - 0.1
    assert out[1].advantages == pytest.approx([-0.68, -0.40])        # -0.58 - 0.1


def test_single_rollout_group_and_single_request_episode():
    lone = EpisodeCreditInput("alone", np.array([-0.02]), 0.25, np.array([0.9]), np.array([]))
    out = compute_advantages([lone, EP1, EP2])
    # T = 1: delta = -0.02 + 0.25 - 0.9, its centred GAE is 0, and it is its own group
    assert out[0].deltas == pytest.approx([-0.67])
    assert out[0].raw == pytest.approx([0.0])
    assert out[1].raw == pytest.approx(RAW1)  # the other group is unaffected
    no_group = compute_advantages([EP1, EP2], config=AdvantageConfig(group_term=False))
    assert no_group[0].raw == pytest.approx([0.04, 0.155, -0.195])


def test_critic_values_hold_the_request_index_fixed():
    x = np.arange(12, dtype=float).reshape(4, 3)
    calls = []

    def value_fn(f: np.ndarray, t: np.ndarray, task: str) -> np.ndarray:
        calls.append((f.copy(), t.copy(), task))
        return 0.1 * f[:, 0] + 0.01 * t

    v_now, v_next = critic_values(value_fn, x, "libero_goal/1")
    assert v_now == pytest.approx([0.1 * 0 + 0.01, 0.1 * 3 + 0.02, 0.1 * 6 + 0.03, 0.1 * 9 + 0.04])
    # V(s_{t+1}, t): the next state's features with the *earlier* index t
    assert v_next == pytest.approx([0.1 * 3 + 0.01, 0.1 * 6 + 0.02, 0.1 * 9 + 0.03])
    assert all(task == "libero_goal/1" for _, _, task in calls)


def test_unchanged_state_gets_exactly_zero_credit_from_a_time_aware_critic():
    critic = SimulatorCritic(CriticConfig(task_ids=("t",), hidden_units=16, n_members=2))
    x = np.random.default_rng(0).normal(size=(1, 36))
    feats = np.repeat(x, 5, axis=0)  # five perception-only requests: the physical state never changes
    v_now, v_next = critic_values(critic.value, feats, "t")
    assert len(set(np.round(v_now, 12))) > 1, "the critic does depend on t"
    d = td_residuals(np.zeros(5), v_now, v_next, terminal_return=0.0)
    assert np.all(d[:-1] == 0.0)


def test_running_std_merge_decay_and_state():
    a, b = [1.0, -1.0, 2.0], [0.5, 4.0]
    norm = RunningStd()
    norm.update(a)
    norm.update(b)
    assert norm.std == pytest.approx(np.std(a + b))
    decayed = RunningStd(decay=0.5)
    decayed.update([1.0, -1.0])
    decayed.update([3.0])
    # previous (n=2, M2=2) halved to (1, 1); merged with (1, mean 3, 0): mean 1.5, M2 = 1 + 9/2
    assert decayed.mean == pytest.approx(1.5)
    assert decayed.std == pytest.approx(math.sqrt(5.5 / 2))
    restored = RunningStd.from_state_dict(decayed.state_dict())
    assert restored == decayed
    assert RunningStd().std == 1.0
    with pytest.raises(CreditError, match="NaN"):
        norm.update([float("nan")])
    with pytest.raises(CreditError):
        RunningStd(decay=0.0)
