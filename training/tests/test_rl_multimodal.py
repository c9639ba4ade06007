"""Multimodal log-probabilities end to end on the tiny Qwen3.5 VLM: the local endpoint renders a
request with two images through the model's processor (as vLLM would), and the trainer's
recomputation from the recorded ids and image files matches the sampler token by token."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from captain_harness.core.episode.policy.base import PolicyRequest
from captain_harness.core.episode.prompt import PYTHON_TOOL
from captain_training.models.family import load_processor
from captain_training.qwen.tiny_model import cached_tiny_model_dir
from captain_training.rl.endpoint import EndpointConfig, LocalPolicyServer, load_causal_model
from captain_training.rl.errors import RLError
from captain_training.rl.logprobs import completion_logprobs, multimodal_inputs
from captain_training.rl.policy_client import make_rollout_policy

PAD = "<|image_pad|>"


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _image(path: Path, seed: int, size: int = 96) -> str:
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path)
    return path.name


def _request(root: Path, first: str, second: str) -> PolicyRequest:
    return PolicyRequest(episode_id="e", request_index=1, tools=[PYTHON_TOOL], image_root=root, messages=[
        {"role": "system", "content": "You control a robot arm with Python."},
        {"role": "user", "content": [{"type": "text", "text": "Put the red cube on the plate. Head camera:"},
                                     {"type": "image", "image": first},
                                     {"type": "text", "text": "Wrist camera:"},
                                     {"type": "image", "image": second}]}])


@pytest.mark.slow
def test_sampler_and_trainer_logprobs_agree_on_a_two_image_prompt_and_follow_the_pixels(tmp_path):
    model_dir = cached_tiny_model_dir()
    a, b = _image(tmp_path / "head.png", 1), _image(tmp_path / "wrist.png", 2)
    with LocalPolicyServer(EndpointConfig(model_dir=str(model_dir), max_new_tokens=12, seed=3)) as server:
        assert server.processor is not None
        client = make_rollout_policy(base_url=server.base_url, model="captain-policy", max_tokens=12)
        reply = client.act(_request(tmp_path, a, b))
    prompt, completion = reply.prompt_token_ids, reply.completion_token_ids
    assert len(completion) == len(reply.logprobs) >= 1
    images = client.images[1]
    assert [Path(p).name for p in images] == ["head.png", "wrist.png"]
    processor = load_processor(model_dir)
    pad_id = processor.tokenizer.convert_tokens_to_ids(PAD)
    assert prompt.count(pad_id) >= 2  # both images expanded into the prompt ids the server returned

    trainer_model = load_causal_model(model_dir).train()  # the trainer's own copy, from the directory
    mm = multimodal_inputs(processor, prompt, images)
    assert mm["image_grid_thw"].shape[0] == 2 and int(mm["mm_token_type_ids"].sum()) == prompt.count(pad_id)
    again = completion_logprobs(trainer_model, prompt, completion, mm)
    parity = float((again.detach() - torch.tensor(reply.logprobs)).abs().max())
    assert parity <= 1e-4, parity

    # the same ids with one image changed: the log-probabilities move
    c = _image(tmp_path / "other.png", 7)
    moved = completion_logprobs(trainer_model, prompt, completion,
                                multimodal_inputs(processor, prompt, [images[0], str(tmp_path / c)]))
    assert float((moved.detach() - again.detach()).abs().max()) > 1e-3
    # the ids alone (pixels dropped) are a different distribution: refused, not silently scored
    with pytest.raises(RLError, match="no image was recorded"):
        multimodal_inputs(processor, prompt, [])
    with pytest.raises(RLError, match="not the ones the server saw"):
        multimodal_inputs(processor, prompt, [images[0]])
    # the gradient reaches the language model through the multimodal forward
    trained = copy.deepcopy(trainer_model)
    completion_logprobs(trained, prompt, completion, mm).sum().backward()
    assert trained.lm_head.weight.grad is not None and float(trained.lm_head.weight.grad.abs().sum()) > 0
