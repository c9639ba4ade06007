"""A policy that plays recorded replies: for tests, debugging and reproducing an episode.

Sources: an episode's rows (``rows.jsonl`` in the CaPtain-SFT-Data row format: the last
message of each row is the assistant turn of that request), an episode folder holding
one, or a plain list of code cells per request. When the recording runs out the policy
replies without a tool call, which ends the episode.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from captain_harness.core.episode.errors import PolicyError
from captain_harness.core.episode.policy.base import (
    PolicyClient,
    PolicyReply,
    PolicyRequest,
    ToolCall,
    new_call_id,
    parse_tool_arguments,
)


class ReplayPolicy(PolicyClient):
    """Plays ``replies[k-1]`` at request k."""

    name = "replay"

    def __init__(self, replies: Sequence[PolicyReply]) -> None:
        self.replies = list(replies)

    @classmethod
    def from_cells(cls, requests: Sequence[str | Sequence[str]], reasoning: str = "") -> ReplayPolicy:
        """One reply per item: a code string (one cell) or a list of code strings (cells run in order)."""
        replies = []
        for item in requests:
            cells = [item] if isinstance(item, str) else list(item)
            replies.append(
                PolicyReply(
                    reasoning=reasoning,
                    tool_calls=[ToolCall(new_call_id(), c) for c in cells],
                    finish_reason="tool_calls" if cells else "stop",
                )
            )
        return cls(replies)

    @classmethod
    def from_record(cls, path: str | Path) -> ReplayPolicy:
        """The replies of a recorded episode (``rows.jsonl`` or its episode folder)."""
        p = Path(path)
        if p.is_dir():
            p = p / "rows.jsonl"
        if not p.is_file():
            raise PolicyError(
                f"no episode rows at {p}; pass a rows.jsonl file or an episode folder holding one"
            )
        by_request: dict[int, PolicyReply] = {}
        with p.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    message = row["messages"][-1]
                    index = int(row["meta"]["request_index"])
                except (ValueError, KeyError, IndexError, TypeError) as exc:
                    raise PolicyError(f"{p}:{n} is not an episode row ({exc})") from exc
                if message.get("role") != "assistant":
                    raise PolicyError(
                        f"{p}:{n}: the last message is {message.get('role')!r}, not the assistant turn"
                    )
                by_request[index] = reply_from_message(message)
        if not by_request:
            raise PolicyError(f"{p} holds no rows")
        return cls([by_request.get(k, PolicyReply()) for k in range(1, max(by_request) + 1)])

    def act(self, request: PolicyRequest) -> PolicyReply:
        k = request.request_index - 1
        if 0 <= k < len(self.replies):
            return self.replies[k]
        return PolicyReply(content="(the recording has no more requests)", finish_reason="stop")


def reply_from_message(message: dict) -> PolicyReply:
    """An assistant message in the row format -> ``PolicyReply``."""
    calls = []
    for c in message.get("tool_calls") or []:
        fn = c.get("function") or {}
        code, error = parse_tool_arguments(fn.get("name"), fn.get("arguments"))
        calls.append(ToolCall(c.get("id") or new_call_id(), code, error))
    content = message.get("content")
    return PolicyReply(
        content=content if isinstance(content, str) else "",
        reasoning=str(message.get("reasoning_content") or ""),
        tool_calls=calls,
        finish_reason="tool_calls" if calls else "stop",
    )
