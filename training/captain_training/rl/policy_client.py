"""The rollout side's chat-completions client: always asks for token ids and log-probabilities
and remembers which policy version answered each request.

The version comes from the reply's top-level ``policy_version`` (the local endpoint sends
it); servers that do not send one (vLLM) are at the version the rollout worker last
synchronised, given as ``policy_version`` when the client is built.
"""

from __future__ import annotations

import time
from typing import Any

from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest
from captain_harness.core.episode.policy.openai_client import OpenAIChatPolicy, OpenAIConfig, parse_completion


class RolloutChatPolicy(OpenAIChatPolicy):
    """``OpenAIChatPolicy`` that records ``versions[request_index]`` and forces token ids + logprobs."""

    name = "rl-policy"

    def __init__(self, config: OpenAIConfig, policy_version: int = 0) -> None:
        config.return_token_ids = True
        config.logprobs = True
        super().__init__(config)
        self.default_version = int(policy_version)
        self.versions: dict[int, int] = {}

    def act(self, request: PolicyRequest) -> PolicyReply:
        t0 = time.perf_counter()
        body = self.request_body(request)
        self.last_request_body = body
        payload = self.encode_body(body)
        t1 = time.perf_counter()
        data = self._post(payload)
        t2 = time.perf_counter()
        reply = parse_completion(data)
        version = data.get("policy_version")
        self.versions[request.request_index] = int(version) if version is not None else self.default_version
        reply.client_overhead_s = (t1 - t0) + (time.perf_counter() - t2)
        return reply


def make_rollout_policy(policy_version: int = 0, **options: Any) -> PolicyClient:
    """Factory for ``PolicySpec("captain_training.rl.policy_client:make_rollout_policy", {...})``:
    ``OpenAIConfig`` fields plus ``policy_version``."""
    return RolloutChatPolicy(OpenAIConfig(**options), policy_version=policy_version)
