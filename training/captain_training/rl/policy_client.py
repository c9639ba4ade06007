"""The rollout side's chat-completions client: always asks for token ids and log-probabilities
and remembers which policy version answered each request.

The version comes from the reply's top-level ``policy_version`` (the local endpoint sends
it); servers that do not send one (vLLM) are at the version the rollout worker last
synchronised, given as ``policy_version`` when the client is built.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest
from captain_harness.core.episode.policy.openai_client import OpenAIChatPolicy, OpenAIConfig, parse_completion


class RolloutChatPolicy(OpenAIChatPolicy):
    """``OpenAIChatPolicy`` that records ``versions[request_index]`` and forces token ids + logprobs.

    With ``candidates`` (a ``module:function`` provider, see ``candidates.py``) it reads the
    hidden snapshot before each request (host side), asks the provider for K completions and
    sends them as ``candidates`` in the body: the local endpoint then samples one of them in
    proportion to the model's likelihood (the learning check). ``chosen[request_index]``
    records the label of the candidate the server chose.
    """

    name = "rl-policy"

    def __init__(self, config: OpenAIConfig, policy_version: int = 0, candidates: str | None = None) -> None:
        config.return_token_ids = True
        config.logprobs = True
        super().__init__(config)
        self.default_version = int(policy_version)
        self.versions: dict[int, int] = {}
        self.chosen: dict[int, str] = {}
        #: the image files of each request's prompt, in the order they were sent
        self.images: dict[int, list[str]] = {}
        self._request_images: list[str] = []
        self.candidate_probs: dict[int, dict[str, float]] = {}
        self.provider = None
        if candidates:
            from captain_training.rl.candidates import resolve_provider

            self.provider = resolve_provider(candidates)
            self.wants_host_context = True

    def data_url(self, root: Path, path: str) -> bytes:
        """The parent's data URL, remembering the file (the trainer reloads the same pixels)."""
        self._request_images.append(str((Path(root) / path).resolve()))
        return super().data_url(root, path)

    def act(self, request: PolicyRequest) -> PolicyReply:
        t0 = time.perf_counter()
        self._request_images = []
        body = self.request_body(request)
        self.images[request.request_index] = list(self._request_images)
        labels: list[str] = []
        if self.provider is not None:
            offered = self.provider(request.host_context, request.request_index)
            labels = [label for label, _ in offered]
            body["candidates"] = [text for _, text in offered]
        self.last_request_body = body
        payload = self.encode_body(body)
        t1 = time.perf_counter()
        data = self._post(payload)
        t2 = time.perf_counter()
        reply = parse_completion(data)
        version = data.get("policy_version")
        self.versions[request.request_index] = int(version) if version is not None else self.default_version
        index = data.get("candidate_index")
        if labels and isinstance(index, int) and 0 <= index < len(labels):
            self.chosen[request.request_index] = labels[index]
            probs = data.get("candidate_probs") or []
            if len(probs) == len(labels):
                self.candidate_probs[request.request_index] = {k: float(v) for k, v in zip(labels, probs, strict=True)}
        reply.client_overhead_s = (t1 - t0) + (time.perf_counter() - t2)
        return reply


def make_rollout_policy(policy_version: int = 0, candidates: str | None = None, **options: Any) -> PolicyClient:
    """Factory for ``PolicySpec("captain_training.rl.policy_client:make_rollout_policy", {...})``:
    ``OpenAIConfig`` fields plus ``policy_version`` and ``candidates`` (a provider reference)."""
    return RolloutChatPolicy(OpenAIConfig(**options), policy_version=policy_version, candidates=candidates)
