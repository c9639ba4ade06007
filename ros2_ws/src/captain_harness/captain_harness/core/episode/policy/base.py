"""The policy interface: a policy gets the rendered history and returns a reply.

A reply is what one model call produced: visible text, reasoning (the thinking
channel), the python tool calls (code cells, run in order), and, when the server
returns them, the prompt and completion token ids and the completion logprobs (for RL).

A host-side policy (e.g. a privileged teacher) may set ``wants_host_context``; it then
receives ``PolicyRequest.host_context`` (e.g. the simulator snapshot). That value lives
only in the host process: it never enters the sandboxed session or the records.
"""

from __future__ import annotations

import abc
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from captain_harness.core.episode.prompt import PYTHON_TOOL


@dataclass
class PolicyRequest:
    """One request to the policy.

    Attributes:
        episode_id: the episode's id.
        request_index: 1-based request number.
        messages: the rendered history in the row format (images as paths relative to
            ``image_root``).
        tools: the tool schemas (the single ``python`` tool).
        image_root: the folder the image paths are relative to (the records root).
        budget: the episode budget counters (the ``budget`` dict of the results).
        host_context: host-only context for privileged policies (None for others).
    """

    episode_id: str
    request_index: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=lambda: [PYTHON_TOOL])
    image_root: Path = Path(".")
    budget: dict[str, Any] = field(default_factory=dict)
    host_context: Any = None


@dataclass
class ToolCall:
    """One python tool call of a reply.

    Attributes:
        id: the call id (``call_...``); answered by the tool message with this id.
        code: the Python source (``arguments.input``).
        error: set when the call was malformed (wrong tool name, arguments that are not
            ``{"input": <string>}``); the harness answers with this text and runs nothing.
    """

    id: str
    code: str
    error: str | None = None


@dataclass
class PolicyReply:
    """What one model call produced.

    Attributes:
        content: visible text of the reply.
        reasoning: the thinking text.
        tool_calls: python tool calls, in order.
        finish_reason: the server's finish reason (``tool_calls``, ``stop``, ``length``).
        usage: token usage as the server reports it (``prompt_tokens``, ``completion_tokens``).
        prompt_token_ids / completion_token_ids: token ids when the server returns them.
        logprobs: per-token logprobs of the completion when the server returns them.
        model: the model name that answered.
        client_overhead_s: time the client itself spent (building the request, encoding
            images, parsing the reply), s; counted as harness time, not policy time.
    """

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    model: str | None = None
    client_overhead_s: float = 0.0

    def assistant_message(self) -> dict[str, Any]:
        """The reply as an assistant message in the row format."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.content,
            "reasoning_content": self.reasoning,
        }
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": "python", "arguments": {"input": c.code}},
                }
                for c in self.tool_calls
            ]
        return message


def new_call_id() -> str:
    """A fresh tool-call id."""
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_tool_arguments(name: str | None, arguments: Any) -> tuple[str, str | None]:
    """(code, error) of one tool call whose ``arguments`` is a JSON string or a dict."""
    if name not in (None, "python"):
        shown = repr(name) if isinstance(name, str) else type(name).__name__
        return (
            "",
            f"Error: there is no tool named {shown[:80]}; the only tool is `python` with one argument `input`.",
        )
    args = arguments
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return "", (
                f"Error: the python tool's arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
                'send {"input": "<python source>"}.'
            )
        except (ValueError, RecursionError):
            return "", ('Error: the python tool\'s arguments nest too deeply to be read; '
                        'send {"input": "<python source>"}.')
    if not isinstance(args, dict) or not isinstance(args.get("input"), str):
        return "", 'Error: the python tool takes one argument, {"input": "<python source>"}.'
    return args["input"], None


class PolicyClient(abc.ABC):
    """A policy behind one interface. Implementations must be usable from one thread and
    may hold connections; ``close()`` releases them."""

    #: Short name used in records (``meta.origin``) and logs.
    name: str = "policy"
    #: True for host-side policies that read ``PolicyRequest.host_context``.
    wants_host_context: bool = False

    @abc.abstractmethod
    def act(self, request: PolicyRequest) -> PolicyReply:
        """One model call. Raises ``PolicyUnavailableError`` when the policy cannot be reached
        (an infrastructure failure) and ``PolicyError`` for a request it rejects."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
