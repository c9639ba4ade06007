"""The episode's conversation and its rendering into chat messages.

Messages are kept in the CaPtain-SFT-Data row format (the format the model is trained
on and the records store): ``content`` is a string or a list of ``{"type": "text"}`` and
``{"type": "image", "image": <path relative to the dataset root>}`` parts, assistant
turns carry ``reasoning_content`` and ``tool_calls`` whose ``arguments`` is a dict
``{"input": <python source>}``.

Rendering applies the context policy:

* only the ``max_images`` (12) most recent images are kept; older image parts become
  ``[image omitted: <file>]``;
* when the estimated prompt passes ``compact_at_tokens`` (60k), the oldest turns are
  removed one by one (the system prompt, the environment context, the task request and
  the most recent turns stay) and summarised in one ``<context_compaction>`` notice,
  placed after the task request, that lists the robot calls they ran and the names
  they defined, and warns that the scene may have changed. Compaction is permanent.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from captain_harness.core.episode.tokens import IMAGE_TOKENS_512, TokenCounter, estimate_tokens

_MESSAGE_OVERHEAD_TOKENS = 6
_OMITTED_TOKENS = 12


@dataclass
class HistoryConfig:
    """Context policy.

    Attributes:
        max_images: images kept in the rendered history (paper: 12).
        compact_at_tokens: compact older turns when the estimated prompt passes this
            (paper: 60k of a 65,536-token window).
        keep_recent_turns: turns never compacted (the newest ones).
        image_tokens: tokens one image costs in the prompt.
        tools_tokens: tokens of the tool schema and chat-template framing.
        count_tokens: text token counter (default: the estimate of ``tokens.py``).
        max_commands_per_turn: robot calls listed per request in the notice.
    """

    max_images: int = 12
    compact_at_tokens: int = 60_000
    keep_recent_turns: int = 2
    image_tokens: int = IMAGE_TOKENS_512
    tools_tokens: int = 200
    count_tokens: TokenCounter = estimate_tokens
    max_commands_per_turn: int = 12


@dataclass
class Turn:
    """One request's reply and what the harness returned.

    Attributes:
        request_index: 1-based request number.
        assistant: the assistant message (row format).
        tools: the tool messages answering its tool calls (row format), in order.
        commands: the robot calls the request's cells ran, e.g. ``"move_to: ok"``.
        defined: names the request's code defined at top level (functions, variables).
    """

    request_index: int
    assistant: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    defined: list[str] = field(default_factory=list)
    _tokens: int | None = field(default=None, repr=False)
    _images: int | None = field(default=None, repr=False)

    def messages(self) -> list[dict[str, Any]]:
        """The turn's messages in order."""
        return [self.assistant, *self.tools]


def text_of(message: dict[str, Any]) -> str:
    """All text of a message (content, reasoning, tool-call code), for token counts."""
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    if message.get("reasoning_content"):
        parts.append(str(message["reasoning_content"]))
    for call in message.get("tool_calls") or []:
        args = call.get("function", {}).get("arguments")
        parts.append(args.get("input", "") if isinstance(args, dict) else str(args or ""))
    return "\n".join(parts)


def image_paths(message: dict[str, Any]) -> list[str]:
    """Paths of the image parts of a message, in order."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p["image"] for p in content if isinstance(p, dict) and p.get("type") == "image"]


def defined_names(code: str, limit: int = 20) -> list[str]:
    """Top-level functions, classes and variables a cell defines (for the compaction notice)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.append(n.id)
    seen: list[str] = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen[:limit]


class History:
    """The conversation of one episode. See the module docstring.

    Args:
        system: the system message text (harness prompt with TASK.md).
        environment: the ``<environment_context>`` text.
        task_text: the task request text.
        task_images: row paths of the initial head and wrist images.
        config: the context policy.
    """

    def __init__(self, system: str, environment: str, task_text: str, task_images: list[str],
                 config: HistoryConfig | None = None) -> None:
        self.config = config or HistoryConfig()
        self.prefix: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": environment},
            {"role": "user", "content": [{"type": "text", "text": task_text},
                                         *({"type": "image", "image": p} for p in task_images)]},
        ]
        self.turns: list[Turn] = []
        self.compacted: list[Turn] = []
        self.scale = 1.0
        self._prefix_tokens = sum(self._message_tokens(m) for m in self.prefix)
        self._prefix_images = sum(len(image_paths(m)) for m in self.prefix)
        self._notice: dict[str, Any] | None = None

    # --------------------------------------------------------------------- turns
    def add(self, turn: Turn) -> None:
        """Append one request's turn."""
        self.turns.append(turn)

    def calibrate(self, estimated_tokens: int, actual_prompt_tokens: int | None) -> None:
        """Rescale later estimates with the prompt token count the server reported for a
        prompt estimated at ``estimated_tokens``."""
        if actual_prompt_tokens and estimated_tokens > 0:
            self.scale = min(3.0, max(0.5, actual_prompt_tokens / (estimated_tokens / self.scale)))

    # ------------------------------------------------------------------- tokens
    def _message_tokens(self, message: dict[str, Any]) -> int:
        return self.config.count_tokens(text_of(message)) + _MESSAGE_OVERHEAD_TOKENS

    def _turn_cost(self, turn: Turn) -> tuple[int, int]:
        if turn._tokens is None:
            turn._tokens = sum(self._message_tokens(m) for m in turn.messages())
            turn._images = sum(len(image_paths(m)) for m in turn.messages())
        return turn._tokens, turn._images or 0

    def estimate_tokens(self) -> int:
        """Estimated prompt tokens of the next render (before the next compaction)."""
        text = self._prefix_tokens + self.config.tools_tokens
        images = self._prefix_images
        for turn in self.turns:
            t, i = self._turn_cost(turn)
            text += t
            images += i
        if self._notice is not None:
            text += self._message_tokens(self._notice)
        kept = min(images, self.config.max_images)
        return int(self.scale * (text + kept * self.config.image_tokens + (images - kept) * _OMITTED_TOKENS))

    # -------------------------------------------------------------- compaction
    def _compact(self) -> None:
        cfg = self.config
        changed = False
        while len(self.turns) > cfg.keep_recent_turns and self.estimate_tokens() > cfg.compact_at_tokens:
            self.compacted.append(self.turns.pop(0))
            changed = True
            self._notice = self._notice_message()  # its size counts in the next estimate
        if changed:
            self._notice = self._notice_message()

    def _notice_message(self) -> dict[str, Any]:
        first, last = self.compacted[0].request_index, self.compacted[-1].request_index
        span = f"request {first}" if first == last else f"requests {first}-{last}"
        lines = ["<context_compaction>",
                 f"To stay within the context window, {span} were removed from this conversation. They ran:"]
        defined: list[str] = []
        for turn in self.compacted:
            cmds = turn.commands[: self.config.max_commands_per_turn]
            more = len(turn.commands) - len(cmds)
            text = "; ".join(cmds) if cmds else "no robot calls"
            if more > 0:
                text += f"; ... {more} more"
            lines.append(f"- request {turn.request_index}: {text}")
            defined += [n for n in turn.defined if n not in defined]
        lines.append("The scene may have changed since then: observe again before relying on earlier images, "
                     "positions or detections.")
        if defined:
            lines.append("The Python session still holds what those requests defined, e.g. "
                         + ", ".join(defined[:30]) + ".")
        lines.append("</context_compaction>")
        return {"role": "user", "content": "\n".join(lines)}

    # ------------------------------------------------------------------- render
    def render(self) -> list[dict[str, Any]]:
        """The messages of the next request (compaction and the image window applied).
        Stored messages are never modified; changed messages are copies."""
        self._compact()
        messages = list(self.prefix)
        if self._notice is not None:
            messages.append(self._notice)
        for turn in self.turns:
            messages.extend(turn.messages())
        return self._apply_image_window(messages)

    def _apply_image_window(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        budget = self.config.max_images
        out = list(messages)
        for i in range(len(out) - 1, -1, -1):
            content = out[i].get("content")
            if not isinstance(content, list):
                continue
            n = sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image")
            if n == 0:
                continue
            if n <= budget:
                budget -= n
                continue
            keep_from_end = budget
            budget = 0
            new_parts: list[dict[str, Any]] = []
            seen = 0
            for part in content:
                if isinstance(part, dict) and part.get("type") == "image":
                    seen += 1
                    if n - seen >= keep_from_end:  # older than the kept window
                        name = PurePosixPath(str(part.get("image"))).name
                        new_parts.append({"type": "text", "text": f"[image omitted: {name}]"})
                        continue
                new_parts.append(part)
            out[i] = {**out[i], "content": new_parts}
        return out


def row_images(messages: list[dict[str, Any]]) -> list[str]:
    """Every image path of a rendered message list, in order of appearance."""
    return [p for m in messages for p in image_paths(m)]
