"""The simulator critic: ensemble maths, files, metrics, and learning from episodes with injected failures."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from captain_training.rl.critic import (
    CriticConfig,
    SimulatorCritic,
    cotrain_critic,
    evaluate_critic,
    load_critic,
    load_optimizer,
    save_critic,
    train_critic,
)
from captain_training.rl.critic_data import CriticDataset, read_jsonl, split_by_episode, write_jsonl
from captain_training.rl.critic_metrics import (
    brier_score,
    expected_calibration_error,
    reliability_bins,
    roc_auc,
    within_group_auc,
)
from captain_training.rl.errors import CriticError
from captain_training.rl.features import episode_features
from captain_training.rl.synthetic_episodes import DEFAULT_TASKS, episode_dataset, generate_episodes

TASKS = tuple(t.task_id for t in DEFAULT_TASKS)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Small models run faster on one thread than on two busy cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_logits_are_averaged_before_the_sigmoid():
    critic = SimulatorCritic(CriticConfig(task_ids=("a", "b"), n_members=2, hidden_units=8, hidden_layers=1))
    last = critic.layers[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias[0].fill_(2.0)
        last.bias[1].fill_(-1.0)
    v = critic.value(np.zeros((3, 36)), [1, 2, 3], ["a", "b", "a"])
    # sigmoid((2 + -1) / 2) = sigmoid(0.5), not the mean of sigmoid(2) and sigmoid(-1)
    assert v == pytest.approx([1.0 / (1.0 + math.exp(-0.5))] * 3)


def test_input_layout_and_errors():
    critic = SimulatorCritic(CriticConfig(task_ids=("a", "b", "c"), hidden_units=8))
    critic.fit_normalizer(np.ones((4, 36)) * np.arange(36), np.array([1, 2, 3, 4]))
    z = critic.encode(np.ones((2, 36)) * np.arange(36), [1, 4], "b")
    assert z.shape == (2, 36 + 1 + 3)
    assert torch.equal(z[:, 37:], torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]))
    assert torch.allclose(z[:, :36], torch.zeros(2, 36))  # constant columns: centred, std kept at 1
    t_std = float(np.std([1, 2, 3, 4]))
    assert z[:, 36].tolist() == pytest.approx([(1 - 2.5) / t_std, (4 - 2.5) / t_std])
    with pytest.raises(CriticError, match="not in the critic's task vocabulary"):
        critic.value(np.zeros((1, 36)), 1, "libero_10/9")
    with pytest.raises(CriticError, match="36"):
        critic.value(np.zeros((1, 35)), 1, "a")


def test_save_load_roundtrip_is_atomic_and_complete(tmp_path):
    rng = np.random.default_rng(0)
    data = CriticDataset(rng.normal(size=(64, 36)), rng.integers(1, 30, 64), ["a"] * 64,
                         rng.integers(0, 2, 64), [f"e{i // 8}" for i in range(64)])
    critic = SimulatorCritic(CriticConfig(task_ids=("a",), hidden_units=16, n_members=3))
    opt, _ = train_critic(critic, data, epochs=2, batch_size=16)
    path = tmp_path / "critic.pt"
    save_critic(critic, path, optimizer=opt, extra={"round": 3})
    save_critic(critic, path, optimizer=opt, extra={"round": 4})  # overwrite in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["critic.pt"], "no temporary files left behind"
    loaded = load_critic(path)
    assert loaded.extra == {"round": 4}
    assert loaded.critic.config == critic.config
    assert torch.equal(loaded.critic.input_mean, critic.input_mean)
    assert torch.equal(loaded.critic.input_std, critic.input_std)
    x, t = data.features[:10], data.request_index[:10]
    assert np.array_equal(loaded.critic.value(x, t, "a"), critic.value(x, t, "a"))
    opt2 = load_optimizer(loaded.critic, loaded.optimizer_state)
    assert opt2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]
    with pytest.raises(CriticError, match="no critic checkpoint"):
        load_critic(tmp_path / "missing.pt")


def test_metrics_by_hand():
    # pairs (pos, neg): 0.35>0.1 yes, 0.35>0.4 no, 0.8>both yes -> 3/4
    assert roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    assert roc_auc([0, 1], [0.5, 0.5]) == pytest.approx(0.5)
    assert math.isnan(roc_auc([1, 1], [0.2, 0.3]))
    assert brier_score([0, 1], [0.2, 0.6]) == pytest.approx((0.04 + 0.16) / 2)
    bins = reliability_bins([0, 1, 1, 1], [0.1, 0.4, 0.6, 1.0], n_bins=2)
    assert [b.count for b in bins] == [2, 2]
    assert bins[0].mean_prediction == pytest.approx(0.25) and bins[0].fraction_positive == 0.5
    assert bins[1].mean_prediction == pytest.approx(0.8) and bins[1].fraction_positive == 1.0
    assert expected_calibration_error([0, 1, 1, 1], [0.1, 0.4, 0.6, 1.0], n_bins=2) == pytest.approx(
        (2 * 0.25 + 2 * 0.2) / 4)
    # group g1: 1 pair, AUC 1; group g2: 2 pairs, AUC 1/2; group g3 has one class only
    groups = ["g1", "g1", "g2", "g2", "g2", "g3"]
    y = [1, 0, 1, 0, 0, 1]
    p = [0.9, 0.2, 0.3, 0.5, 0.1, 0.7]
    assert within_group_auc(groups, y, p) == pytest.approx((1 * 1.0 + 2 * 0.5) / 3)
    with pytest.raises(CriticError, match="0 or 1"):
        roc_auc([0, 2], [0.1, 0.2])


def test_dataset_jsonl_roundtrip_and_split(tmp_path):
    data = episode_dataset(generate_episodes(4, seed=5))
    path = tmp_path / "states.jsonl"
    write_jsonl(data, path)
    back = read_jsonl(path)
    assert len(back) == len(data)
    assert np.allclose(back.features, data.features)
    assert back.task.tolist() == data.task.tolist()
    assert back.group is not None
    train, held = split_by_episode(back, 0.25, seed=1)
    assert set(train.episode_id.tolist()).isdisjoint(held.episode_id.tolist())
    assert len(train) + len(held) == len(back)
    (tmp_path / "bad.jsonl").write_text('{"episode_id": "e", "task": "a", "features": []}\n')
    with pytest.raises(CriticError, match="missing keys"):
        read_jsonl(tmp_path / "bad.jsonl")


def test_critic_learns_success_from_injected_failures_and_credits_grasps():
    """Warm start on scripted pick-and-place episodes with perturbed grasps and placements.

    Held-out AUC (episodes on layouts never trained on) must reach 0.85; a successful grasp
    must raise V(., t) and a perception-only request (millimetre settling jitter only) must
    leave it essentially unchanged.
    """
    torch.manual_seed(0)
    train = episode_dataset(generate_episodes(120, seed=11))
    held_episodes = generate_episodes(100, seed=200)
    held = episode_dataset(held_episodes)
    assert set(train.group.tolist()).isdisjoint(held.group.tolist())
    assert 0.2 < float(np.mean(train.host_success)) < 0.7, "the generator must produce both outcomes"
    critic = SimulatorCritic(CriticConfig(task_ids=TASKS))  # the paper's 5 x (3 x 256) ensemble
    opt, result = train_critic(critic, train, epochs=3, batch_size=256, seed=0)
    assert result.losses[-1] < result.losses[0]
    report = evaluate_critic(critic, held)
    assert report["auc"] >= 0.85, report
    assert report["brier"] < 0.2, report
    assert report["ece"] < 0.08, report

    delta: dict[str, list[float]] = {"grasp_ok": [], "grasp_failed": [], "perceive": []}
    for ep in held_episodes:
        x = episode_features(ep.snapshots, ep.snapshots[0])
        t = np.arange(1, ep.n_requests + 1)
        dv = critic.value(x[1:], t, ep.task_id) - critic.value(x[:-1], t, ep.task_id)
        for k, kind in enumerate(ep.kinds):
            if kind == "grasp":
                delta["grasp_ok" if ep.grasp_succeeded[k] else "grasp_failed"].append(dv[k])
            elif kind == "perceive":
                delta["perceive"].append(dv[k])
    grasp = float(np.median(delta["grasp_ok"]))
    perceive = float(np.median(np.abs(delta["perceive"])))
    assert grasp > 0.05, delta["grasp_ok"][:10]
    assert perceive < 0.01, perceive
    assert grasp > 10 * perceive
    assert float(np.median(delta["grasp_failed"])) < grasp

    # co-training: two full-batch AdamW steps on a new round, normaliser untouched
    mean_before = critic.input_mean.clone()
    new_round = episode_dataset(generate_episodes(8, seed=99))
    params_before = [p.detach().clone() for p in critic.parameters()]
    steps = cotrain_critic(critic, opt, new_round, steps=2)
    assert len(steps.losses) == 2
    assert torch.equal(critic.input_mean, mean_before)
    assert any(not torch.equal(a, b) for a, b in zip(params_before, critic.parameters(), strict=True))
