"""Policy clients: the interface, an OpenAI-compatible chat-completions client and a
replay policy, plus ``make_policy`` to build one by name."""

from captain_harness.core.episode.policy.base import (
    PolicyClient,
    PolicyReply,
    PolicyRequest,
    ToolCall,
    new_call_id,
)
from captain_harness.core.episode.policy.registry import PolicySpec, available_policies, make_policy

__all__ = [
    "PolicyClient",
    "PolicyReply",
    "PolicyRequest",
    "PolicySpec",
    "ToolCall",
    "available_policies",
    "make_policy",
    "new_call_id",
]
