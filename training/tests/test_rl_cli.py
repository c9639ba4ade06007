"""`captain rl critic|train`, the RL config file, and the bench entry point."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from captain_training.rl.cli import app
from captain_training.rl.config import RLConfig, config_from_dict, load_config
from captain_training.rl.critic import load_critic
from captain_training.rl.critic_data import write_jsonl
from captain_training.rl.errors import ConfigError
from captain_training.rl.synthetic_episodes import episode_dataset, generate_episodes

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_config_defaults_follow_the_paper_and_files_validate(tmp_path):
    cfg = RLConfig()
    assert (cfg.group_size, cfg.start_states_per_round, cfg.rounds_per_step, cfg.max_staleness) == (4, 64, 4, 2)
    assert cfg.policy_loss.kl_beta == 0.002 and cfg.policy_loss.max_requests_per_episode == 8
    assert cfg.advantage.gae_lambda == 0.9
    assert cfg.early_stop.threshold == 0.02 and cfg.early_stop.missed_finish_hold_requests == 15
    assert cfg.costs.post_success_cap == -0.45
    assert cfg.excluded_init_states == (11, 12, 13, 14, 15, 16)
    path = tmp_path / "rl.yaml"
    path.write_text("seed: 3\noutput_dir: runs/x\ncritic: {steps_per_round: 3}\n"
                    "early_stop: {consecutive: 6}\nladder: {hard_tasks: [libero_10/3]}\n")
    loaded = load_config(path)
    assert loaded.seed == 3 and loaded.critic.steps_per_round == 3 and loaded.early_stop.consecutive == 6
    assert loaded.ladder.hard_tasks == ("libero_10/3",)
    assert config_from_dict(loaded.to_dict()) == loaded
    with pytest.raises(ConfigError, match=r"valid keys: .*consecutive"):
        config_from_dict({"early_stop": {"consequtive": 6}})
    with pytest.raises(ConfigError, match="<= 0"):
        config_from_dict({"costs": {"failed_action_cost": 0.5}})
    with pytest.raises(ConfigError, match="no RL config file"):
        load_config(tmp_path / "missing.yaml")


def test_critic_command_trains_saves_and_evaluates(tmp_path):
    data = tmp_path / "states.jsonl"
    write_jsonl(episode_dataset(generate_episodes(16, seed=2)), data)
    out = tmp_path / "critic.pt"
    plot = tmp_path / "calibration.png"
    res = CliRunner().invoke(app, ["critic", "--data", str(data), "--out", str(out), "--epochs", "2",
                                   "--calibration-plot", str(plot)])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output.strip().splitlines()[-1])
    assert 0.0 <= report["heldout_auc"] <= 1.0 and report["heldout_n_states"] > 0
    assert plot.read_bytes()[:8] == PNG
    loaded = load_critic(out)
    assert "libero_spatial/0" in loaded.critic.config.task_ids
    assert loaded.optimizer_state is not None
    res = CliRunner().invoke(app, ["critic", "--data", str(data), "--init", str(out), "--eval-only"])
    assert res.exit_code == 0, res.output
    assert "all_auc" in json.loads(res.output.strip().splitlines()[-1])
    res = CliRunner().invoke(app, ["critic", "--data", str(data), "--eval-only"])
    assert res.exit_code == 1 and "--init" in res.output


def test_train_command_validates_config_and_names_what_is_missing(tmp_path):
    good = tmp_path / "rl.json"
    good.write_text(json.dumps({"output_dir": str(tmp_path / "run")}))
    res = CliRunner().invoke(app, ["train", "--config", str(good)])
    assert res.exit_code == 1 and "rollout.tasks" in res.output
    no_model = tmp_path / "rl2.json"
    no_model.write_text(json.dumps({"output_dir": str(tmp_path / "run"), "rollout": {"tasks": ["tabletop/pick_cube"]},
                                    "sft_model": str(tmp_path / "nothing")}))
    res = CliRunner().invoke(app, ["train", "--config", str(no_model)])
    assert res.exit_code == 1 and "not a local model directory" in res.output
    res = CliRunner().invoke(app, ["schema"])
    keys = [json.loads(line)["key"] for line in res.output.splitlines()]
    assert {"rollout.tasks", "endpoint.kind", "early_stop.threshold", "distributed.strategy"} <= set(keys)
    with pytest.raises(ConfigError, match=r"endpoint\.kind external needs endpoint\.base_url"):
        config_from_dict({"endpoint": {"kind": "external"}})
    with pytest.raises(ConfigError, match=r"rollout\.pool"):
        config_from_dict({"rollout": {"pool": "threads"}})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rounds": 3}))
    res = CliRunner().invoke(app, ["train", "--config", str(bad)])
    assert res.exit_code == 1 and "valid keys" in res.output


def test_critic_warm_start_from_data_trains_the_critic_and_fits_its_normaliser(tmp_path):
    from captain_training.rl.trainer import _critic

    data = tmp_path / "states.jsonl"
    dataset = episode_dataset(generate_episodes(8, seed=5))
    write_jsonl(dataset, data)
    fresh, _ = _critic(config_from_dict({"rollout": {"tasks": ["libero_goal/3"]}}))
    warm, _ = _critic(config_from_dict({"rollout": {"tasks": ["libero_goal/3"]},
                                        "critic": {"warm_start_data": str(data), "warm_start_epochs": 2}}))
    for name, t in warm.state_dict().items():
        if "normal" in name or "mean" in name or "std" in name:
            assert not torch.equal(t, fresh.state_dict()[name]), name
    x = dataset.features[:20]
    v_fresh = fresh.value(x, dataset.request_index[:20], dataset.task[:20])
    v_warm = warm.value(x, dataset.request_index[:20], dataset.task[:20])
    assert not torch.allclose(torch.as_tensor(v_fresh), torch.as_tensor(v_warm))
    assert set(dataset.task.tolist()) <= set(warm.config.task_ids)
    with pytest.raises(ConfigError, match="warm_start_data"):
        _critic(config_from_dict({"critic": {"warm_start_data": str(tmp_path / "none.jsonl")}}))
    with pytest.raises(ConfigError, match="warm_start_epochs"):
        config_from_dict({"critic": {"warm_start_epochs": 0}})
    with pytest.raises(ConfigError, match="policy_warmup_steps"):
        config_from_dict({"policy_warmup_steps": -1})
    with pytest.raises(ConfigError, match=r"valid keys: .*warm_start_data"):
        config_from_dict({"critic": {"warm_start": "x"}})
