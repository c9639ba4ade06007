"""End to end, offline: the local policy endpoint serving the tiny Qwen3.5, and `captain rl train`
running full rounds on the tabletop (rollouts -> credit -> Eq. 8 step -> weight sync -> checkpoint)
and resuming."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from captain_harness.core.episode.policy.base import PolicyRequest
from captain_harness.core.episode.prompt import PYTHON_TOOL
from captain_training.qwen.tiny_model import cached_tiny_model_dir
from captain_training.rl.cli import app
from captain_training.rl.endpoint import EndpointConfig, LocalPolicyServer, load_causal_model, tool_call_text
from captain_training.rl.logprobs import completion_logprobs, multimodal_inputs
from captain_training.rl.policy_client import make_rollout_policy
from captain_training.rl.trainer_state import latest_round, read_metrics

TASK = "tabletop/cube_on_plate"


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return cached_tiny_model_dir()


def _request(root: Path, n: int = 1) -> PolicyRequest:
    from PIL import Image

    Image.new("RGB", (64, 64), (200, 30, 30)).save(root / "obs_000_head.png")
    return PolicyRequest(episode_id="e", request_index=n, tools=[PYTHON_TOOL], image_root=root, messages=[
        {"role": "system", "content": "You control a robot arm with Python."},
        {"role": "user", "content": [{"type": "text", "text": "Put the red cube on the plate."},
                                     {"type": "image", "image": "obs_000_head.png"}]}])


@pytest.mark.slow
def test_endpoint_returns_the_models_own_token_ids_logprobs_and_syncs_weights(model_dir, tmp_path):
    with LocalPolicyServer(EndpointConfig(model_dir=str(model_dir), max_new_tokens=6, seed=1)) as server:
        client = make_rollout_policy(base_url=server.base_url, model="captain-policy", max_tokens=6)
        reply = client.act(_request(tmp_path))
        assert len(reply.completion_token_ids) == len(reply.logprobs) >= 1 and client.versions == {1: 0}
        mm = multimodal_inputs(server.processor, reply.prompt_token_ids, client.images[1])
        again = completion_logprobs(server.model, reply.prompt_token_ids, reply.completion_token_ids, mm)
        assert torch.allclose(again, torch.tensor(reply.logprobs), atol=1e-4)
        assert "<|image_pad|>" in server.tokenizer.decode(reply.prompt_token_ids)  # pixels, not "[image]"

        state = {k: v + 0.01 for k, v in server.model.state_dict().items()}
        torch.save(state, tmp_path / "policy.pt")
        body = json.dumps({"path": str(tmp_path / "policy.pt"), "version": 5}).encode()
        urllib.request.urlopen(urllib.request.Request(server.base_url + "/load_weights", data=body,
                                                      headers={"Content-Type": "application/json"}))
        client.act(_request(tmp_path, 2))
        assert client.versions[2] == 5
        assert torch.allclose(server.model.lm_head.weight, state["lm_head.weight"])

    scripted = EndpointConfig(model_dir=str(model_dir), scripted_completions=(tool_call_text("print(1)"),))
    with LocalPolicyServer(scripted, model=server.model, tokenizer=server.tokenizer) as server2:
        client = make_rollout_policy(base_url=server2.base_url, model="captain-policy")
        reply = client.act(_request(tmp_path))
        assert [c.code for c in reply.tool_calls] == ["print(1)"] and reply.reasoning == "Next step."
        mm = multimodal_inputs(server2.processor, reply.prompt_token_ids, client.images[1])
        again = completion_logprobs(server2.model, reply.prompt_token_ids, reply.completion_token_ids, mm)
        assert torch.allclose(again, torch.tensor(reply.logprobs), atol=1e-4)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.e2e
def test_one_round_changes_the_weights_and_a_resumed_run_continues(model_dir, tmp_path):
    run = tmp_path / "run"
    config = {
        "seed": 0, "output_dir": str(run), "sft_model": str(model_dir),
        "start_states_per_round": 1, "group_size": 2, "rounds_per_step": 1, "policy_learning_rate": 1e-3,
        "max_requests": 3, "monitor_every": 0, "total_rounds": 5,
        "rollout": {"tasks": [TASK], "pool": "inline", "sft_median_actions": {TASK: 0.5}},
        "endpoint": {"max_tokens": 8, "scripted_completions": [
            "print(robot.get_robot_state()['success'])", "robot.move_to(gripper='close')", "x = 1 / 0"]},
        "critic": {"hidden_units": 32, "n_members": 2},
    }
    path = tmp_path / "rl.yaml"
    path.write_text(yaml.safe_dump(config))
    res = CliRunner().invoke(app, ["train", "--config", str(path), "--rounds", "1"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert (out["first_round"], out["last_round"], out["policy_version"]) == (0, 0, 1)
    (m0,) = read_metrics(run)
    assert m0["episodes_collected"] == 2 and m0["policy_stepped"] == 1 and m0["policy_requests_trained"] >= 2
    assert m0["requests_mean"] == 3 and m0["policy_grad_norm"] > 0
    sft = load_causal_model(model_dir).state_dict()
    after0 = torch.load(run / "round_000000" / "policy.pt", weights_only=True)
    changed = [k for k in sft if not torch.equal(sft[k], after0[k])]
    assert changed, "the RL step did not change any weight"

    res = CliRunner().invoke(app, ["train", "--config", str(path), "--rounds", "1"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert (out["first_round"], out["last_round"], out["policy_version"]) == (1, 1, 2)
    assert latest_round(run) == 1 and [m["round"] for m in read_metrics(run)] == [0, 1]
    rows = [json.loads(x) for x in (run / "rollouts" / "round_000001" / "episodes.jsonl").read_text().splitlines()]
    assert {r["job"]["policy_options"]["policy_version"] for r in rows} == {1}  # served the synced weights
    after1 = torch.load(run / "round_000001" / "policy.pt", weights_only=True)
    assert any(not torch.equal(after0[k], after1[k]) for k in after0)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.e2e
def test_fsdp2_trainer_in_one_process_runs_a_round_and_resumes_from_shards(model_dir, tmp_path):
    run = tmp_path / "run"
    config = {
        "output_dir": str(run), "sft_model": str(model_dir), "start_states_per_round": 1, "group_size": 2,
        "rounds_per_step": 1, "policy_learning_rate": 1e-3, "max_requests": 2, "monitor_every": 0,
        "total_rounds": 2, "distributed": {"strategy": "fsdp2", "device": "cpu", "precision": "fp32"},
        "rollout": {"tasks": [TASK], "pool": "inline", "sft_median_actions": {TASK: 0.5}},
        "endpoint": {"scripted_completions": ["robot.move_to(gripper='close')", "x = 1 / 0"]},
        "critic": {"hidden_units": 16, "n_members": 2},
    }
    path = tmp_path / "rl.yaml"
    path.write_text(yaml.safe_dump(config))
    for expected in ((0, 1), (1, 2)):
        res = CliRunner().invoke(app, ["train", "--config", str(path), "--rounds", "1"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output.strip().splitlines()[-1])
        assert (out["first_round"], out["policy_version"]) == expected
    assert (run / "policy_shards" / "checkpoints").is_dir()
    assert [m["policy_version"] for m in read_metrics(run)] == [1, 2]
    assert all(m["policy_grad_norm"] > 0 for m in read_metrics(run))


def _streaming_config(model_dir, run, mode: str, max_staleness: int, rounds: int = 2) -> dict:
    return {
        "seed": 0, "output_dir": str(run), "sft_model": str(model_dir), "start_states_per_round": 1,
        "group_size": 2, "rounds_per_step": 1, "policy_learning_rate": 1e-3, "max_requests": 2,
        "monitor_every": 0, "total_rounds": rounds, "max_staleness": max_staleness,
        "rollout": {"tasks": [TASK], "pool": "process", "workers": 2, "mode": mode},
        "endpoint": {"scripted_completions": ["robot.move_to(gripper='close')", "x = 1 / 0"]},
        "critic": {"hidden_units": 16, "n_members": 2},
    }


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.e2e
def test_streaming_rounds_overlap_the_update_record_versions_and_drop_stale_requests(model_dir, tmp_path):
    """Round 1's episodes are started before round 0's update (policy version 0 when round 1 trains
    at version 1): with max_staleness 0 every request they made before that update is dropped and
    counted (when all were, the step has nothing to learn and is skipped); the learner's idle time
    is reported."""
    from captain_training.rl.config import config_from_dict
    from captain_training.rl.trainer import train

    run = tmp_path / "run"
    summary = train(config_from_dict(_streaming_config(model_dir, run, "streaming", max_staleness=0)))
    m0, m1 = summary.metrics
    assert m0["rollout_mode_streaming"] == 1.0 and m0["policy_stepped"] == 1.0 and m0["policy_stale_dropped"] == 0
    assert m1["policy_stale_dropped"] > 0
    # Requests an episode of round 1 made after round 0's update were served at version 1 and are
    # not stale; how many there are depends on scheduling (none on an idle machine).
    if m1["policy_requests_trained"] == 0:
        assert m1["policy_stepped"] == 0.0 and m1["policy_step_skipped"] == 1.0 and summary.policy_version == 1
    else:
        assert m1["policy_stepped"] == 1.0 and summary.policy_version == 2
    rows = [json.loads(x) for x in (run / "rollouts" / "round_000001" / "episodes.jsonl").read_text().splitlines()]
    assert {r["job"]["policy_options"]["policy_version"] for r in rows} == {0}  # started before the step
    assert 0.0 <= m1["learner_idle_fraction"] < 1.0 and m1["training_episodes_per_hour"] > 0
