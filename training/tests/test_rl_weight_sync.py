"""Weight sync after an optimiser step: the trainer's client against the local endpoint serving
the tiny Qwen3.5 (both protocols), the vLLM worker extension's loading, and the failures."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from captain_training.qwen.tiny_model import cached_tiny_model_dir
from captain_training.rl.endpoint import EndpointConfig, LocalPolicyServer
from captain_training.rl.errors import RLError
from captain_training.rl.weight_sync import PolicyWeightLoader, push_weights, server_root


@pytest.fixture(scope="module")
def server():
    with LocalPolicyServer(EndpointConfig(model_dir=str(cached_tiny_model_dir()), max_new_tokens=4)) as srv:
        yield srv


def _shifted(model: torch.nn.Module, delta: float, path: Path) -> dict[str, torch.Tensor]:
    state = {k: v + delta for k, v in model.state_dict().items()}
    torch.save(state, path)
    return state


@pytest.mark.parametrize("protocol", ["collective_rpc", "load_weights"])
def test_push_weights_loads_the_new_policy_into_the_server(server, tmp_path: Path, protocol: str) -> None:
    version = server.policy_version + 3
    state = _shifted(server.model, 0.02, tmp_path / "policy.pt")
    assert not torch.allclose(server.model.lm_head.weight, state["lm_head.weight"])
    answer = push_weights(server.base_url, tmp_path / "policy.pt", version, protocol)
    assert server.policy_version == version
    assert torch.allclose(server.model.lm_head.weight, state["lm_head.weight"])
    if protocol == "collective_rpc":
        assert answer["results"] == [{"version": version, "tensors": len(state)}]


def test_refusals_and_unreachable_servers_are_clear_errors(server, tmp_path: Path) -> None:
    with pytest.raises(RLError, match="no weights at"):
        push_weights(server.base_url, tmp_path / "missing.pt", 9)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(RLError, match="cannot load the state dict"):
        push_weights(server.base_url, tmp_path / "junk.pt", 9)
    before = {k: v.clone() for k, v in server.model.state_dict().items()}
    misfit = {k: v + 1.0 for k, v in before.items()}
    misfit["lm_head.weight"] = torch.zeros(2, 2)
    torch.save(misfit, tmp_path / "small.pt")
    with pytest.raises(RLError, match="do not fit the served model"):
        push_weights(server.base_url, tmp_path / "small.pt", 9)
    after = server.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing half-loaded
    with pytest.raises(RLError, match="weight_sync 'nccl' is not one of"):
        push_weights(server.base_url, tmp_path / "small.pt", 9, "nccl")
    with pytest.raises(RLError, match="failed"):
        push_weights("http://127.0.0.1:9/v1", tmp_path / "small.pt", 9)
    assert server.policy_version != 9
    assert server_root("http://h:8000/v1/") == "http://h:8000" and server_root("http://h:8000") == "http://h:8000"


class _NamedCopy(torch.nn.Module):
    """Stands in for a vLLM model: ``load_weights`` takes (checkpoint name, tensor) pairs."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 2)
        self.received: list[str] = []

    def load_weights(self, weights) -> set[str]:
        params = dict(self.named_parameters())
        for name, tensor in weights:
            self.received.append(name)
            params[name].data.copy_(tensor)
        return set(self.received)


def test_the_vllm_worker_extension_hands_the_state_dict_to_load_weights(tmp_path: Path) -> None:
    model = _NamedCopy()
    worker = types.SimpleNamespace(model_runner=types.SimpleNamespace(model=model))
    state = {"proj.weight": torch.full((2, 3), 0.5), "proj.bias": torch.tensor([1.0, -1.0])}
    torch.save(state, tmp_path / "policy_v4.pt")
    out = PolicyWeightLoader.captain_load_policy_weights(worker, str(tmp_path / "policy_v4.pt"), "4")
    assert out == {"version": 4, "tensors": 2} and sorted(model.received) == ["proj.bias", "proj.weight"]
    assert torch.equal(model.proj.weight, state["proj.weight"]) and torch.equal(model.proj.bias, state["proj.bias"])
